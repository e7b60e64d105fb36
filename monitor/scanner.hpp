// Walks a source directory and compares it with what the archive holds, producing only the
// changes needed to bring the archive up to date: the start-up catch-up, the rescan after
// an inotify overflow or a failed watch, the periodic rescan, and the scan of a directory
// that was just created, moved in or renamed. Links are never followed (a path with a link
// among its components is not the source's: the archiver treats it as absent); excluded
// paths are skipped (an excluded directory is not entered); fifos, sockets and devices are
// not archived and so not queued. A directory is compared as the walk enters it, after the
// directory hook (where the watcher adds its watch), so that a change of its entries made
// after its parent was listed is either seen by the comparison or reported by the watch.
// Its change is queued after those of everything beneath it (post-order): the
// scheduler never runs a directory's request beside one for a path inside it, so a
// directory queued first would hold back all of its entries until its own request is done,
// once per directory; queued last, it waits alone for its entries while the walk's next
// changes go on. Directories are listed the largest first (ToList below). The order of the
// queue decides nothing else: every request reconciles the archive with what is on disk
// when it runs.
// A scan of a whole source (ScanRequest::scans: the start-up catch-up, the rescans) queues
// a directory where many entries differ from the archive (a first backup) as one SCAN of
// it, standing for its own change and theirs (the archiver looks at each entry itself),
// instead of an item each: see kScan* in scanner.cpp and ScanLimits. Subdirectories, and
// files of 1 MiB or more, keep items of their own (a large file's own request runs beside
// the rest). The scan of a directory seen made or moved in queues an item per entry: its
// entries are often still being written, and the events of those fold into the scan's
// items.
// A walk that begins with nothing archived at or beneath `archived_as` (a first backup)
// reads the archive no further: every entry is new, and nothing archived can be gone. What
// the archivers write meanwhile comes from changes queued already (by this walk, or found
// pending), so reading it back could only spare an item, never find one. The look-ups and
// the listing it saves were half of the monitor's CPU in a first backup (500,000 files:
// 3.7 s, now 1.75 s).

// Not thread-safe: one Scanner (or ScanWalk) per thread (it uses the ArchiveView).
#pragma once

#include <dirent.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/filters.hpp"
#include "monitor/archive_view.hpp"
#include "monitor/change.hpp"

namespace tw::monitor {

// Paths with items still waiting in the queue, raw, with what waits. NEW items only: one
// already dispatched may have been looked at before a later change, so it covers nothing.
struct PendingSet {
  enum : unsigned { kUpdate = 1, kDelete = 2 };  // an UPDATE; a DELETE or a MOVE away
  std::unordered_map<std::string, unsigned> paths;
  unsigned of(const std::string& path) const {
    auto it = paths.find(path);
    return it == paths.end() ? 0u : it->second;
  }
};

// The largest directory a whole source's scan queues as one SCAN. One SCAN runs on one
// archiver, at a cost that grows with its entries alone (its group is made durable in parts
// of at most a few thousand files); an entry queued as an item of its own costs more in
// all, in the database, the scheduler and the monitor. A folder of 18,088 small files (the
// copy of /usr/share/man/man1) took 1.8-2.1 s of one archiver as one SCAN, 1.9-2.5 s as five
// SCANs on two archivers and 4.2 s as 18,088 items, so a large folder goes as one SCAN; the
// bound keeps the monitor's list of one folder's changes (and one request) finite. The
// bytes bound keeps a folder of many mid-sized files (each one under 1 MiB, which has an
// item of its own) from holding one archiver for long.
struct ScanLimits {
  std::uint64_t max_entries = 65536;                // entries looked at, subdirectories aside
  std::int64_t max_bytes = std::int64_t{64} << 20;  // of the differing entries
};

struct ScanRequest {
  std::string dir;  // absolute, normal
  // The archived path `dir` corresponds to: `dir` itself, or for a directory renamed from
  // A to `dir`, A (the MOVE item carries A's history; only what differs is queued).
  std::string archived_as;
  // Also queue DELETE for paths archived beneath `archived_as` that no longer exist
  // beneath `dir` (under their new names, for a renamed directory).
  bool find_deletes = false;
  // Paths with queued work; those changes are not queued twice. May be null; must
  // outlive the walk.
  const PendingSet* pending = nullptr;
  int priority = kLivePriority;  // of the changes found
  bool scans = false;            // queue a directory whose entries differ as one SCAN
  ScanLimits limits{};
};

struct ScanStats {
  std::uint64_t entries = 0;
  std::uint64_t changes = 0;
  std::uint64_t unreadable = 0;  // directories that could not be listed
};

// Called for each directory to be entered, before its entries are read (so a watch added
// there sees everything created after the listing starts).
using DirectoryHook = std::function<void(const std::string& dir)>;

// One scan, done a slice at a time: each step() looks at a bounded number of entries (on
// disk, then in the archive), so a long scan can share its thread with live events. The
// tree may change between steps; what changes is seen by the watcher as well.
class ScanWalk {
 public:
  ScanWalk(const Filter& filter, ArchiveView& archive, ScanRequest request);
  ScanWalk(const ScanWalk&) = delete;
  ScanWalk& operator=(const ScanWalk&) = delete;

