// Format 2's locks (archive/format2/slot_locks.hpp).
#include "archive/format2/slot_locks.hpp"

#include <fcntl.h>
#include <sys/file.h>

#include <cerrno>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "archive/sha256.hpp"
#include "common/escape.hpp"

namespace tw::archive {
namespace {

// Path slots: the first 8 hex digits of the path's SHA-256 (2^32), masked to 2^30.
constexpr std::size_t kSlotHexDigits = 8;
// Digest slots: 2^40, one byte each after the path slots, by the first 40 bits of a blob id:
// with 2^20, a group holding 4,096 slots made one new blob in 256 wait for another blob's
// commit (two archivers waited so 0.5 s of their 6 in a first backup of small files,
// measured).
constexpr off_t kDigestSlotBase = off_t{1} << 30;
constexpr std::size_t kDigestSlotHexDigits = 10;

// The byte that stands for `slot`, as an OFD lock request of `type`.
struct flock slot_range(short type, off_t slot) {
  struct flock range {};
  range.l_type = type;
  range.l_whence = SEEK_SET;
  range.l_start = slot;
  range.l_len = 1;
  return range;
}

Fault open_fault(const std::string& file) {
  return retry(fmt::format("cannot open {}: {}", shown_path(file), std::strerror(errno)));
}

}  // namespace

Expected<SlotLocks> SlotLocks::open(DiskWriter& disk, const std::string& root) {
  SlotLocks out;
  const std::string file = root + "/locks";
  out.locks_.reset(::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, kFileMode));
  if (!out.locks_) return open_fault(file);
  // One file would do, but the kernel looks through every lock held on a file at each lock
  // and unlock, and two archivers in a group commit hold a few hundred.
  const std::string dir = root + "/slots";
  TRY(disk.make_dir(dir));
  const UniqueFd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
  if (!dir_fd) return open_fault(dir);
  for (std::size_t i = 0; i < kSlotFiles; ++i) {
    const std::string name = fmt::format("{:02x}", i);
    out.files_[i].reset(
        ::openat(dir_fd.get(), name.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, kFileMode));
    if (!out.files_[i]) return open_fault(dir + "/" + name);
  }
  return out;
}

Done SlotLocks::lock_setup() {
  while (::flock(locks_.get(), LOCK_EX) != 0) {
    if (errno != EINTR) return retry(fmt::format("cannot lock locks: {}", std::strerror(errno)));
  }
  return Ok{};
}

void SlotLocks::unlock_setup() { ::flock(locks_.get(), LOCK_UN); }

void SlotLocks::wait_for_setup(const std::string& root) {
  const UniqueFd locks(::open((root + "/locks").c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!locks) return;
  while (::flock(locks.get(), LOCK_SH) != 0 && errno == EINTR) {
  }
}

off_t SlotLocks::path_slot(std::string_view path) {
  const std::string key = sha256_hex(path);
  return static_cast<off_t>(std::stoull(key.substr(0, kSlotHexDigits), nullptr, 16) >> 2);
}

std::optional<off_t> SlotLocks::digest_slot(std::string_view id) {
  if (id.size() < kDigestSlotHexDigits) return std::nullopt;
  return kDigestSlotBase + static_cast<off_t>(std::stoull(
                               std::string(id.substr(0, kDigestSlotHexDigits)), nullptr, 16));
}

int SlotLocks::lock(off_t slot, bool try_only, const std::function<bool()>& cancelled) {
  struct flock range = slot_range(F_WRLCK, slot);
  while (::fcntl(fd_of(slot), try_only ? F_OFD_SETLK : F_OFD_SETLKW, &range) != 0) {
    if (errno == EAGAIN || errno == EACCES) return EAGAIN;
    if (errno != EINTR) return errno;
    if (cancelled && cancelled()) return EINTR;
  }
  return 0;
}

void SlotLocks::unlock(off_t slot) {
  struct flock range = slot_range(F_UNLCK, slot);
  ::fcntl(fd_of(slot), F_OFD_SETLK, &range);
}

}  // namespace tw::archive
