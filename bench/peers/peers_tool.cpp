// bench/peers helper (timewarp-bench-peers): the parts of the peer benchmark that want a
// seeded generator or a tight loop; bench/peers/run does the rest. Subcommands:
//
//   small DIR [--files N] [--seed S]      N files of 1-8 KiB of random bytes in 100 folders
//   big DIR [--mib N] [--seed S]          N MiB of text-like content in 8 files, 2 folders
//   tree DIR [--files N] [--seed S]       a synthetic tree of a real system's shape, for the
//                                         scale workload (its shape below, make_tree)
//   change DIR [--seed S] [--random]      the incremental step: 1 % of the regular files get
//                                         1-8 KiB appended, 0.5 % are deleted, 0.5 % new
//                                         files of 1-8 KiB appear, then one folder is renamed
//   append FILE [--mib N] [--seed S]      appends N MiB of text-like content
//   compare A B                           A and B hold the same tree: names, types, modes,
//                                         owners, modification times (to the nanosecond,
//                                         folders and links too), bytes, symlink targets
//                                         (exit 1, differences listed)
//   versions DIR [--count N] [--window W] [--archiver PATH]
//                                         N versions of one small file, one timewarp-archiver
//                                         driven over its line protocol; figures for the
//                                         first W versions and the last W
//   touch-memory                          writes once to all the memory the machine has
//                                         available but 1 GiB, then frees it (below)
//
// Text-like content is the generator of bench/archive (bench/common/content.hpp).
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "bench/common/content.hpp"
#include "common/escape.hpp"
#include "common/process.hpp"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using tw::bench::Content;
using tw::bench::write_file;

std::uint64_t kib_1_to_8(std::mt19937_64& random) { return 1024 + random() % (7 * 1024 + 1); }

void make_small(const std::string& dir, int files, std::uint64_t seed) {
  std::mt19937_64 random(seed);
  const int folders = std::min(files, 100);
  for (int i = 0; i < files; ++i) {
    const std::string sub = fmt::format("{}/d{:03}", dir, i % folders);
    if (i < folders) fs::create_directories(sub);
    write_file(fmt::format("{}/file-{:05}.bin", sub, i), kib_1_to_8(random), random,
               Content::Random);
  }
}

void make_big(const std::string& dir, int mib, std::uint64_t seed) {
  std::mt19937_64 random(seed);
  const std::uint64_t each = (static_cast<std::uint64_t>(mib) << 20) / 8;
  for (int i = 0; i < 8; ++i) {
    const std::string sub = fmt::format("{}/part{}", dir, i / 4);
    fs::create_directories(sub);
    write_file(fmt::format("{}/large-{}.txt", sub, i), each, random);
  }
}

// The synthetic tree of the scale workload: the shape of a system's /usr or a home folder,
// at any size. For N files:
//   folders   N / 12 (as in /usr/share: 57,472 files in 4,480 folders), at /usr/share's
//             depths (1 to 10, most at 2 to 5; median 4), each under a folder one level up,
//             half the time the last one made there (folders come in clusters);
//   files     spread over the folders by a heavy-tailed weight: a fifth of the folders hold
//             subfolders only, the rest a Pareto share (alpha 1.1) of at most 4 % of N. At
//             500,000 files: a median of 3 files a folder, p90 15, p99 122, and the largest
//             ~20,000 (/usr/share/man/man1 holds 18,085 entries); 41 folders of more than
//             1,024 hold a quarter of the files;
//   sizes     1 % empty; one file in 2,000 large, 1-16 MiB log-uniform; the rest
//             log-normal, median 1.5 KiB, sigma 1.2, under 1 MiB. At 500,000 files: median
//             1.5 KiB, p90 7 KiB, p99 25 KiB, 2.67 GiB in all (4.1 GiB of disk blocks);
//   content   seven files in ten text-like, the rest random bytes (bench/common/content.hpp);
//   modes     one file in ten 0755, the rest 0644;
//   symlinks  one beside every 19th file (26,160 at 500,000): nine in ten to that file, the
//             rest to the folder above, one in fifty dangling.
// The same seed gives the same tree (with the same C++ library). Prints the shape it made.
struct TreeShape {
  std::vector<int> depth;      // of each folder
  std::vector<fs::path> dirs;  // relative to the root; dirs[0] is the root
};

