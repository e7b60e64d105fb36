#include "archive_test_util.hpp"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "archive/sha256.hpp"

namespace tw::archive::test {

ScopedTimeZone::ScopedTimeZone(const char* zone) {
  ::setenv("TZ", zone, 1);
  ::tzset();
}

ScopedTimeZone::~ScopedTimeZone() {
  ::unsetenv("TZ");
  ::tzset();
}

TempDir::TempDir() {
  std::string pattern =
      (std::filesystem::temp_directory_path() / "tw-archive-test-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  // Tests chmod directories to 000; make everything removable first.
  for (auto it = std::filesystem::recursive_directory_iterator(
           path_, std::filesystem::directory_options::skip_permission_denied, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_directory(ec) && !it->is_symlink(ec)) ::chmod(it->path().c_str(), 0755);
  }
  ::chmod(path_.c_str(), 0755);
  std::filesystem::remove_all(path_, ec);
}

void write_file(const std::string& path, const std::string& content, mode_t mode) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0)
    throw std::runtime_error(fmt::format("cannot create {}: {}", path, std::strerror(errno)));
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      ::close(fd);
      throw std::runtime_error("write failed");
    }
    done += static_cast<std::size_t>(n);
  }
  ::fchmod(fd, mode);
  ::close(fd);
}

std::string read_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw std::runtime_error(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  std::string data;
  char buffer[65536];
  ssize_t n;
  while ((n = ::read(fd, buffer, sizeof buffer)) > 0)
    data.append(buffer, static_cast<std::size_t>(n));
  ::close(fd);
  return data;
}

std::string hash_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw std::runtime_error(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  struct stat st {};
  ::fstat(fd, &st);
  Sha256 sha;
  // Buffers no larger than the file (each is filled when made; under ThreadSanitizer that
  // cost more than the hashing when a test compares hundreds of small files).
  constexpr off_t kBuffer = 1 << 20;
  static const std::vector<char> zeros(kBuffer, 0);
  std::vector<char> buffer(static_cast<std::size_t>(std::clamp<off_t>(st.st_size, 1, kBuffer)));
  // Holes read as zeros; hash them without reading, so sparse giants hash quickly.
  off_t pos = 0;
  while (pos < st.st_size) {
    off_t data = ::lseek(fd, pos, SEEK_DATA);
    if (data < 0) data = st.st_size;
    while (pos < data) {
      const auto n =
          static_cast<std::size_t>(std::min<off_t>(data - pos, static_cast<off_t>(zeros.size())));
      sha.update(zeros.data(), n);
      pos += static_cast<off_t>(n);
    }
    if (pos >= st.st_size) break;
    off_t hole = ::lseek(fd, pos, SEEK_HOLE);
    if (hole < 0) hole = st.st_size;
    while (pos < hole) {
      const ssize_t n = ::pread(
          fd, buffer.data(),
          static_cast<std::size_t>(std::min<off_t>(hole - pos, static_cast<off_t>(buffer.size()))),
          pos);
      if (n <= 0) throw std::runtime_error("read failed");
      sha.update(buffer.data(), static_cast<std::size_t>(n));
      pos += n;
    }
  }
  ::close(fd);
  return sha.hex_digest();
}

void set_mtime(const std::string& path, std::int64_t sec, long nsec) {
  const struct timespec times[2] = {{static_cast<time_t>(sec), nsec},
                                    {static_cast<time_t>(sec), nsec}};
  if (::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW) != 0) {
    throw std::runtime_error(fmt::format("utimensat {}: {}", path, std::strerror(errno)));
  }
}

