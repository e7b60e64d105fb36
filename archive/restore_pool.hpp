// A tree restored on several threads (FORMAT.md, "Restore"): each file or link is placed by
// a worker with a view of the archive of its own (Layout::reader; the views are kept and
// taken in turn), and made durable one of two ways (Durability): threads that fsync each
// file once it is in place, then every directory the restore wrote into; or one syncfs at
// the end (begun early: a syncfs on the sync thread every kSyncEvery bytes placed). Internal to the
// archive library; one PlacePool belongs to one restore, its methods called from one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <semaphore>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/thread_pool.hpp>

#include "archive/layout.hpp"
#include "archive/restore_writer.hpp"
#include "archive/types.hpp"
#include "common/fd.hpp"
#include "common/mutex.hpp"

namespace tw::archive {

// The machine's writes not yet on disk (Dirty and Writeback of /proc/meminfo, `meminfo`),
// against the number of files and folders the restore writes (`entries`), decide how a tree
// restore makes what it wrote durable. A device flush per file costs more than one syncfs
// (10,000 files of 1-8 KiB restored on a fresh ext4 here: 0.46 s with syncfs, 1.1 s synced
// file by file, 0.33 s not synced), but syncfs also waits for every other program's pending
// writes on the filesystem (5,572 files with 1.5 GB of someone else's writes pending there:
// 1.1-1.2 s with syncfs, 0.85 s synced file by file; 0.43 s quiet). The flushes grow with
// the files: 61,500 entries of a copy of /usr/share took 10.2 s synced file by file, 4.5 s
// with syncfs quiet and 5.3 s with 1 GB pending. A sync per entry cost about what syncfs
// takes to write 170 KB of others' data here, so: the whole filesystem when no more than
// kQuietPending bytes, or kPendingPerEntry bytes per entry, are pending as the restore
// begins; each file otherwise, and when `meminfo` cannot be read. An explicit choice stands.
inline constexpr std::uint64_t kQuietPending = std::uint64_t{64} << 20;
inline constexpr std::uint64_t kPendingPerEntry = std::uint64_t{128} << 10;
Durability choose_durability(Durability asked, std::string_view meminfo, std::size_t entries);

class PlacePool {
 public:
  // Workers for `layout`, each on a view of its own (one, on `layout` itself, when it gives
  // no other view: uses_layout()) and, with Durability::EachFile, threads that sync.
  // `durability` is EachFile or WholeFilesystem.
  PlacePool(Layout& layout, const RestoreOptions& options, Durability durability);
  // Waits for the work under way (a restore cancelled or failed midway).
  ~PlacePool();
  PlacePool(const PlacePool&) = delete;
  PlacePool& operator=(const PlacePool&) = delete;

  // Places `entry`'s version as its last component in directory `dir`, which stays open
  // until that is done; `target` names it. Waits while the pool holds as many as it takes.
  void place(std::shared_ptr<const UniqueFd> dir, TreeEntry entry, std::string target);
  // Waits until everything queued to place() is placed (their syncs may still run).
  void wait();
  // Whether the workers read `layout` itself, which the caller then must not use until
  // wait() returns.
  bool uses_layout() const { return workers_ == 1; }
  // Whether each file and directory is synced (Durability::EachFile).
  bool syncs_each() const { return sync_each_; }
  // Syncs `fd` (a directory, once everything in it is placed), closing it after; with
  // WholeFilesystem, only closes it.
  void sync(UniqueFd fd, std::string target);
  // Waits for everything (with WholeFilesystem, syncs the filesystem of `root_fd`, shown
  // as `root`); adds the counts and problems to `report`, those of the entries in the order
  // they were queued, then those of the syncs.
  void finish(RestoreReport& report, int root_fd, const std::string& root);

 private:
  // A view of the archive for one worker: a free one, else a new one.
  Layout* take_view() EXCLUDES(mutex_);
  void give_back(Layout* view) EXCLUDES(mutex_);
  void add_sync(UniqueFd fd, const std::string& target);

  Layout& layout_;
  const RestoreOptions& options_;
  const bool sync_each_;
  std::size_t workers_ = 1;
  Mutex mutex_;
  std::vector<std::unique_ptr<Layout>> views_ GUARDED_BY(mutex_);  // every view opened
  std::vector<Layout*> free_views_ GUARDED_BY(mutex_);
  std::vector<std::string> sync_problems_ GUARDED_BY(mutex_);
  std::uint64_t queued_count_ = 0;  // entries queued so far (the next one's number)
  // What the workers placed, and what they could not (by the entry's number, so that the
  // report names them in the order queued), then the syncs' problems.
  RestoreReport placed_ GUARDED_BY(mutex_);
  std::uint64_t synced_bytes_ GUARDED_BY(mutex_) = 0;  // placed_.bytes at the last syncfs
  std::vector<std::pair<std::uint64_t, std::string>> place_problems_ GUARDED_BY(mutex_);
  std::counting_semaphore<> queued_;   // entries queued and not yet placed (each holds its dir)
  std::counting_semaphore<> syncing_;  // descriptors waiting for their sync
  // Last, so that they are joined before what their work uses goes.
  std::optional<boost::asio::thread_pool> syncers_;
  std::optional<boost::asio::thread_pool> placers_;
};

}  // namespace tw::archive