TreeShape make_folders(const fs::path& root, std::size_t folders, std::mt19937_64& random) {
  // The share of the folders at each depth, 1 to 10 (/usr/share's, with a narrower top).
  static const double kDepthShare[] = {0.5, 25, 19, 20, 18, 9, 4, 2.5, 1, 0.5};
  static const char* const kNames[] = {"lib",  "share", "doc",     "src", "include", "data",
                                       "test", "icons", "locale",  "man", "config",  "modules",
                                       "util", "core",  "plugins", "res", "assets",  "common"};
  std::discrete_distribution<int> depth_of(std::begin(kDepthShare), std::end(kDepthShare));
  std::vector<std::vector<std::size_t>> at_depth{{0}};  // the folders at each depth
  TreeShape shape{{0}, {fs::path()}};
  for (std::size_t i = 1; i < folders; ++i) {
    const int depth = std::min<int>(depth_of(random) + 1, static_cast<int>(at_depth.size()));
    const auto& above = at_depth[static_cast<std::size_t>(depth - 1)];
    // Half the time beside the last folder made at that depth: folders come in clusters.
    const std::size_t parent = random() % 2 == 0 ? above.back() : above[random() % above.size()];
    const auto& name = kNames[random() % std::size(kNames)];
    shape.dirs.push_back(shape.dirs[parent] / fmt::format("{}-{}", name, i));
    shape.depth.push_back(depth);
    if (at_depth.size() == static_cast<std::size_t>(depth)) at_depth.emplace_back();
    at_depth[static_cast<std::size_t>(depth)].push_back(i);
  }
  for (const auto& d : shape.dirs) fs::create_directories(root / d);
  return shape;
}

// The p-th percentile of `v` (sorted in place).
template <typename T>
T percentile(std::vector<T>& v, double p) {
  std::sort(v.begin(), v.end());
  return v.empty() ? T{} : v[static_cast<std::size_t>(p * static_cast<double>(v.size() - 1))];
}

std::uint64_t tree_file_size(std::mt19937_64& random) {
  static constexpr std::uint64_t kSmallMax = (1 << 20) - 1;
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const double u = unit(random);
  if (u < 0.01) return 0;
  if (u < 0.01 + 1.0 / 2000) return static_cast<std::uint64_t>(std::exp2(20 + 4 * unit(random)));
  std::lognormal_distribution<double> small(std::log(1536.0), 1.2);
  return std::min(kSmallMax, static_cast<std::uint64_t>(small(random)));
}

void make_tree(const std::string& dir, int files, std::uint64_t seed) {
  std::mt19937_64 random(seed);
  const fs::path root(dir);
  const auto n = static_cast<std::size_t>(files);
  TreeShape shape = make_folders(root, std::max<std::size_t>(1, n / 12), random);
  // Each folder's share of the files.
  std::vector<double> weight(shape.dirs.size());
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (auto& w : weight) w = unit(random) < 0.2 ? 0.0 : std::pow(1.0 - unit(random), -1 / 1.1);
  if (std::all_of(weight.begin(), weight.end(), [](double w) { return w == 0; })) weight[0] = 1;
  double total = 0;
  for (const double w : weight) total += w;
  for (auto& w : weight) w = std::min(w, 0.04 * total);
  std::discrete_distribution<std::size_t> where(weight.begin(), weight.end());
  std::vector<std::size_t> per_folder(shape.dirs.size());
  for (std::size_t i = 0; i < n; ++i) ++per_folder[where(random)];
  std::vector<std::uint64_t> sizes;
  std::uint64_t bytes = 0, links = 0;
  for (std::size_t f = 0; f < shape.dirs.size(); ++f) {
    const fs::path folder = root / shape.dirs[f];
    for (std::size_t i = 0; i < per_folder[f]; ++i) {
      const std::uint64_t size = tree_file_size(random);
      const auto name = fmt::format("file-{}.{}", i, random() % 3 == 0 ? "txt" : "dat");
      const auto path = (folder / name).string();
      write_file(path, size, random, random() % 10 < 7 ? Content::Text : Content::Random);
      if (random() % 10 == 0) fs::permissions(path, fs::perms(0755));
      sizes.push_back(size);
      bytes += size;
      if (random() % 19 != 0) continue;  // one entry in twenty is a link
      const auto link = folder / fmt::format("link-{}", i);
      const auto r = random() % 50;
      fs::create_symlink(r == 0  ? fs::path("missing")
                         : r < 5 ? fs::path("..")
                                 : fs::path(name),
                         link);
      ++links;
    }
  }
  std::vector<std::size_t> counts = per_folder;
  std::vector<int> depths = shape.depth;
  const std::size_t empty =
      static_cast<std::size_t>(std::count(per_folder.begin(), per_folder.end(), 0));
  std::cout << fmt::format(
      "{} files ({:.2f} GiB) and {} symlinks in {} folders ({} without files), depth median "
      "{} max {}; files per folder median {}, p90 {}, p99 {}, max {}; file size median {} B, "
      "p90 {} B, p99 {} B, max {:.1f} MiB\n",
      n, static_cast<double>(bytes) / (1 << 30), links, shape.dirs.size(), empty,
      percentile(depths, 0.5), percentile(depths, 1.0), percentile(counts, 0.5),
      percentile(counts, 0.9), percentile(counts, 0.99), percentile(counts, 1.0),
      percentile(sizes, 0.5), percentile(sizes, 0.9), percentile(sizes, 0.99),
      static_cast<double>(percentile(sizes, 1.0)) / (1 << 20));
}