std::string compare_files(const std::string& original, const std::string& restored) {
  struct stat a {};
  struct stat b {};
  if (::lstat(original.c_str(), &a) != 0) return "original missing";
  if (::lstat(restored.c_str(), &b) != 0) return "restored file missing";
  if ((a.st_mode & S_IFMT) != (b.st_mode & S_IFMT)) return "file type differs";
  if (!S_ISLNK(a.st_mode) && (a.st_mode & 07777) != (b.st_mode & 07777)) {
    return fmt::format("mode {:o} vs {:o}", a.st_mode & 07777, b.st_mode & 07777);
  }
  if (a.st_mtim.tv_sec != b.st_mtim.tv_sec || a.st_mtim.tv_nsec != b.st_mtim.tv_nsec) {
    return fmt::format("mtime {}.{:09} vs {}.{:09}", a.st_mtim.tv_sec, a.st_mtim.tv_nsec,
                       b.st_mtim.tv_sec, b.st_mtim.tv_nsec);
  }
  if (S_ISLNK(a.st_mode)) {
    char ta[PATH_MAX + 1] = {};
    char tb[PATH_MAX + 1] = {};
    const ssize_t na = ::readlink(original.c_str(), ta, PATH_MAX);
    const ssize_t nb = ::readlink(restored.c_str(), tb, PATH_MAX);
    if (na != nb || std::memcmp(ta, tb, static_cast<std::size_t>(std::max<ssize_t>(na, 0))) != 0) {
      return "link target differs";
    }
    return {};
  }
  if (S_ISREG(a.st_mode)) {
    if (a.st_size != b.st_size) return fmt::format("size {} vs {}", a.st_size, b.st_size);
    if (hash_file(original) != hash_file(restored)) return "content differs";
  }
  return {};
}

bool wait_until(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (condition()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::string archiver_exe() {
  if (const char* env = std::getenv("TW_ARCHIVER_EXE"); env != nullptr && *env != '\0') return env;
  return TW_ARCHIVER_EXE;
}

ArchiverProcess::ArchiverProcess(const Options& options) {
  int to_child[2];
  int from_child[2];
  if (::pipe2(to_child, O_CLOEXEC) != 0 || ::pipe2(from_child, O_CLOEXEC) != 0) {
    throw std::runtime_error("pipe failed");
  }
  std::vector<std::string> argv_strings{options.exe.empty() ? archiver_exe() : options.exe};
  argv_strings.insert(argv_strings.end(), options.args.begin(), options.args.end());
  std::vector<char*> argv;
  for (auto& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    ::dup2(to_child[0], STDIN_FILENO);
    ::dup2(from_child[1], STDOUT_FILENO);
    for (const auto& [key, value] : options.env) ::setenv(key.c_str(), value.c_str(), 1);
    if (options.run_as) {
      if (::setgroups(0, nullptr) != 0 || ::setgid(*options.run_as) != 0 ||
          ::setuid(*options.run_as) != 0) {
        ::_exit(126);
      }
    }
    // The archiver starts with default signal handling, as the launcher gives it, so a
    // signal it ignores is one it chose to ignore.
    for (const int sig : {SIGPIPE, SIGINT, SIGTERM}) ::signal(sig, SIG_DFL);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(to_child[0]);
  ::close(from_child[1]);
  in_ = to_child[1];
  out_ = from_child[0];
  ::signal(SIGPIPE, SIG_IGN);
}

ArchiverProcess::~ArchiverProcess() {
  if (in_ >= 0) ::close(in_);
  if (out_ >= 0) ::close(out_);
  if (!status_ && pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
}

bool ArchiverProcess::send(const std::string& line) {
  const std::string data = line + "\n";
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(in_, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    done += static_cast<std::size_t>(n);
  }
  return true;
}

std::optional<std::string> ArchiverProcess::read_line(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (const auto nl = buffer_.find('\n'); nl != std::string::npos) {
      std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return line;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    struct pollfd pfd {
      out_, POLLIN, 0
    };
    const int ready = ::poll(&pfd, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return std::nullopt;
    char chunk[4096];
    const ssize_t n = ::read(out_, chunk, sizeof chunk);
    if (n <= 0) return std::nullopt;
    buffer_.append(chunk, static_cast<std::size_t>(n));
  }
}

std::optional<std::string> ArchiverProcess::request(const std::string& line) {
  if (!send(line)) return std::nullopt;
  return read_line();
}

void ArchiverProcess::close_stdin() {
  if (in_ >= 0) ::close(in_);
  in_ = -1;
}

std::optional<int> ArchiverProcess::wait(std::chrono::milliseconds timeout) {
  if (status_) return status_;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    int status = 0;
    struct rusage usage {};
    const pid_t done = ::wait4(pid_, &status, WNOHANG, &usage);
    if (done == pid_) {
      max_rss_kib_ = usage.ru_maxrss;
      status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return status_;
    }
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

void ArchiverProcess::kill(int signal) {
  if (!status_) ::kill(pid_, signal);
}

std::vector<std::string> fields(const std::string& line) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    const auto tab = line.find('\t', start);
    out.push_back(line.substr(start, tab == std::string::npos ? std::string::npos : tab - start));
    if (tab == std::string::npos) return out;
    start = tab + 1;
  }
}

}  // namespace tw::archive::test
