// The requests of the line protocol, written once over the layout seam. None is applied as
// a blind edit: each makes the archive's latest state of its path, and of what is archived
// beneath it, equal to what the disk holds now (FORMAT.md, "Operations").
//
// Locking: a path's look at the disk and its commit happen under that path's lock, so a
// stale observation never lands over a newer one. A thread holds one lock at a time, or the
// two of a MOVE step (taken in rank order), and never takes a lock while holding another
// otherwise, so two archivers cannot deadlock whatever their requests say. Internal to the
// archive library; one Reconciler serves one request on one thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "archive/expected.hpp"
#include "archive/layout.hpp"
#include "archive/source.hpp"
#include "common/filters.hpp"
#include "common/protocol.hpp"

namespace tw::archive {

class Reconciler {
 public:
  // `order` is the request's place in the master queue (FORMAT.md, "Reads that answer
  // later requests").
  Reconciler(WritableLayout& layout, const StoreHooks& hooks, QueueOrder order)
      : layout_(layout), hooks_(hooks), order_(order) {}

  // UPDATE, STAT, DELETE: the archive's latest state of `raw`, and of what it holds
  // beneath it, made equal to the disk.
  Expected<std::uint64_t> reconcile(std::string_view raw, Op hint);
  // MOVE: as reconcile for both names, with the history following the file where the
  // disk confirms the rename.
  Expected<std::uint64_t> move(std::string_view raw_from, std::string_view raw_to);
  // SCAN (Store::scan).
  Expected<std::uint64_t> scan(std::string_view raw, const Filter* filter);

 private:
  // How a path turned out after its look and commit.
  enum class Found { Absent, Directory, Other };
  struct Committed {
    std::uint64_t bytes = 0;
    Found found = Found::Absent;
    std::optional<Fault> refused;  // present but not archivable (fifo, socket, device)
    bool children = false;         // something archived beneath the path, read with its latest
  };

  bool cancelled() const { return hooks_.cancelled && hooks_.cancelled(); }
  Expected<std::uint64_t> reconcile_path(const std::string& path, Op hint);
  // Looks at `path` and commits what it sees, under its lock; nothing beneath it.
  Expected<Committed> settle(const std::string& path, Op hint);
  // The commit step for a look made under the path's lock: a version of what is there, a
  // tombstone, or nothing when the latest version already says so. `follow` is the live
  // version of the name a confirmed MOVE came from.
  Expected<Committed> commit_look(const std::string& path, const std::optional<Version>& latest,
                                  const SourceLook& look, Op hint, const Version* follow,
                                  const std::string& follow_from);
  // A version of what `look` found (content read and stored when new).
  Expected<Version> observe(const std::string& path, const SourceLook& look, Op hint,
                            const Version* live, const Version* follow,
                            std::uint64_t& stored_bytes);
  // The content a version may take over without reading the file, if any.
  std::optional<Version> taken_over(const Version& now, Op hint, const Version* live,
                                    const Version* follow) const;
  // A regular file's content read (when new, stored) into `v`.
  Expected<Version> read_content(const std::string& path, const SourceLook& look,
                                 const Version* live, const Version* follow,
                                 std::uint64_t& stored_bytes);
  // One MOVE step: old name `p` and new name `q` looked at under both locks; the history
  // follows when the disk confirms the rename, else both are reconciled. Reports `q`.
  Expected<Committed> move_step(const std::string& p, const std::string& q);
  Expected<Committed> move_look(const std::string& p, const std::string& q);
  // What is archived beneath `path` made to match the disk: for a directory, its archived
  // direct children the disk no longer holds are reconciled; for anything else, every
  // archived path strictly beneath it is tombstoned (after a fresh look each). `beneath`:
  // whether anything is archived beneath the path, when the caller read it already.
  Expected<std::uint64_t> settle_structure(const std::string& path, bool directory,
                                           std::optional<bool> beneath = std::nullopt);
  // One entry of a SCAN: as STAT, and what it held if it was a directory.
  Expected<std::uint64_t> scan_entry(const std::string& entry);
  // Numbers `v` after `latest` and commits it.
  Expected<std::uint64_t> append(const std::string& path, const std::optional<Version>& latest,
                                 Version v);

  WritableLayout& layout_;
  const StoreHooks& hooks_;
  QueueOrder order_;
};

}  // namespace tw::archive
