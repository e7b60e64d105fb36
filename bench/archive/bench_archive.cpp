// bench/archive: how fast the real timewarp-archiver stores files, beside `cp -a` of the
// same tree on the same disk in the same run.
//
//   (a) 10,000 files of 4 KiB of text-like content;
//   (b) 1 GiB in 8 files of 128 MiB, twice: text-like content (compresses ~2.3:1 at level
//       1) and random content (incompressible), each beside its own `cp -a`.
//   For each: files/s and MB/s of the archiver (request lines fed on its stdin, from the
//   first request to the last response, every write fsynced), of `cp -a`, and of `cp -a`
//   followed by `sync` (the same durability). Sources are written first, so both read
//   from the page cache.
//   Also the same work shared by two archivers at once (the scheduler's default).
//   Each of these steps runs --rounds times (default 3), in turn, and the best time of
//   each is reported, with the ratio archiver/cp -a. Every step's output is removed right
//   after it, so every step writes into memory the previous one has just freed: on a
//   virtual machine, writing into memory that has been free for a while can be several
//   times slower (the host backs it again), and would favour whichever step comes later.
//   For the large files, also the archiver's CPU time (user + system, all its threads),
//   and two limits measured in this process on the same files, one thread each: SHA-256
//   (an object's name, one hash per file that no thread count can split) and zstd at the
//   archiver's level. They bound what any archiver could reach on this machine.
//   (c) the archiver's peak resident memory (ru_maxrss) while archiving one 2 GiB file of
//       text-like content (one run; its rate is for information).
//
// Prints figures; asserts nothing. Usage:
//   timewarp-bench-archive [--archiver PATH] [--archiver-arg ARG]... [--dir DIR]
//                          [--small N] [--large-mib N] [--giant-mib N] [--rounds N] [--keep]
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <zstd.h>
#include <CLI/CLI.hpp>

#include "archive/sha256.hpp"
#include "bench/common/content.hpp"
#include "common/escape.hpp"

namespace {

using Clock = std::chrono::steady_clock;

using tw::bench::Content;
using tw::bench::write_file;

struct Run {
  double seconds = 0;
  double cpu_seconds = 0;  // user + system, every thread
  long max_rss_kib = 0;
  std::uint64_t archive_bytes = 0;
};

// Runs a command to completion; returns its time and peak memory.
Run run_command(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  std::vector<std::string> copy = args;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  const auto start = Clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execvp(argv[0], argv.data());
    ::_exit(127);
  }
  int status = 0;
  struct rusage usage {};
  ::wait4(pid, &status, 0, &usage);
  Run run;
  run.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  run.max_rss_kib = usage.ru_maxrss;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw std::runtime_error(fmt::format("{} failed", args.front()));
  }
  return run;
}

// Extra arguments for every archiver (--archiver-arg).
std::vector<std::string> g_archiver_args;

// Feeds one UPDATE line per file to a fresh archiver and waits for every response.
Run archive(const std::string& archiver, const std::string& root,
            const std::vector<std::string>& files) {
  int to_child[2];
  int from_child[2];
  if (::pipe2(to_child, O_CLOEXEC) != 0 || ::pipe2(from_child, O_CLOEXEC) != 0) {
    throw std::runtime_error("pipe failed");
  }
  std::vector<std::string> args = {archiver, "--backup-root=" + root, "--log-level=warn"};
  args.insert(args.end(), g_archiver_args.begin(), g_archiver_args.end());
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  const auto start = Clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(to_child[0], STDIN_FILENO);
    ::dup2(from_child[1], STDOUT_FILENO);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(to_child[0]);
  ::close(from_child[1]);
  std::thread feeder([&] {
    std::string batch;
    for (std::size_t i = 0; i < files.size(); ++i) {
      batch += fmt::format("{}\tUPDATE\t{}\n", i + 1, tw::escape_bytes(files[i]));
      if (batch.size() > 60000 || i + 1 == files.size()) {
        for (std::size_t done = 0; done < batch.size();) {
          const ssize_t n = ::write(to_child[1], batch.data() + done, batch.size() - done);
          if (n <= 0) break;
          done += static_cast<std::size_t>(n);
        }
        batch.clear();
      }
    }
    ::close(to_child[1]);
  });
  Run run;
  std::string buffer;
  std::size_t answered = 0;
  std::size_t failed = 0;
  char chunk[65536];
  while (answered < files.size()) {
    const ssize_t n = ::read(from_child[0], chunk, sizeof chunk);
    if (n <= 0) break;
    buffer.append(chunk, static_cast<std::size_t>(n));
    std::size_t nl;
    while ((nl = buffer.find('\n')) != std::string::npos) {
      const std::string line = buffer.substr(0, nl);
      buffer.erase(0, nl + 1);
      ++answered;
      const auto first = line.find('\t');
      if (line.compare(first + 1, 9, "COMPLETE\t") != 0) {
        if (++failed <= 3) std::cerr << "archiver answered: " << line << "\n";
        continue;
      }
      const auto bytes_at = first + 10;
      run.archive_bytes += std::stoull(line.substr(bytes_at, line.find('\t', bytes_at) - bytes_at));
    }
  }
  run.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  feeder.join();
  ::close(from_child[0]);
  int status = 0;
  struct rusage usage {};
  ::wait4(pid, &status, 0, &usage);
  run.max_rss_kib = usage.ru_maxrss;
  run.cpu_seconds = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                    static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  if (answered != files.size() || failed > 0) {
    throw std::runtime_error(
        fmt::format("archiver answered {} of {} ({} failed)", answered, files.size(), failed));
  }
  return run;
}

