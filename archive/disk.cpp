#include "archive/disk.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/uio.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/dirs.hpp"
#include "common/escape.hpp"
#include "common/paths.hpp"

namespace tw::archive {

Fault errno_fault(int err, Side side, std::string_view what) {
  const std::string text = fmt::format("{}: {}", what, std::strerror(err));
  if (side == Side::Archive) return retry(fmt::format("archive: {}", text));
  switch (err) {
    case ENOENT:
    case ENOTDIR: {
      // Gone (or replaced) between the look and this step: a new look records what is
      // there now, a tombstone if nothing.
      Fault gone = retry(text);
      gone.changed = true;
      return gone;
    }
    case ENOSPC:
    case EIO:
    case EAGAIN:
    case EBUSY:
    case EINTR:
    case ENOMEM:
    case EMFILE:
    case ENFILE:
    case ETXTBSY:
    case ESTALE:
    case ENOLCK:
    case ETIMEDOUT:
    case EDQUOT:
      return retry(text);
    default:
      return permanent(text);
  }
}

int write_all(int fd, const void* data, std::size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return 0;
}

int pwrite_all(int fd, const void* data, std::size_t size, std::uint64_t offset) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::pwrite(fd, p, size, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EIO;
    p += n;
    size -= static_cast<std::size_t>(n);
    offset += static_cast<std::uint64_t>(n);
  }
  return 0;
}

int write_all(int fd, std::span<const char> first, std::span<const char> second) {
  while (!first.empty()) {
    std::array<iovec, 2> parts{iovec{const_cast<char*>(first.data()), first.size()},
                               iovec{const_cast<char*>(second.data()), second.size()}};
    const ssize_t n = ::writev(fd, parts.data(), second.empty() ? 1 : 2);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    const auto written = static_cast<std::size_t>(n);
    if (written < first.size()) {
      first = first.subspan(written);
      continue;
    }
    second = second.subspan(written - first.size());
    first = {};
  }
  return write_all(fd, second.data(), second.size());
}

Done ContentSink::write(std::string_view data) {
  sha_.update(data);
  total_ += data.size();
  if (fd_ < 0 || data.empty()) return Ok{};
  if (sparse_ && data[0] == 0 && std::memcmp(data.data(), data.data() + 1, data.size() - 1) == 0) {
    if (const int err = out_.skip(data.size()); err != 0) {
      return retry(fmt::format("seek error: {}", std::strerror(err)));
    }
    return Ok{};
  }
  if (const int err = out_.write(data); err != 0) {
    return retry(fmt::format("write error: {}", std::strerror(err)));
  }
  return Ok{};
}

Expected<std::uint64_t> ContentSink::finish(std::string_view sha256) {
  if (fd_ >= 0) {
    if (const int err = out_.finish(); err != 0) {
      return retry(fmt::format("write error: {}", std::strerror(err)));
    }
  }
  const std::string digest = sha_.hex_digest();
  if (digest != sha256) {
    return retry(fmt::format("content checksum mismatch (content hashes to {})", digest));
  }
  return total_;
}

long read_some(int fd, void* data, std::size_t size) {
  while (true) {
    const ssize_t n = ::read(fd, data, size);
    if (n >= 0) return n;
    if (errno != EINTR) return -errno;
  }
}

Expected<std::string> read_small_file(const std::string& path, std::size_t limit) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return errno_fault(errno, Side::Archive, fmt::format("opening {}", shown_path(path)));
  std::string data;
  char buffer[64 * 1024];
  while (true) {
    const long n = read_some(fd.get(), buffer, sizeof buffer);
    if (n < 0) {
      return errno_fault(static_cast<int>(-n), Side::Archive,
                         fmt::format("reading {}", shown_path(path)));
    }
    if (n == 0) return data;
    data.append(buffer, static_cast<std::size_t>(n));
    if (data.size() > limit)
      return retry(fmt::format("archive: {} is too large", shown_path(path)));
  }
}

bool path_exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

