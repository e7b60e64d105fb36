#include "archive/source.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "archive/disk.hpp"
#include "archive/sha256.hpp"
#include "common/dirs.hpp"
#include "common/filesystems.hpp"
#include "common/paths.hpp"
#include "common/time.hpp"

namespace tw::archive {
namespace {

std::atomic<bool> g_no_openat2{false};

bool absent_errno(int err) { return err == ENOENT || err == ENOTDIR || err == ELOOP; }

// Opens directory `dir` (canonical, absolute) as O_PATH without following any symlink.
// Returns the descriptor, or -errno.
int open_dir_nofollow(const std::string& dir) {
  if (!g_no_openat2.load(std::memory_order_relaxed)) {
    struct open_how how {};
    how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
    how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    const long fd = ::syscall(SYS_openat2, AT_FDCWD, dir.c_str(), &how, sizeof how);
    if (fd >= 0) return static_cast<int>(fd);
    // ENOSYS: an old kernel; EPERM: a seccomp filter that does not know the call.
    if (errno != ENOSYS && errno != EPERM) return -errno;
    g_no_openat2.store(true, std::memory_order_relaxed);
  }
  UniqueFd current(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!current) return -errno;
  std::size_t start = 1;
  while (start < dir.size()) {
    std::size_t end = dir.find('/', start);
    if (end == std::string::npos) end = dir.size();
    const std::string component = dir.substr(start, end - start);
    // O_DIRECTORY with O_NOFOLLOW fails with ENOTDIR on a symlink.
    UniqueFd next(
        ::openat(current.get(), component.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next) return -errno;
    current = std::move(next);
    start = end + 1;
  }
  return current.release();
}

}  // namespace

bool same_file_state(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino && a.st_mode == b.st_mode &&
         a.st_size == b.st_size && timespec_ns(a.st_mtim) == timespec_ns(b.st_mtim) &&
         timespec_ns(a.st_ctim) == timespec_ns(b.st_ctim);
}

Expected<SourceLook> look_at(const std::string& path) {
  SourceLook look;
  const std::string dir = parent_path(path);
  look.name = path == "/" ? "." : base_name(path);
  const int fd = open_dir_nofollow(dir);
  if (fd < 0) {
    if (absent_errno(-fd)) return look;
    return errno_fault(-fd, Side::Source, fmt::format("resolving {}", shown_path(dir)));
  }
  look.parent.reset(fd);
  const auto failed = [&](int err) -> Expected<SourceLook> {
    look.parent.reset();
    if (absent_errno(err)) return std::move(look);
    return errno_fault(err, Side::Source, fmt::format("lstat {}", shown_path(path)));
  };
  // The entry itself, not followed (a link is looked at as the link); it may be a mount point.
  if (::fstatat(look.parent.get(), look.name.c_str(), &look.st,
                AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT) != 0) {
    return failed(errno);
  }
  if (major(look.st.st_dev) == 0) {
    // No block device behind it (proc, sysfs, tmpfs, btrfs...): which filesystem it is is
    // asked of the entry opened without following it, and its lstat taken again from that
    // descriptor, so that both are of one and the same file. (A filesystem on a block
    // device is no pseudo filesystem: no open needed.)
    UniqueFd self(::openat(look.parent.get(), look.name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    if (!self || ::fstat(self.get(), &look.st) != 0) return failed(errno);
    look.pseudo_filesystem = pseudo_filesystem_of(self.get(), look.st.st_dev);
  }
  look.present = true;
  return look;
}

UniqueFd open_looked(const SourceLook& look, bool directory) {
  if (directory) {
    return UniqueFd(::openat(look.parent.get(), look.name.c_str(),
                             O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  }
  const int flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY;
  UniqueFd fd(::openat(look.parent.get(), look.name.c_str(), flags | O_NOATIME));
  if (!fd && errno == EPERM) fd.reset(::openat(look.parent.get(), look.name.c_str(), flags));
  return fd;
}

Expected<std::vector<std::string>> list_looked(const SourceLook& look,
                                               const std::string& shown_path) {
  UniqueFd fd = open_looked(look, true);
  if (!fd) {
    if (absent_errno(errno)) return std::vector<std::string>{};  // gone meanwhile
    return errno_fault(errno, Side::Source, fmt::format("listing {}", shown_path));
  }
  auto names = directory_names(fd.get());
  if (!names) {
    return errno_fault(names.failure().value, Side::Source, fmt::format("listing {}", shown_path));
  }
  return std::move(names.value());
}

Expected<std::string> read_looked_link(const SourceLook& look, const std::string& shown_path) {
  const auto size = look.st.st_size > 0 ? static_cast<std::size_t>(look.st.st_size) + 1 : PATH_MAX;
  std::string target(size, '\0');
  const ssize_t n =
      ::readlinkat(look.parent.get(), look.name.c_str(), target.data(), target.size());
  if (n < 0) {
    if (errno == EINVAL || absent_errno(errno)) {
      return retry(fmt::format("changed while being read: {}", shown_path));
    }
    return errno_fault(errno, Side::Source, fmt::format("reading link {}", shown_path));
  }
  if (static_cast<std::size_t>(n) >= target.size()) {
    return retry(fmt::format("changed while being read: {}", shown_path));
  }
  target.resize(static_cast<std::size_t>(n));
  return target;
}

}  // namespace tw::archive

namespace tw::archive {

Expected<std::string> hash_source(int fd, std::uint64_t expected_size, const std::string& shown,
                                  const std::function<bool()>& cancelled) {
  constexpr std::size_t kReadBuffer = 64 * 1024;  // stays in the core's cache while hashed
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  std::vector<char> buffer(kReadBuffer);
  Sha256 sha;
  std::uint64_t total = 0;
  while (true) {
    if (cancelled && cancelled()) return retry("cancelled");
    const long n = read_some(fd, buffer.data(), buffer.size());
    if (n < 0) {
      return errno_fault(static_cast<int>(-n), Side::Source, fmt::format("reading {}", shown));
    }
    if (n == 0) break;
    sha.update(buffer.data(), static_cast<std::size_t>(n));
    total += static_cast<std::uint64_t>(n);
  }
  if (total != expected_size) return retry(fmt::format("changed while being read: {}", shown));
  return sha.hex_digest();
}

}  // namespace tw::archive