void sync_all() { ::sync(); }

// The zstd level given to the archivers (--archiver-arg=--compression-level=N), else its
// default.
int archiver_level() {
  int level = 1;
  for (const auto& arg : g_archiver_args) {
    for (const std::string key : {"--compression-level=", "--compression_level="}) {
      if (arg.rfind(key, 0) == 0) level = std::stoi(arg.substr(key.size()));
    }
  }
  return level;
}

// What one thread does with `files` (read from the page cache in 64 KiB pieces, as the
// archiver reads them) when it only hashes them, or only compresses them at `level`.
struct Limits {
  double sha_seconds = 0;
  double zstd_seconds = 0;
  std::uint64_t zstd_bytes = 0;
};

Limits measure_limits(const std::vector<std::string>& files, int level) {
  std::vector<char> in(64 << 10);
  std::vector<char> out(ZSTD_CStreamOutSize());
  std::unique_ptr<ZSTD_CCtx, decltype(&ZSTD_freeCCtx)> cctx(ZSTD_createCCtx(), ZSTD_freeCCtx);
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_compressionLevel, level);
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_checksumFlag, 1);
  Limits limits;
  for (const bool compress : {false, true}) {
    const auto start = Clock::now();
    for (const auto& file : files) {
      const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) throw std::runtime_error(fmt::format("cannot open {}", file));
      tw::archive::Sha256 sha;
      if (compress) {
        ZSTD_CCtx_reset(cctx.get(), ZSTD_reset_session_only);
        ZSTD_CCtx_setPledgedSrcSize(cctx.get(), std::filesystem::file_size(file));
      }
      for (off_t at = 0;;) {
        const ssize_t n = ::pread(fd, in.data(), in.size(), at);
        if (n < 0) throw std::runtime_error(fmt::format("cannot read {}", file));
        at += n;
        if (!compress) {
          sha.update(in.data(), static_cast<std::size_t>(n));
          if (n == 0) break;
          continue;
        }
        const ZSTD_EndDirective mode = n == 0 ? ZSTD_e_end : ZSTD_e_continue;
        ZSTD_inBuffer input{in.data(), static_cast<std::size_t>(n), 0};
        std::size_t remaining = 0;
        do {
          ZSTD_outBuffer output{out.data(), out.size(), 0};
          remaining = ZSTD_compressStream2(cctx.get(), &output, &input, mode);
          if (ZSTD_isError(remaining)) throw std::runtime_error(ZSTD_getErrorName(remaining));
          limits.zstd_bytes += output.pos;
        } while (mode == ZSTD_e_end ? remaining != 0 : input.pos < input.size);
        if (n == 0) break;
      }
      if (!compress) sha.hex_digest();
      ::close(fd);
    }
    (compress ? limits.zstd_seconds : limits.sha_seconds) =
        std::chrono::duration<double>(Clock::now() - start).count();
  }
  return limits;
}

void report(const std::string& what, std::size_t files, std::uint64_t bytes, double seconds) {
  std::cout << fmt::format("  {:<30} {:>9.1f} files/s {:>9.1f} MB/s   ({:.2f} s)\n", what,
                           static_cast<double>(files) / seconds,
                           static_cast<double>(bytes) / 1e6 / seconds, seconds);
}