DiskWriter::DiskWriter(std::string root, StepHook step_hook, FailHook fail_hook)
    : root_(std::move(root)), step_hook_(std::move(step_hook)), fail_hook_(std::move(fail_hook)) {}

void DiskWriter::step(std::string_view name) const {
  if (step_hook_) step_hook_(name);
}

Expected<UniqueFd> DiskWriter::create_temp(std::string& temp_path) {
  static thread_local std::mt19937_64 random{std::random_device{}()};
  step("create-temp");
  for (int attempt = 0; attempt < 100; ++attempt) {
    temp_path = fmt::format("{}/tmp/{}-{}-{:016x}.tmp", root_, ::getpid(), ++counter_, random());
    UniqueFd fd(::open(temp_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, kFileMode));
    if (fd) return fd;
    if (errno != EEXIST) {
      return errno_fault(errno, Side::Archive, fmt::format("creating {}", shown_path(temp_path)));
    }
  }
  return retry("archive: cannot find a free temporary file name");
}

Done DiskWriter::commit(int fd, const std::string& temp_path, const std::string& final_path) {
  step("fsync-temp");
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::unlink(temp_path.c_str());
    return errno_fault(err, Side::Archive, fmt::format("syncing {}", shown_path(temp_path)));
  }
  step("rename");
  if (::rename(temp_path.c_str(), final_path.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp_path.c_str());
    return errno_fault(err, Side::Archive, fmt::format("renaming to {}", shown_path(final_path)));
  }
  return sync_dir(parent_path(final_path));
}

Expected<std::uint64_t> DiskWriter::write_file(const std::string& final_path,
                                               std::string_view data) {
  std::string temp;
  auto fd = create_temp(temp);
  if (!fd) return fd.fault();
  step("write-temp");
  if (const int err = write_all(fd->get(), data.data(), data.size()); err != 0) {
    ::unlink(temp.c_str());
    return errno_fault(err, Side::Archive, fmt::format("writing {}", shown_path(temp)));
  }
  if (auto done = commit(fd->get(), temp, final_path); !done) return done.fault();
  return static_cast<std::uint64_t>(data.size());
}

Done DiskWriter::make_dir(const std::string& path) {
  step("mkdir");
  if (::mkdir(path.c_str(), kDirMode) != 0) {
    if (errno == EEXIST) return Ok{};
    return errno_fault(errno, Side::Archive,
                       fmt::format("creating directory {}", shown_path(path)));
  }
  return sync_dir(parent_path(path));
}

Done DiskWriter::make_marker(const std::string& path) {
  step("marker");
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, kFileMode));
  if (!fd) {
    if (errno == EEXIST) return Ok{};
    return errno_fault(errno, Side::Archive, fmt::format("creating {}", shown_path(path)));
  }
  return sync_dir(parent_path(path));
}

Done DiskWriter::rename_unsynced(const std::string& from, const std::string& to) {
  step("rename-marker");
  if (::rename(from.c_str(), to.c_str()) != 0) {
    if (errno == ENOENT && path_exists(to)) return Ok{};  // finished by another writer
    return errno_fault(errno, Side::Archive, fmt::format("renaming {}", shown_path(from)));
  }
  return Ok{};
}

Done DiskWriter::sync_dir(const std::string& dir) const {
  step("fsync-dir");
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd || ::fsync(fd.get()) != 0) {
    return errno_fault(errno, Side::Archive, fmt::format("syncing directory {}", shown_path(dir)));
  }
  return Ok{};
}

void DiskWriter::remove_stale_temps() const {
  const std::string dir = root_ + "/tmp";
  const auto names = directory_names(dir);
  if (!names) return;
  for (const auto& name : *names) {
    long pid = 0;
    if (std::sscanf(name.c_str(), "%ld-", &pid) != 1 || pid <= 0) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // still running
    const std::string path = dir + "/" + name;
    if (::unlink(path.c_str()) == 0) {
      spdlog::debug("removed stale temporary file {}", shown_path(path));
    }
  }
}

}  // namespace tw::archive