// Sorted regular files and directories (not symlinks) beneath `dir`, the root excluded.
void walk(const std::string& dir, std::vector<fs::path>& files, std::vector<fs::path>& dirs) {
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    const auto type = entry.symlink_status().type();
    if (type == fs::file_type::regular) files.push_back(entry.path());
    if (type == fs::file_type::directory) dirs.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  std::sort(dirs.begin(), dirs.end());
}

void change(const std::string& dir, std::uint64_t seed, bool random_content) {
  std::mt19937_64 random(seed);
  const Content content = random_content ? Content::Random : Content::Text;
  std::vector<fs::path> files, dirs;
  walk(dir, files, dirs);
  if (files.empty()) throw std::runtime_error("no regular file in " + dir);
  std::shuffle(files.begin(), files.end(), random);
  const std::size_t n = files.size();
  const std::size_t appended = std::max<std::size_t>(1, n / 100);
  const std::size_t deleted = std::min(n - appended, std::max<std::size_t>(1, n / 200));
  const std::size_t created = std::max<std::size_t>(1, n / 200);
  std::uint64_t appended_bytes = 0, created_bytes = 0;
  for (std::size_t i = 0; i < appended; ++i) {
    const std::uint64_t size = kib_1_to_8(random);
    write_file(files[i].string(), size, random, content, true);
    appended_bytes += size;
  }
  for (std::size_t i = appended; i < appended + deleted; ++i) fs::remove(files[i]);
  std::vector<fs::path> places = dirs;
  places.push_back(dir);
  for (std::size_t i = 0; i < created; ++i) {
    const std::uint64_t size = kib_1_to_8(random);
    const fs::path& place = places[random() % places.size()];
    write_file((place / fmt::format("new-{:05}.bin", i)).string(), size, random, content);
    created_bytes += size;
  }
  std::string renamed = "no folder to rename";
  if (!dirs.empty()) {
    const fs::path from = dirs[random() % dirs.size()];
    const fs::path to = from.string() + ".renamed";
    std::size_t beneath = 0;
    for (const auto& entry : fs::recursive_directory_iterator(from)) {
      beneath += entry.symlink_status().type() == fs::file_type::regular ? 1 : 0;
    }
    fs::rename(from, to);
    renamed =
        fmt::format("renamed {} ({} files beneath)", fs::relative(from, dir).string(), beneath);
  }
  std::cout << fmt::format(
      "{} of {} files appended ({} bytes), {} deleted, {} new ({} bytes), {}\n", appended, n,
      appended_bytes, deleted, created, created_bytes, renamed);
}

struct Entry {
  fs::file_type type;
  unsigned mode;
  std::uint64_t size;
  std::string link;
  uid_t uid;
  gid_t gid;
  struct timespec mtime;
};

std::map<std::string, Entry> listing(const std::string& root) {
  std::map<std::string, Entry> out;
  auto add = [&](const fs::path& path, const std::string& name) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) throw std::runtime_error("cannot lstat " + path.string());
    Entry e{fs::symlink_status(path).type(),
            st.st_mode & 07777U,
            S_ISREG(st.st_mode) ? static_cast<std::uint64_t>(st.st_size) : 0,
            "",
            st.st_uid,
            st.st_gid,
            st.st_mtim};
    if (S_ISLNK(st.st_mode)) e.link = fs::read_symlink(path).string();
    out.emplace(name, std::move(e));
  };
  add(root, ".");
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    add(entry.path(), entry.path().lexically_relative(root).string());
  }
  return out;
}

