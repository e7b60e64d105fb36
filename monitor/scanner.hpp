// Walks a source directory and compares it with what the archive holds, producing only the
// changes needed to bring the archive up to date: the start-up catch-up, the rescan after
// an inotify overflow or a failed watch, and the scan of a directory that was just created
// or moved in. Links are never followed; excluded paths are skipped (an excluded directory
// is not entered); fifos, sockets and devices are not archived and so not queued.
// Not thread-safe: one Scanner per thread (it uses the ArchiveView).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "monitor/archive_view.hpp"
#include "monitor/change.hpp"
#include "common/filters.hpp"

namespace tw::monitor {

// Paths with items still waiting in the queue (NEW or DISPATCHED), raw, with what waits.
struct PendingSet {
  enum : unsigned { kUpdate = 1, kDelete = 2 };  // an UPDATE; a DELETE or a MOVE away
  std::unordered_map<std::string, unsigned> paths;
  unsigned of(const std::string& path) const {
    auto it = paths.find(path);
    return it == paths.end() ? 0u : it->second;
  }
};

struct ScanRequest {
  std::string dir;  // absolute, normal
  // The archived path `dir` corresponds to: `dir` itself, or for a directory renamed from
  // A to `dir`, A (the MOVE item carries A's history; only what differs is queued).
  std::string archived_as;
  // Also queue DELETE for archived paths beneath `dir` that no longer exist.
  bool find_deletes = false;
  // Paths with queued work; those changes are not queued twice. May be null.
  const PendingSet* pending = nullptr;
};

struct ScanStats {
  std::uint64_t entries = 0;
  std::uint64_t changes = 0;
  std::uint64_t unreadable = 0;  // directories that could not be listed
};

class Scanner {
 public:
  // Called for each directory to be entered, before its entries are read (so a watch
  // added there sees everything created after the listing starts).
  using DirectoryHook = std::function<void(const std::string& dir)>;

  Scanner(const Filter& filter, ArchiveView& archive) : filter_(filter), archive_(archive) {}

  // Appends the changes found to `out`. Stops early (returning what it has) when `cancel`
  // becomes true.
  ScanStats scan(const ScanRequest& request, const DirectoryHook& on_directory,
                 std::vector<Change>& out, const std::atomic<bool>* cancel = nullptr);

 private:
  const Filter& filter_;
  ArchiveView& archive_;
};

// The lstat-derived size and mtime of a change.
void describe(Change& change, const struct stat& st);

}  // namespace tw::monitor
