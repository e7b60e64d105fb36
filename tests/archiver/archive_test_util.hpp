// Helpers for the archive tests: temporary directories, file comparison and hashing, and a
// real timewarp-archiver child driven over its pipes. Use from one thread at a time.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tw::archive::test {

// The process's time zone (TZ, which retention's calendar reads) set to `zone` while the
// object lives, and unset after.
class ScopedTimeZone {
 public:
  explicit ScopedTimeZone(const char* zone);
  ScopedTimeZone(const ScopedTimeZone&) = delete;
  ScopedTimeZone& operator=(const ScopedTimeZone&) = delete;
  ~ScopedTimeZone();
};

// A mkdtemp directory, removed (after making it writable again) on destruction.
class TempDir {
 public:
  TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

void write_file(const std::string& path, const std::string& content, mode_t mode = 0644);
std::string read_file(const std::string& path);
// SHA-256 of a file's bytes (hex), streaming.
std::string hash_file(const std::string& path);
// Sets a path's mtime (no link following) to `sec` seconds + `nsec`.
void set_mtime(const std::string& path, std::int64_t sec, long nsec);

// Empty when `restored` matches `original` (type, bytes or link target, permission bits,
// mtime to the nanosecond); otherwise what differs.
std::string compare_files(const std::string& original, const std::string& restored);

// Polls `condition` until it holds or `timeout` passes.
bool wait_until(const std::function<bool()>& condition, std::chrono::milliseconds timeout);

// The timewarp-archiver built with the tests.
std::string archiver_exe();

// A running timewarp-archiver with pipes on its stdin and stdout; its stderr is ours.
class ArchiverProcess {
 public:
  struct Options {
    std::vector<std::string> args;
    std::vector<std::pair<std::string, std::string>> env;
    std::optional<uid_t> run_as;  // setgid/setuid to this id (for permission tests as root)
    std::string exe = {};         // the program run; empty: archiver_exe()
  };
  explicit ArchiverProcess(const Options& options);
  ArchiverProcess(const ArchiverProcess&) = delete;
  ArchiverProcess& operator=(const ArchiverProcess&) = delete;
  ~ArchiverProcess();  // kills and reaps if still running

  pid_t pid() const { return pid_; }
  bool send(const std::string& line);  // adds the newline
  // The next response line, or nothing on EOF or after `timeout`.
  std::optional<std::string> read_line(
      std::chrono::milliseconds timeout = std::chrono::seconds(60));
  // send + read_line.
  std::optional<std::string> request(const std::string& line);
  void close_stdin();
  // Waits for the exit; returns the exit code, or 128 + signal. Nothing on timeout.
  std::optional<int> wait(std::chrono::milliseconds timeout = std::chrono::seconds(60));
  void kill(int signal);
  // Peak resident set size in KiB, known once wait() reaped the process.
  long max_rss_kib() const { return max_rss_kib_; }

 private:
  pid_t pid_ = -1;
  int in_ = -1;
  int out_ = -1;
  std::string buffer_;
  std::optional<int> status_;
  long max_rss_kib_ = 0;
};

// Splits a response line at TABs.
std::vector<std::string> fields(const std::string& line);

}  // namespace tw::archive::test