  // Looks at up to `budget` entries, appending the changes found to `out`; true when the
  // walk is finished.
  bool step(std::size_t budget, const DirectoryHook& on_directory, std::vector<Change>& out);
  bool done() const { return phase_ == Phase::Done; }
  const ScanStats& stats() const { return stats_; }
  const ScanRequest& request() const { return request_; }

 private:
  enum class Phase { Start, Walk, Deletes, Done };

  void start();
  // Reads the next entry of the directory being listed (opening the next one when none
  // is); false when nothing was left to read.
  bool walk_one(const DirectoryHook& on_directory, std::vector<Change>& out);
  void consider(const std::string& path, const struct stat& st, std::vector<Change>& out);
  void check_deleted(const std::string& archived, std::vector<Change>& out);
  void push(std::vector<Change>& out, Change change);
  // At the end of listing_dir_: its entries' changes, as they are or as one SCAN.
  void leave_listing(std::vector<Change>& out);
  // One part of Entered `id` done (its listing, or a subdirectory left): when none is
  // left, its change is queued, and so on up.
  void leave(std::uint64_t id, std::vector<Change>& out);

  const Filter& filter_;
  ArchiveView& archive_;
  const ScanRequest request_;

  Phase phase_ = Phase::Start;
  ScanStats stats_;
  // Directories still to be listed, the largest first (a directory's size grows with its
  // entries on the common filesystems), then in the order they were found: a folder of
  // many files is queued early, as one long SCAN beside the rest, instead of ending the
  // backup alone on one archiver because the walk reached it last (docs/decisions.md).
  struct ToList {
    std::string dir;
    std::int64_t size = 0;     // its lstat size
    std::uint64_t found = 0;   // the order it was found in, from 1: its Entered's id
    std::uint64_t parent = 0;  // the Entered it lies in; 0 for the top
  };
  struct ListFirst {
    bool operator()(const ToList& a, const ToList& b) const {
      return a.size != b.size ? a.size < b.size : a.found > b.found;
    }
  };
  // A directory entered and not left: its change (if any) is queued once its own listing
  // and every directory beneath it are done.
  struct Entered {
    std::uint64_t parent = 0;
    std::size_t open = 1;  // its own listing, then each subdirectory not left yet
    std::optional<Change> on_leave;
  };
  std::vector<ToList> to_list_;  // a heap by ListFirst
  std::uint64_t found_ = 1;
  std::unordered_map<std::uint64_t, Entered> entered_;
  std::uint64_t listing_id_ = 0;  // the Entered of listing_dir_
  std::unique_ptr<DIR, int (*)(DIR*)> listing_{nullptr, ::closedir};
  std::string listing_dir_;
  std::vector<std::pair<std::string, std::int64_t>> subdirs_;  // of listing_dir_, with sizes
  // The changes found among listing_dir_'s entries (subdirectories and large files aside),
  // held until its listing ends to be queued as they are or as one SCAN.
  std::vector<Change> entry_changes_;
  std::uint64_t entry_files_ = 0;  // its entries looked at (subdirectories aside)
  std::int64_t entry_bytes_ = 0;   // the bytes of entry_changes_
  bool entries_streamed_ = false;  // too many for a SCAN: its changes go out as found
  std::vector<std::string> unreadable_;
  std::vector<std::string> archived_;  // beneath archived_as, for the deletes
  std::size_t archived_next_ = 0;
  std::string deleted_dir_;  // the last DELETE queued: what is beneath it is covered
  bool unarchived_ = false;  // nothing was archived at or beneath archived_as at the start
};

class Scanner {
 public:
  Scanner(const Filter& filter, ArchiveView& archive) : filter_(filter), archive_(archive) {}

  // The whole scan at once. Appends the changes found to `out`. Stops early (returning
  // what it has) when `cancel` becomes true.
  ScanStats scan(const ScanRequest& request, const DirectoryHook& on_directory,
                 std::vector<Change>& out, const std::atomic<bool>* cancel = nullptr);

 private:
  const Filter& filter_;
  ArchiveView& archive_;
};

// The lstat-derived size and mtime of a change.
void describe(Change& change, const struct stat& st);

}  // namespace tw::monitor