double since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Two archivers side by side on one archive (the scheduler's default), each given half of
// `files`. Returns the time until both are done.
double archive_in_pair(const std::string& archiver, const std::string& root,
                       const std::vector<std::string>& files) {
  const auto middle = files.begin() + static_cast<long>(files.size() / 2);
  const std::vector<std::string> first(files.begin(), middle);
  const std::vector<std::string> second(middle, files.end());
  const auto start = Clock::now();
  std::string other_error;
  std::thread other([&] {
    try {
      archive(archiver, root, second);
    } catch (const std::exception& e) {
      other_error = e.what();
    }
  });
  try {
    archive(archiver, root, first);
  } catch (...) {
    other.join();
    throw;
  }
  other.join();
  if (!other_error.empty()) throw std::runtime_error(other_error);
  return since(start);
}

// Times the archiver, two archivers, `cp -a` and `cp -a; sync` on `tree`, `rounds` times
// in turn, and reports the best time of each. Every step's output is removed right after
// it, so each step writes into page-cache memory that the previous one has just freed.
void compare(const std::string& title, const std::string& archiver, const std::string& work,
             const std::string& tree, const std::vector<std::string>& files, std::uint64_t bytes,
             int rounds) {
  std::cout << title << "\n";
  const std::string name = std::filesystem::path(tree).filename().string();
  const std::string root = work + "/archive-" + name;
  const std::string copy = work + "/cp-" + name;
  constexpr double kNever = 1e300;
  double alone = kNever, pair = kNever, copied = kNever, synced = kNever;
  Run archived;
  const bool large = bytes >= files.size() * (std::uint64_t{1} << 20);  // 1 MiB+ files
  const int level = archiver_level();
  Limits limits{kNever, kNever, 0};
  for (int round = 0; round < rounds; ++round) {
    sync_all();
    const Run run = archive(archiver, root, files);
    if (run.seconds < alone) {
      alone = run.seconds;
      archived.cpu_seconds = run.cpu_seconds;
    }
    archived.archive_bytes = run.archive_bytes;
    archived.max_rss_kib = std::max(archived.max_rss_kib, run.max_rss_kib);
    std::filesystem::remove_all(root);
    if (files.size() >= 2) {
      sync_all();
      pair = std::min(pair, archive_in_pair(archiver, root, files));
      std::filesystem::remove_all(root);
    }
    sync_all();
    copied = std::min(copied, run_command({"cp", "-a", tree, copy}).seconds);
    std::filesystem::remove_all(copy);
    sync_all();
    const auto start = Clock::now();
    run_command({"cp", "-a", tree, copy});
    sync_all();
    synced = std::min(synced, since(start));
    std::filesystem::remove_all(copy);
    if (large) {
      const Limits measured = measure_limits(files, level);
      limits.sha_seconds = std::min(limits.sha_seconds, measured.sha_seconds);
      limits.zstd_seconds = std::min(limits.zstd_seconds, measured.zstd_seconds);
      limits.zstd_bytes = measured.zstd_bytes;
    }
  }
  report("timewarp-archiver", files.size(), bytes, alone);
  std::cout << fmt::format(
      "  {:<30} {:>9.1f} MB stored for {:.1f} MB ({:.2f}:1), peak RSS {:.1f} MiB\n", "",
      static_cast<double>(archived.archive_bytes) / 1e6, static_cast<double>(bytes) / 1e6,
      static_cast<double>(bytes) /
          static_cast<double>(std::max<std::uint64_t>(archived.archive_bytes, 1)),
      static_cast<double>(archived.max_rss_kib) / 1024.0);
  if (large) {
    std::cout << fmt::format("  {:<30} {:>9.2f} s CPU in {:.2f} s ({:.2f} cores busy)\n", "",
                             archived.cpu_seconds, alone, archived.cpu_seconds / alone);
  }
  if (files.size() >= 2) report("2 archivers in parallel", files.size(), bytes, pair);
  report("cp -a", files.size(), bytes, copied);
  report("cp -a; sync", files.size(), bytes, synced);
  std::cout << fmt::format("  {:<30} {:>9.2f} (archiver MB/s over cp -a MB/s)\n", "ratio",
                           copied / alone);
  if (large) {
    std::cout << "  limits, one thread each, same files:\n";
    report("SHA-256 alone", files.size(), bytes, limits.sha_seconds);
    report(fmt::format("zstd level {} alone ({:.2f}:1)", level,
                       static_cast<double>(bytes) /
                           static_cast<double>(std::max<std::uint64_t>(limits.zstd_bytes, 1))),
           files.size(), bytes, limits.zstd_seconds);
    std::cout << fmt::format("  {:<30} {:>9.1f} MB/s   (half of cp -a)\n", "target",
                             static_cast<double>(bytes) / 1e6 / copied / 2);
  }
}

std::string default_archiver(const char* argv0) {
  const auto beside = std::filesystem::path(argv0).parent_path() / "timewarp-archiver";
  if (std::filesystem::exists(beside)) return beside.string();
  return TW_ARCHIVER_EXE;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    CLI::App app{"timewarp-bench-archive: archiver throughput beside cp -a, and its peak memory"};
    std::string archiver = default_archiver(argv[0]);
    std::string dir = std::filesystem::temp_directory_path().string();
    int small = 10000;
    int large_mib = 1024;
    int giant_mib = 2048;
    int rounds = 3;
    bool keep = false;
    app.add_option("--archiver", archiver, "timewarp-archiver to measure");
    app.add_option("--archiver-arg", g_archiver_args,
                   "extra argument for every archiver (repeatable), e.g. --compression-level=3")
        ->allow_extra_args(false);
    app.add_option("--dir", dir, "where to create the work directory (the disk under test)");
    app.add_option("--small", small, "number of 4 KiB files");
    app.add_option("--large-mib", large_mib, "MiB in 8 large files");
    app.add_option("--giant-mib", giant_mib, "size of the single file for the memory figure");
    app.add_option("--rounds", rounds, "timed runs of each step; the best is reported")
        ->check(CLI::Range(1, 100));
    app.add_flag("--keep", keep, "keep the work directory");
    CLI11_PARSE(app, argc, argv);

    std::string pattern = dir + "/tw-bench-archive-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed in " + dir);
    const std::string work = pattern;
    struct Cleanup {
      const std::string& dir;
      const bool& keep;
      ~Cleanup() {
        std::error_code ec;
        if (!keep) std::filesystem::remove_all(dir, ec);
      }
    } cleanup{work, keep};
    struct statvfs vfs {};
    ::statvfs(work.c_str(), &vfs);
    const double free_gib =
        static_cast<double>(vfs.f_bavail) * static_cast<double>(vfs.f_frsize) / (1 << 30);
    std::cout << fmt::format(
        "timewarp-bench-archive: {} cores, work directory {} ({:.0f} GiB free), archiver "
        "arguments: {}\n",
        std::thread::hardware_concurrency(), work, free_gib,
        g_archiver_args.empty() ? "(defaults)" : fmt::format("{}", fmt::join(g_archiver_args, " ")));
    std::mt19937_64 random(2026);

    // (a) many small files.
    {
      const std::string tree = work + "/small";
      std::vector<std::string> files;
      for (int i = 0; i < small; ++i) {
        const std::string sub = fmt::format("{}/d{:03}", tree, i / 100);
        if (i % 100 == 0) std::filesystem::create_directories(sub);
        files.push_back(fmt::format("{}/file-{:05}.txt", sub, i));
        write_file(files.back(), 4096, random);
      }
      compare(fmt::format("(a) {} files of 4 KiB ({:.1f} MB)", small, small * 4096 / 1e6), archiver,
              work, tree, files, static_cast<std::uint64_t>(small) * 4096, rounds);
      std::filesystem::remove_all(tree);
    }
    // (b) large files, text-like then random.
    for (const Content content : {Content::Text, Content::Random}) {
      const bool text = content == Content::Text;
      const std::string tree = work + (text ? "/large-text" : "/large-random");
      std::filesystem::create_directories(tree);
      std::vector<std::string> files;
      const std::uint64_t each = static_cast<std::uint64_t>(large_mib) * (1 << 20) / 8;
      for (int i = 0; i < 8; ++i) {
        files.push_back(fmt::format("{}/large-{}.bin", tree, i));
        write_file(files.back(), each, random, content);
      }
      compare(fmt::format("(b) {} MiB in 8 files of {} MiB, {}", large_mib, each >> 20,
                          text ? "text-like" : "random (incompressible)"),
              archiver, work, tree, files, each * 8, rounds);
      std::filesystem::remove_all(tree);
    }
    // (c) peak memory on one giant file.
    {
      const std::string file = work + "/giant.bin";
      const std::uint64_t size = static_cast<std::uint64_t>(giant_mib) << 20;
      write_file(file, size, random);
      sync_all();
      const Run run = archive(archiver, work + "/archive-giant", {file});
      std::cout << fmt::format(
          "(c) one {} MiB file, text-like: {:.1f} MB/s, archiver peak RSS {:.1f} MiB "
          "(ru_maxrss)\n",
          giant_mib,
          static_cast<double>(size) / 1e6 / run.seconds,
          static_cast<double>(run.max_rss_kib) / 1024.0);
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "timewarp-bench-archive: " << e.what() << "\n";
    return 1;
  }
}
