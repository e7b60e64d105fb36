// Restore's writing side (FORMAT.md, "Restore"): archived versions written below the
// destination, always relative to an open directory descriptor and never following a
// symlink below the destination root; restore.cpp decides which versions. Internal to the
// archive library; one Restorer or TreeWriter belongs to one restore.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "archive/expected.hpp"
#include "archive/layout.hpp"
#include "archive/snapshot.hpp"
#include "archive/types.hpp"
#include "common/fd.hpp"

namespace tw::archive {

// Places versions into directories, counting them in the report.
class Restorer {
 public:
  Restorer(Layout& layout, const RestoreOptions& options, RestoreReport& report)
      : layout_(layout), options_(options), report_(report) {}

  // How a file placed becomes durable: by default it is synced before it is renamed into
  // place; with `defer` set, it is handed over, still open, once it is in place, and the
  // caller syncs it (and its directory). A file that replaces another is synced before
  // either way: a power cut then leaves the old content, never an empty file.
  using DeferSync = std::function<void(UniqueFd file, const std::string& target)>;
  void defer_sync(DeferSync defer) { defer_ = std::move(defer); }

  // Places file or symlink version `v` as `name` inside `dir_fd`. `target` names it in
  // messages.
  Done place(int dir_fd, const std::string& name, const Version& v, const std::string& target);

 private:
  // Without --force, a file is written unnamed (O_TMPFILE) and linked under `name` once
  // whole and checked: no temporary name, no rename, and an existing `name` is never
  // replaced. False where the filesystem cannot do it: the caller then takes a temporary
  // name.
  Expected<bool> place_unnamed(int dir_fd, const std::string& name, const Version& v,
                               const std::string& target);
  // Counts `v` placed, hands its file `made` over to be synced (defer_sync) when
  // `hand_over`, and tells options.on_placed.
  void counted(const Version& v, UniqueFd made, bool hand_over, const std::string& target);
  // The content of `v` written to `fd` and checked, then its owner, mode and times.
  Done fill_file(int fd, const Version& v, const std::string& target);
  // The link of version `v` as `temp` inside `dir_fd`, with its owner and times.
  Done make_link(int dir_fd, const std::string& temp, const Version& v, const std::string& target);
  // The file of version `v` as `temp` inside `dir_fd`, open as `made`: content, owner, mode,
  // times. A `temp` that could not be made is not removed.
  template <class Cleanup>
  Done make_file(int dir_fd, const std::string& temp, const Version& v, const std::string& target,
                 Cleanup& cleanup, UniqueFd& made);

  Layout& layout_;
  DeferSync defer_;
  const RestoreOptions& options_;
  RestoreReport& report_;
};

// Gives the file or directory open as `fd` the owner (with options.restore_owner), mode and
// times of `v`.
Done apply_metadata(int fd, const Version& v, const RestoreOptions& options,
                    const std::string& target);

// Opens (creating with `create`) the directories `parts[0..count)` below `root_fd`, never
// following a symlink. A directory made here gets mode 0777 less the umask (as `mkdir -p`);
// `*created_last`, when given, says whether the last one was made here.
Expected<UniqueFd> open_below(int root_fd, const std::vector<std::string>& parts, std::size_t count,
                              bool create, const std::string& root_shown,
                              bool* created_last = nullptr);

// Opens directory `dest` for restoring into, without following a link in any component:
// a link at or above the destination is refused, not resolved. Missing directories are
// created when `create`; `*created` says whether `dest` itself was.
Expected<UniqueFd> open_destination(const std::string& dest, bool create, bool* created);

// The directories of one path below a destination, kept open from the top down, so that
// the next path's are reached from the deepest one the two share rather than from the
// destination again (a tree's entries come in the order of their components: most share
// every folder, the rest most of them).
class DirChain {
 public:
  DirChain(int root_fd, std::string root_shown)
      : root_fd_(root_fd), root_shown_(std::move(root_shown)) {}
  // `parts[0..count)` opened as open_below opens them (made when `create`), reusing those
  // open already; `*changed` says whether any was opened now.
  Expected<std::shared_ptr<const UniqueFd>> open(const std::vector<std::string>& parts,
                                                 std::size_t count, bool create, bool* changed);
  void clear() {
    fds_.clear();
    parts_.clear();
  }

 private:
  int root_fd_;
  std::string root_shown_;
  std::vector<std::string> parts_;                    // of the deepest directory open
  std::vector<std::shared_ptr<const UniqueFd>> fds_;  // the destination's, then parts_' each
};

class PlacePool;

// Writes a tree's entries (sorted by components) below the open destination `root_fd`:
// directories on the calling thread, files and links queued to `pool`. finish() then
// applies the archived metadata of the directories it is to (those made here, and with
// --force those that were already there; never those of an existing destination
// otherwise) and hands every directory it wrote into to the pool to sync. What fails is a
// problem of the report.
class TreeWriter {
 public:
  TreeWriter(PlacePool& pool, const RestoreOptions& options, int root_fd, std::string dest,
             RestoreReport& report);

  void write(TreeEntry entry, bool created_root);
  // Once every entry is written: waits for the pool's placing, then directory metadata,
  // deepest first, so restoring entries does not change it again, and their syncs.
  void finish();

 private:
  std::string target(const std::vector<std::string>& parts) const;
  // The folder `entry` goes into (through chain_: entries are sorted, so most share it).
  // Null when it cannot be opened (a problem is recorded).
  std::shared_ptr<const UniqueFd> parent_of(const TreeEntry& entry);

  PlacePool& pool_;
  const RestoreOptions& options_;
  std::string dest_;
  RestoreReport& report_;
  // Every directory written into or made, by components below the destination, with the
  // version whose metadata it is to get (none: it was there already or is known only
  // as a parent). Reverse order is deepest first.
  std::map<std::vector<std::string>, std::optional<Version>> directories_;
  DirChain chain_;
};

}  // namespace tw::archive
