#include "integration/convergence_generator.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <memory>

#include <fmt/format.h>

#include "integration/convergence_generator_util.hpp"

namespace tw::test::convergence {

using namespace generator_detail;

TreeGenerator::TreeGenerator(std::string root, std::mt19937_64& rng, EventLog& log, Options options)
    : root_(std::move(root)), rng_(rng), log_(log), options_(options) {}

std::string TreeGenerator::full(const std::string& rel) const {
  return rel.empty() ? root_ : root_ + "/" + rel;
}

std::string TreeGenerator::join(const std::string& dir, const std::string& name) {
  return dir.empty() ? name : dir + "/" + name;
}

int TreeGenerator::uniform(int lo, int hi) {
  return std::uniform_int_distribution<int>(lo, hi)(rng_);
}

bool TreeGenerator::chance(double p) {
  return std::uniform_real_distribution<double>(0, 1)(rng_) < p;
}

void TreeGenerator::note(const std::string& what) { log_.add("op", what); }

void TreeGenerator::note_error(const std::string& what) {
  log_.add("op", fmt::format("{} failed: {}", what, std::strerror(errno)));
}

TreeGenerator::Entries TreeGenerator::scan() const {
  Entries out;
  out.dirs.push_back("");
  std::function<void(const std::string&)> walk = [&](const std::string& rel) {
    std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(full(rel).c_str()), ::closedir);
    if (!dir) return;
    std::vector<std::string> names;
    while (const dirent* d = ::readdir(dir.get())) {
      const std::string name = d->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    std::sort(names.begin(), names.end());  // readdir order must not leak into choices
    for (const auto& name : names) {
      const std::string path = join(rel, name);
      struct stat st {};
      if (::lstat(full(path).c_str(), &st) != 0) continue;
      if (S_ISDIR(st.st_mode)) {
        out.dirs.push_back(path);
        walk(path);
      } else if (S_ISLNK(st.st_mode)) {
        out.links.push_back(path);
      } else if (S_ISREG(st.st_mode)) {
        out.files.push_back(path);
      }
    }
  };
  walk("");
  return out;
}

std::string TreeGenerator::fresh_name(const std::string& dir) {
  for (int attempt = 0;; ++attempt) {
    std::string name = pick(name_pool());
    if (attempt > 0 || chance(0.5))
      name += fmt::format("-{}", uniform(0, attempt > 3 ? 99999 : 20));
    struct stat st {};
    if (::lstat(full(join(dir, name)).c_str(), &st) != 0) return name;
  }
}

std::size_t TreeGenerator::pick_size() {
  const int r = uniform(0, 99);
  if (r < 45) return static_cast<std::size_t>(uniform(0, 256));
  if (r < 86) return static_cast<std::size_t>(uniform(257, 4096));
  if (r < 97 || !options_.large_files) return static_cast<std::size_t>(uniform(4097, 65536));
  return static_cast<std::size_t>(uniform(65537, 1 << 20));
}

std::string TreeGenerator::content(std::size_t size) {
  std::string out(size, '\0');
  if (chance(0.5)) {  // text-like: compresses
    static const char kWords[] = "lorem ipsum dolor sit amet timewarp archive version\n";
    const std::size_t start = static_cast<std::size_t>(uniform(0, sizeof kWords - 2));
    for (std::size_t i = 0; i < size; ++i) out[i] = kWords[(start + i) % (sizeof kWords - 1)];
    if (size > 0) out[static_cast<std::size_t>(uniform(0, static_cast<int>(size) - 1))] = '#';
  } else {
    for (std::size_t i = 0; i < size; i += 8) {
      const std::uint64_t word = rng_();
      std::memcpy(&out[i], &word, std::min<std::size_t>(8, size - i));
    }
  }
  return out;
}

bool TreeGenerator::write_file(const std::string& rel, const std::string& data, int flags,
                               const char* verb) {
  const int fd = ::open(full(rel).c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW | flags, 0644);
  if (fd < 0) {
    note_error(fmt::format("{} {}", verb, esc(rel)));
    return false;
  }
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
  note(fmt::format("{} {} ({} bytes)", verb, esc(rel), data.size()));
  return true;
}

struct TreeGenerator::Choice {
  const char* name;
  void (TreeGenerator::*op)(const Entries&);
  int weight;          // usual weight
  int crowded_weight;  // when the tree holds more than max_entries
  int sparse_weight;   // when it holds fewer than a dozen entries
};

// Weights: mostly content changes and renames; deletions grow with the tree's size.
const std::vector<TreeGenerator::Choice>& TreeGenerator::choices() {
  using G = TreeGenerator;
  static const std::vector<Choice> table = {
      {"create", &G::create, 10, 2, 30},
      {"overwrite", &G::overwrite, 6, 6, 6},
      {"append", &G::append, 6, 6, 6},
      {"truncate", &G::truncate_file, 3, 3, 3},
      {"chmod", &G::change_mode, 4, 4, 4},
      {"chown", &G::change_owner, 2, 2, 2},
      {"mtime", &G::set_mtime, 2, 2, 2},
      {"rename", &G::rename_file, 6, 6, 6},
      {"rename-dir", &G::rename_dir, 3, 3, 3},
      {"rename-over", &G::rename_over, 3, 3, 3},
      {"delete", &G::remove, 4, 20, 4},
      {"replace-type", &G::replace_type, 3, 8, 3},
      {"mkdir-p", &G::mkdir_p, 3, 1, 8},
      {"symlink", &G::make_symlink, 3, 3, 3},
      {"retarget", &G::retarget_symlink, 2, 2, 2},
      {"editor-save", &G::editor_save, 4, 4, 4},
      {"logrotate", &G::rotate_log, 2, 2, 2},
      {"flurry", &G::flurry, 2, 2, 2},
      {"short-lived", &G::short_lived, 2, 2, 2},
      {"shuffle-dir", &G::shuffle_dir, 1, 0, 1},
  };
  return table;
}

std::vector<std::string> TreeGenerator::names() {
  std::vector<std::string> out;
  for (const auto& c : choices()) out.emplace_back(c.name);
  return out;
}

void TreeGenerator::step() {
  const Entries e = scan();
  const bool crowded = static_cast<int>(e.size()) > options_.max_entries;
  const bool sparse = e.size() < 12;
  std::vector<const Choice*> allowed;
  int total = 0;
  for (const auto& c : choices()) {
    if (!options_.only.empty() && !options_.only.count(c.name)) continue;
    allowed.push_back(&c);
    total += crowded ? c.crowded_weight : (sparse ? c.sparse_weight : c.weight);
  }
  if (total == 0) return;
  int r = uniform(0, total - 1);
  for (const Choice* c : allowed) {
    const int w = crowded ? c->crowded_weight : (sparse ? c->sparse_weight : c->weight);
    if (r < w) {
      (this->*(c->op))(e);
      break;
    }
    r -= w;
  }
  ++operations_;
}

void TreeGenerator::create(const Entries& e) {
  const std::string dir = pick(e.dirs);
  write_file(join(dir, fresh_name(dir)), content(pick_size()), O_CREAT | O_EXCL, "create");
}

void TreeGenerator::overwrite(const Entries& e) {
  if (e.files.empty()) return create(e);
  const std::string file = pick(e.files);
  struct stat st {};
  if (::lstat(full(file).c_str(), &st) != 0) return;
  const std::size_t size = static_cast<std::size_t>(st.st_size);
  const int fd = ::open(full(file).c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return note_error("overwrite " + esc(file));
  // Same size rewritten (the case stat cannot tell apart when the clock tick is coarse), or
  // a chunk at some offset.
  const bool whole = size > 0 && chance(0.5);
  const std::size_t offset =
      whole ? 0 : static_cast<std::size_t>(uniform(0, static_cast<int>(size)));
  const std::string data = content(whole ? size : static_cast<std::size_t>(uniform(1, 600)));
  [[maybe_unused]] const ssize_t n =
      ::pwrite(fd, data.data(), data.size(), static_cast<off_t>(offset));
  ::close(fd);
  note(fmt::format("overwrite in place {} at {} ({} bytes{})", esc(file), offset, data.size(),
                   whole ? ", same size" : ""));
}

void TreeGenerator::append(const Entries& e) {
  if (e.files.empty()) return create(e);
  write_file(pick(e.files), content(static_cast<std::size_t>(uniform(1, 2000))), O_APPEND,
             "append to");
}

void TreeGenerator::truncate_file(const Entries& e) {
  if (e.files.empty()) return create(e);
  const std::string file = pick(e.files);
  struct stat st {};
  if (::lstat(full(file).c_str(), &st) != 0) return;
  const off_t size =
      chance(0.7) ? uniform(0, static_cast<int>(st.st_size)) : st.st_size + uniform(1, 5000);
  // truncate(1) opens, ftruncates and closes; some programs call truncate(2) on the path,
  // which no close follows (inotify reports only IN_MODIFY).
  if (chance(0.5)) {
    const int fd = ::open(full(file).c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 || ::ftruncate(fd, size) != 0) {
      if (fd >= 0) ::close(fd);
      return note_error("truncate " + esc(file));
    }
    ::close(fd);
    note(fmt::format("truncate {} to {} (open, ftruncate, close)", esc(file), size));
  } else {
    if (::truncate(full(file).c_str(), size) != 0) return note_error("truncate " + esc(file));
    note(fmt::format("truncate {} to {} (truncate(2) on the path)", esc(file), size));
  }
}

void TreeGenerator::change_mode(const Entries& e) {
  static const std::vector<mode_t> file_modes = {0600, 0644, 0640, 0755, 0444,
                                                 0400, 0664, 0700, 04755};
  static const std::vector<mode_t> dir_modes = {0755, 0700, 0750, 0775, 0711, 01777, 02775};
  const bool dir = e.files.empty() || chance(0.3);
  const std::string target =
      dir ? pick(e.dirs) : pick(e.files);  // chmod follows links: not on them
  const mode_t mode = dir ? pick(dir_modes) : pick(file_modes);
  if (::chmod(full(target).c_str(), mode) != 0) return note_error("chmod " + esc(target));
  note(fmt::format("chmod {:o} {}", mode, esc(target)));
}

void TreeGenerator::change_owner(const Entries& e) {
  static const std::vector<uid_t> ids = {0, 1000, 1001, 65534};
  std::vector<std::string> all = e.files;
  all.insert(all.end(), e.links.begin(), e.links.end());
  all.insert(all.end(), e.dirs.begin(), e.dirs.end());
  const std::string target = pick(all);
  const uid_t uid = pick(ids);
  const gid_t gid = pick(ids);
  if (::lchown(full(target).c_str(), uid, gid) != 0) return note_error("chown " + esc(target));
  note(fmt::format("chown {}:{} {}", uid, gid, esc(target)));
}

void TreeGenerator::set_mtime(const Entries& e) {
  std::vector<std::string> all = e.files;
  all.insert(all.end(), e.links.begin(), e.links.end());
  all.insert(all.end(), e.dirs.begin(), e.dirs.end());
  const std::string target = pick(all);
  timespec times[2];
  times[0].tv_sec = ::time(nullptr) - uniform(0, 3'000'000);
  times[0].tv_nsec = uniform(0, 999'999'999);
  times[1] = times[0];
  if (::utimensat(AT_FDCWD, full(target).c_str(), times, AT_SYMLINK_NOFOLLOW) != 0) {
    return note_error("set mtime " + esc(target));
  }
  note(fmt::format("set mtime of {} to {}.{:09d}", esc(target), times[1].tv_sec, times[1].tv_nsec));
}

}  // namespace tw::test::convergence
