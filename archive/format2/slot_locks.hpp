// Format 2's locks (FORMAT.md, "Locks"): the locks file, whose flock orders the catalog's
// set-up, and 2^30 path slots and 2^40 digest slots, each one byte of one of the 64 slot
// files <root>/slots/<nn> locked with an OFD lock (released by the kernel when the process
// dies). A path's slot keeps two requests for it from interleaving; a digest slot keeps two
// writers from storing one new blob twice. Internal to the archive library; one SlotLocks
// belongs to one thread at a time.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "archive/disk.hpp"
#include "archive/expected.hpp"
#include "common/fd.hpp"

namespace tw::archive {

class SlotLocks {
 public:
  SlotLocks() = default;
  SlotLocks(const SlotLocks&) = delete;
  SlotLocks& operator=(const SlotLocks&) = delete;
  SlotLocks(SlotLocks&&) noexcept = default;
  SlotLocks& operator=(SlotLocks&&) noexcept = default;

  // Opens (creating them) the locks file and the slot files under `root` (RETRY when it
  // cannot).
  static Expected<SlotLocks> open(DiskWriter& disk, const std::string& root);
  bool is_open() const { return static_cast<bool>(locks_); }

  // Holds the locks file's flock while the catalog is set up (two writers starting on a new
  // archive would race to switch it to WAL).
  Done lock_setup();
  void unlock_setup();
  // A reader's side of the same lock: returns once no writer sets up the catalog under
  // `root` (at once when there is no locks file yet, or it cannot be opened). Writers make
  // catalog.db only under that lock, so a reader that found it not set up after this wait
  // met a writer that died before setting it up.
  static void wait_for_setup(const std::string& root);

  // The slot of a path, and of a blob id (nullopt: too short an id).
  static off_t path_slot(std::string_view path);
  static std::optional<off_t> digest_slot(std::string_view id);

  // Locks `slot` (waiting for another holder unless `try_only`; `cancelled` polled between
  // interrupted waits). Returns 0, EAGAIN when `try_only` found it held, EINTR when
  // cancelled, or another errno.
  int lock(off_t slot, bool try_only, const std::function<bool()>& cancelled);
  void unlock(off_t slot);

 private:
  static constexpr std::size_t kSlotFiles = 64;
  int fd_of(off_t slot) const { return files_[static_cast<std::size_t>(slot) % kSlotFiles].get(); }

  UniqueFd locks_;
  std::array<UniqueFd, kSlotFiles> files_;
};

}  // namespace tw::archive