bool same_bytes(const fs::path& a, const fs::path& b) {
  std::ifstream fa(a, std::ios::binary), fb(b, std::ios::binary);
  static std::vector<char> ba(1 << 20), bb(1 << 20);  // once: most files are small
  while (fa && fb) {
    fa.read(ba.data(), static_cast<std::streamsize>(ba.size()));
    fb.read(bb.data(), static_cast<std::streamsize>(bb.size()));
    if (fa.gcount() != fb.gcount() ||
        !std::equal(ba.begin(), ba.begin() + fa.gcount(), bb.begin())) {
      return false;
    }
  }
  return fa.eof() && fb.eof();
}

int compare(const std::string& a, const std::string& b) {
  const auto left = listing(a);
  const auto right = listing(b);
  std::vector<std::string> differences;
  for (const auto& [name, l] : left) {
    const auto it = right.find(name);
    if (it == right.end()) {
      differences.push_back("missing from the restore: " + name);
      continue;
    }
    const Entry& r = it->second;
    if (l.type != r.type) {
      differences.push_back("type differs: " + name);
    } else if (l.mode != r.mode) {
      differences.push_back(fmt::format("mode {:o} instead of {:o}: {}", r.mode, l.mode, name));
    } else if (l.uid != r.uid || l.gid != r.gid) {
      differences.push_back(
          fmt::format("owner {}:{} instead of {}:{}: {}", r.uid, r.gid, l.uid, l.gid, name));
    } else if (l.mtime.tv_sec != r.mtime.tv_sec || l.mtime.tv_nsec != r.mtime.tv_nsec) {
      differences.push_back(fmt::format("modified {}.{:09} instead of {}.{:09}: {}", r.mtime.tv_sec,
                                        r.mtime.tv_nsec, l.mtime.tv_sec, l.mtime.tv_nsec, name));
    } else if (l.link != r.link) {
      differences.push_back(fmt::format("link to {} instead of {}: {}", r.link, l.link, name));
    } else if (l.size != r.size || (l.type == fs::file_type::regular &&
                                    !same_bytes(fs::path(a) / name, fs::path(b) / name))) {
      differences.push_back("content differs: " + name);
    }
  }
  for (const auto& [name, r] : right) {
    if (!left.contains(name)) differences.push_back("not in the source: " + name);
  }
  for (std::size_t i = 0; i < std::min<std::size_t>(differences.size(), 20); ++i) {
    std::cout << "  " << differences[i] << "\n";
  }
  if (differences.size() > 20) std::cout << "  ... " << differences.size() - 20 << " more\n";
  std::cout << fmt::format("{} entries compared, {} differences\n", left.size(),
                           differences.size());
  return differences.empty() ? 0 : 1;
}

// Allocated and apparent bytes of everything beneath `dir` (as du -B1 and du -b count them).
std::pair<std::uint64_t, std::uint64_t> disk_usage(const std::string& dir) {
  std::uint64_t allocated = 0, apparent = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    struct stat st {};
    if (::lstat(entry.path().c_str(), &st) != 0) continue;
    allocated += static_cast<std::uint64_t>(st.st_blocks) * 512;
    apparent += static_cast<std::uint64_t>(st.st_size);
  }
  return {allocated, apparent};
}

// A field of /proc/PID/<file> ("VmHWM:", "write_bytes:"), as a number (kB for memory).
std::uint64_t proc_field(pid_t pid, const char* file, const std::string& key) {
  std::ifstream in(fmt::format("/proc/{}/{}", pid, file));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) return std::stoull(line.substr(key.size()));
  }
  return 0;
}

struct Window {
  std::vector<double> ms;
  std::uint64_t added = 0;    // the archiver's own count (COMPLETE <bytes added>)
  std::uint64_t written = 0;  // /proc/PID/io write_bytes: what reached the block layer
  std::uint64_t rss_kib = 0;
  std::uint64_t allocated = 0;  // archive size after the window
};

void print_window(const std::string& what, Window& w) {
  std::sort(w.ms.begin(), w.ms.end());
  double total = 0;
  for (const double m : w.ms) total += m;
  const double n = static_cast<double>(w.ms.size());
  std::cout << fmt::format(
      "  {:<22} {:>8.2f} ms/version (median {:.2f}, p99 {:.2f}) | {:>10.0f} bytes added/version "
      "(archiver's count) | {:>10.0f} bytes written/version (/proc io) | archiver RSS {:.1f} "
      "MiB | archive {:.1f} MiB allocated after\n",
      what, total / n, w.ms[w.ms.size() / 2], w.ms[static_cast<std::size_t>(0.99 * (n - 1))],
      static_cast<double>(w.added) / n, static_cast<double>(w.written) / n,
      static_cast<double>(w.rss_kib) / 1024, static_cast<double>(w.allocated) / (1 << 20));
}

// Writes version `i` of `file`, has the archiver archive it; the bytes it added (nothing
// when it did not answer COMPLETE, counted in `failed`) and the milliseconds it took.
std::pair<std::uint64_t, double> archive_version(tw::ChildProcess& child, const std::string& file,
                                                 long i, std::mt19937_64& random, long& failed) {
  std::string content(100 + random() % 200, ' ');
  tw::bench::fill_text(content, random);
  content = fmt::format("version {}\n", i) + content;
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out << content;
  }
  const auto sent = Clock::now();
  if (!child.write_line(fmt::format("{}\tUPDATE\t{}", i, tw::escape_bytes(file)))) {
    throw std::runtime_error("the archiver stopped reading");
  }
  std::string line;
  if (child.read_line(line, std::chrono::minutes(5)) != tw::ChildProcess::ReadStatus::Line) {
    throw std::runtime_error(fmt::format("no answer to version {}", i));
  }
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - sent).count();
  const auto fields = line.find("\tCOMPLETE\t");
  if (fields == std::string::npos) {
    if (++failed <= 3) std::cerr << "archiver answered: " << line << "\n";
    return {0, ms};
  }
  return {std::stoull(line.substr(fields + 10)), ms};
}

// Where the history lives: format 1's history file, or format 2's catalog (every path's).
std::uintmax_t history_bytes(const std::string& root) {
  std::uintmax_t history = 0;
  if (fs::exists(root + "/nodes")) {
    for (const auto& entry : fs::recursive_directory_iterator(root + "/nodes")) {
      if (entry.path().extension() == ".history") history = std::max(history, entry.file_size());
    }
  } else {
    for (const char* name : {"/catalog.db", "/catalog.db-wal"}) {
      if (fs::exists(root + name)) history += fs::file_size(root + name);
    }
  }
  return history;
}

int versions(const std::string& dir, long count, long window, const std::string& archiver) {
  const std::string src = dir + "/src";
  const std::string root = dir + "/archive";
  fs::create_directories(src);
  const std::string file = src + "/small-file.txt";
  window = std::min(window, count);
  tw::LaunchSpec spec{archiver, {"--backup-root=" + root, "--log-level=warn"}, {}};
  auto child = tw::make_process_launcher()->launch(spec);
  const pid_t pid = child->pid();
  std::mt19937_64 random(2026);
  Window first, last;
  std::uint64_t written_at = 0;
  long failed = 0;
  const auto start = Clock::now();
  for (long i = 1; i <= count; ++i) {
    if (i == count - window + 1) written_at = proc_field(pid, "io", "write_bytes:");
    const auto [added, ms] = archive_version(*child, file, i, random, failed);
    for (Window* w : {&first, &last}) {
      const bool in = w == &first ? i <= window : i > count - window;
      if (!in) continue;
      w->ms.push_back(ms);
      w->added += added;
    }
    if (i == window) {
      first.written = proc_field(pid, "io", "write_bytes:");
      first.rss_kib = proc_field(pid, "status", "VmRSS:");
      first.allocated = disk_usage(root).first;
    }
    if (i % std::max<long>(1, count / 10) == 0) {
      std::cerr << fmt::format("  ... {} versions, {:.0f} s\n", i,
                               std::chrono::duration<double>(Clock::now() - start).count());
    }
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  last.written = proc_field(pid, "io", "write_bytes:") - written_at;
  last.rss_kib = proc_field(pid, "status", "VmRSS:");
  const std::uint64_t hwm_kib = proc_field(pid, "status", "VmHWM:");
  const auto [allocated, apparent] = disk_usage(root);
  last.allocated = allocated;
  child->close_stdin();
  child->wait_exit(std::chrono::seconds(30));
  const std::uintmax_t history = history_bytes(root);
  std::cout << fmt::format("  {} versions in {:.1f} s ({:.2f} ms/version), {} failed\n", count,
                           seconds, seconds * 1000 / static_cast<double>(count), failed);
  print_window(fmt::format("versions 1-{}", window), first);
  print_window(fmt::format("versions {}-{}", count - window + 1, count), last);
  std::cout << fmt::format(
      "  archive after {} versions: {:.1f} MiB allocated, {:.1f} MiB apparent, history file "
      "{:.2f} MiB; archiver peak RSS {:.1f} MiB\n",
      count, static_cast<double>(allocated) / (1 << 20), static_cast<double>(apparent) / (1 << 20),
      static_cast<double>(history) / (1 << 20), static_cast<double>(hwm_kib) / 1024);
  return failed == 0 ? 0 : 1;
}

// Writes once to the memory the machine has available, but 1 GiB, and frees it: MiB
// touched. On a virtual machine whose host backs guest memory on first touch, the first
// process to fill a fresh page pays for the host's fault: a first 1 GiB write through the
// page cache took 3.7 s here (2.9 s in the kernel), the next one 0.8 s. Touched once up
// front, no tool pays that for pages another tool left unused. (It empties the page cache.)
std::uint64_t touch_memory() {
  std::uint64_t available_kib = 0;
  std::ifstream meminfo("/proc/meminfo");
  for (std::string key; meminfo >> key;) {
    std::uint64_t value = 0;
    meminfo >> value;
    if (key == "MemAvailable:") available_kib = value;
    meminfo.ignore(64, '\n');
  }
  const std::uint64_t block = std::uint64_t{256} << 20;
  const std::uint64_t want =
      available_kib * 1024 > (block << 2) ? available_kib * 1024 - (block << 2) : 0;
  std::vector<void*> blocks;
  const long page = ::sysconf(_SC_PAGESIZE);
  for (std::uint64_t done = 0; done + block <= want; done += block) {
    void* p = ::mmap(nullptr, block, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) break;
    for (std::uint64_t at = 0; at < block; at += static_cast<std::uint64_t>(page)) {
      static_cast<volatile char*>(p)[at] = 1;
    }
    blocks.push_back(p);
  }
  for (void* p : blocks) ::munmap(p, block);
  return blocks.size() * (block >> 20);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    CLI::App app{"timewarp-bench-peers: workloads and checks for bench/peers/run"};
    app.require_subcommand(1);
    std::string dir, other;
    int files = 10000, mib = 1024;
    std::uint64_t seed = 2026;
    bool random_content = false;
    long count = 100000, window = 1000;
    std::string archiver = tw::sibling_executable("timewarp-archiver");
    // A subcommand that writes seeded content to its one positional path.
    const auto seeded = [&](const char* name, const char* about, const char* path) {
      auto* command = app.add_subcommand(name, about);
      command->add_option(path, dir)->required();
      command->add_option("--seed", seed);
      return command;
    };
    auto* small = seeded("small", "files of 1-8 KiB of random bytes in 100 folders", "DIR");
    small->add_option("--files", files)->check(CLI::Range(1, 10000000));
    auto* tree = seeded("tree", "a synthetic tree of a real system's shape", "DIR");
    tree->add_option("--files", files)->check(CLI::Range(1, 100000000));
    auto* big = seeded("big", "text-like content in 8 files", "DIR");
    big->add_option("--mib", mib)->check(CLI::Range(8, 1 << 20));
    auto* chg = seeded("change", "append, delete, create, rename one folder", "DIR");
    chg->add_flag("--random", random_content, "random bytes instead of text-like");
    auto* append = seeded("append", "append text-like content to FILE", "FILE");
    append->add_option("--mib", mib)->check(CLI::Range(1, 1 << 20));
    auto* cmp = app.add_subcommand("compare", "A and B hold the same tree");
    cmp->add_option("A", dir)->required();
    cmp->add_option("B", other)->required();
    auto* ver = app.add_subcommand("versions", "versions of one small file");
    ver->add_option("DIR", dir)->required();
    ver->add_option("--count", count)->check(CLI::Range(1L, 100000000L));
    ver->add_option("--window", window)->check(CLI::Range(1L, 100000000L));
    ver->add_option("--archiver", archiver);
    auto* touch = app.add_subcommand("touch-memory", "write once to the available memory");
    CLI11_PARSE(app, argc, argv);
    if (*touch) std::cout << touch_memory() << "\n";
    if (*small) make_small(dir, files, seed);
    if (*tree) make_tree(dir, files, seed);
    if (*big) make_big(dir, mib, seed);
    if (*chg) change(dir, seed, random_content);
    if (*append) {
      std::mt19937_64 random(seed);
      write_file(dir, static_cast<std::uint64_t>(mib) << 20, random, Content::Text, true);
    }
    if (*cmp) return compare(dir, other);
    if (*ver) return versions(dir, count, window, archiver);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "timewarp-bench-peers: " << e.what() << "\n";
    return 1;
  }
}
