// The parts of Store shared by its source files (store.cpp, restore.cpp, verify.cpp).
// Internal to the archive library; same thread-safety as Store.
#pragma once

#include <sys/stat.h>

#include <array>
#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "archiver/catalog.hpp"
#include "archiver/chunk_store.hpp"
#include "archiver/disk.hpp"
#include "archiver/history.hpp"
#include "archiver/objects.hpp"
#include "archiver/source.hpp"
#include "archiver/store.hpp"
#include "archiver/sync_worker.hpp"

namespace tw::archive {

// The text of <root>/FORMAT, in format 1 and format 2.
inline constexpr std::string_view kFormatLine = "timewarp-archive 1\n";
inline constexpr std::string_view kFormat2Line = "timewarp-archive 2\n";
// The suffix of a child marker whose node is being named (FORMAT.md, "Layout").
inline constexpr std::string_view kPendingSuffix = ".pending";

// An exclusive flock on one path's lock file (<key>.lock), released on destruction. The
// lock is what keeps two requests for one path from interleaving their look at the disk
// and their commit (DESIGN.md, "Convergence").
//
// Format 1 locks a file per node; format 2 a byte of one of the slot files <root>/slots/<nn>
// (an OFD lock, released by the kernel when the process dies), at an offset derived from the
// path's key.
// Format 2: releases `slot` of the slot file `slot_fd` (Store::Impl::lock_slot took it).
void unlock_slot(int slot_fd, off_t slot);

class NodeLock {
 public:
  NodeLock() = default;
  NodeLock(UniqueFd fd, std::string file) : fd_(std::move(fd)), file_(std::move(file)) {}
  NodeLock(int slot_fd, off_t slot) : range_fd_(slot_fd), slot_(slot) {}
  // Format 2 in a group: the slot stays locked past this object, until the group's flush.
  NodeLock(std::map<off_t, int>* step_slots, off_t slot) : step_slots_(step_slots), slot_(slot) {}
  NodeLock(NodeLock&& other) noexcept
      : fd_(std::move(other.fd_)),
        file_(std::move(other.file_)),
        range_fd_(std::exchange(other.range_fd_, -1)),
        step_slots_(std::exchange(other.step_slots_, nullptr)),
        slot_(other.slot_) {}
  NodeLock& operator=(NodeLock&&) = delete;
  ~NodeLock();
  // Removes the lock file (still holding the lock) when the node holds nothing else, so
  // looks at paths that were never archived leave no file behind. (Format 2: nothing.)
  void drop_if_unused(const std::string& node_base);

 private:
  UniqueFd fd_;  // format 1: closing it releases the lock
  std::string file_;
  int range_fd_ = -1;  // format 2: the descriptor of the slot file holding byte `slot_`
  std::map<off_t, int>* step_slots_ = nullptr;  // format 2 in a group: the holders' count
  off_t slot_ = 0;
};

struct Store::Impl {
  Impl(std::string root_dir, Store::Mode open_mode, StoreHooks store_hooks,
       CompressionOptions compression);

  // --- constant after construction
  std::string root;
  Store::Mode mode;
  StoreHooks hooks;

  CompressionOptions compression;
  int format = 1;  // of the archive opened: 1 or 2
  ChunkSizes chunk_sizes = kFirstChunkSizes;  // format 2: those its FORMAT file names

  // --- working state
  QueueOrder order;  // of the request under way (Store::update and the others)
  DiskWriter disk;
  ObjectStore objects;  // format 1's objects; in format 2 only its hashing is used
  // Format 2 (FORMAT.md, "Format 2"): the catalog, the chunks, the locks file (its flock
  // orders the catalog's set-up), the slot files (the byte-range locks of paths and blobs,
  // spread over kSlotFiles files so that the kernel's list of locks per file stays short),
  // and the blobs written by this request that no commit names yet.
  std::optional<Catalog> catalog;
  std::optional<ChunkStore> chunk_store;
  UniqueFd locks;
  static constexpr std::size_t kSlotFiles = 64;
  std::array<UniqueFd, kSlotFiles> slot_files;
  // The slot file that holds `slot`.
  int slot_fd(off_t slot) const {
    return slot_files[static_cast<std::size_t>(slot) % kSlotFiles].get();
  }
  CatalogBatch staged;
  // Group commit (Store::begin_group; FORMAT.md "Format 2", Group commit): slots held by
  // a live NodeLock (the step under way), with how many hold each; slots held for the
  // versions of the open group; and every slot held for a group, open or closed, with how
  // many groups hold it (released when none does).
  bool grouping = false;
  std::map<off_t, int> step_slots;
  std::set<off_t> group_slots;
  std::map<off_t, int> held_slots;
  // A closed group: its versions and blobs are those of `staged` before `end`, committed
  // once its pack sync (run by `worker`) is done, then answered once the journal is synced.
  struct ClosedGroup {
    CatalogBatch::Mark end;
    std::vector<off_t> slots;
    std::function<void(const Done&)> on_durable;  // runs on the worker
    std::optional<Fault> lost;        // it cannot be committed (this thread's, not the worker's)
    std::optional<PackSync> pack;     // the worker's
    std::optional<Fault> sync_fault;  // written by the worker before `synced`
    std::atomic<bool> synced{false};
  };
  std::deque<std::shared_ptr<ClosedGroup>> closed;  // in the order closed
  std::optional<Fault> open_lost;   // the open group went with a group closed before it
  CatalogBatch::Mark group_opened;  // where the open group's part of `staged` begins

  // Runs the closed groups' syncs and answers; last, so it is gone before what they use.
  std::unique_ptr<SyncWorker> worker;

  bool cancelled() const { return hooks.cancelled && hooks.cancelled(); }

  // Nodes: <root>/nodes/<kk>/<key>.history, .path, .lock and .children/<child key>, where
  // key is the SHA-256 of the raw path (FORMAT.md, "Layout").
  static std::string key_of(std::string_view path);
  std::string node_base(std::string_view key) const;
  std::string node_of(std::string_view path) const { return node_base(key_of(path)); }
  std::string history_file(std::string_view path) const { return node_of(path) + ".history"; }
  // The path a node stands for (from its .path file, else its history), if it has one.
  std::optional<std::string> path_of_key(std::string_view key) const;

  // The history of `path` (empty when none). Errors name the damaged file.
  Result<History> read_history(std::string_view path) const;
  static Result<History> read_history_file(const std::string& file);
  Expected<History> load_history(std::string_view path) const;
  Expected<std::uint64_t> save_history(const History& history);
  // Links `path` and every ancestor from its parent's .children. A `leaf` is about to get
  // a history (which names it; finish_link() then completes its marker); other nodes get
  // a .path file. A marker is created as <child key>.pending before the node is named and
  // renamed to <child key> after, so verify can tell an interrupted first archiving (a
  // pending marker naming nothing) from a lost history (a marker naming nothing).
  Expected<std::uint64_t> ensure_node(std::string_view path, bool leaf);
  Done finish_link(std::string_view path);
  // The marker of `path` in its parent's .children, and its name while pending.
  std::string marker_of(std::string_view path) const;
  Expected<NodeLock> lock_node(std::string_view path);
  // The markers in `path`'s .children (none when it has no such directory): the child's
  // key, and whether the marker is still pending.
  struct ChildMarker {
    std::string key;
    bool pending = false;
  };
  Result<std::vector<ChildMarker>> child_markers(std::string_view path) const;
  // The archived children of `path` (named nodes linked by a marker, finished or pending).
  // `unnamed` (optional) counts finished markers whose node has no name: damage.
  Result<std::vector<std::string>> child_paths(std::string_view path,
                                               std::uint64_t* unnamed = nullptr) const;
  // Store::children: the named children of `dir` but those named in `except`.
  Result<std::vector<std::string>> children_except(std::string_view dir,
                                                   const std::vector<std::string>& except) const;
  // `dir` and every archived path beneath it (nodes only; sorted). Empty when unknown.
  Result<std::vector<std::string>> paths_within(std::string_view dir,
                                                std::uint64_t* unnamed = nullptr) const;

  // --- Where format 1 and format 2 differ (format2.cpp) ---
  // Opens format 2's catalog, chunk store and locks (creating them in ReadWrite).
  Status open_format2();
  // Whether anything is archived beneath `path`.
  Expected<bool> has_children(std::string_view path) const;
  // Whether `v`'s content is in the archive, so a new version may name it unread.
  bool content_available(const Version& v) const;
  // Reads `fd` into the archive: format 1 one object, format 2 chunks (into `chunks`), cut
  // where `prior` (an earlier version of the file, optional) was cut while the bytes agree.
  Expected<StoredContent> store_content(int fd, std::uint64_t size, const std::string& shown,
                                        std::vector<std::string>& chunks,
                                        const Version* prior);
  // Writes (or with fd -1 only checks) the content of file version `v`.
  Result<std::uint64_t> extract(const Version& v, int fd, bool sparse);
  // Orders locks: two paths are always locked in the order of their ranks.
  std::string lock_rank(std::string_view path) const;
  // Format 2: commits `v` as the newest version of `path`, with the blobs staged for it:
  // the pack synced first, then one catalog transaction. Returns the bytes of its row.
  Expected<std::uint64_t> commit_version(const std::string& path, const Version& v);
  // Format 2: makes every staged version durable (in a group: closes the open group and
  // waits until every closed group is answered) and releases the group's locks but those
  // of the step under way.
  Done flush_group();
  // Format 2, in a group: closes the open group (Store::close_group).
  void close_group(std::function<void(const Done&)> on_durable);
  // Format 2, in a group: commits the closed groups whose pack is synced, in order (with
  // `wait`, all of them, waiting for their syncs).
  void advance(bool wait);
  // Every closed group and every staged version after `fault` are lost: their requests are
  // answered FAILED RETRY.
  void lose_after(const Fault& fault);
  // Format 2: locks `slot` of its slot file (waiting for another holder unless `try_only`).
  // Returns 0, EAGAIN when `try_only` found it held, or another errno.
  int lock_slot(off_t slot, bool try_only);
  // Format 2, in a group: takes the digest slot of blob `id`, which this writer is about to
  // store, until the group that stages it is committed (FORMAT.md, "Format 2", Locks). When
  // another writer holds it, flushes the open group, then waits until `claim_deadline` at
  // most; past it the blob is stored without the slot (a copy, never a loss). True when it
  // waited.
  Expected<bool> claim_blob(const std::string& id);
  std::chrono::steady_clock::time_point claim_deadline;  // set per content stored
  // Format 2: the staged paths within `dir`, with their ancestors below it (`direct`: only
  // those directly beneath it; else `dir` too when any). Unsorted, repeats possible.
  std::vector<std::string> staged_within(std::string_view dir, bool direct) const;
  // Format 2: the history of `path`, or with `latest_only` just its latest version.
  Expected<History> catalog_history(std::string_view path, bool latest_only) const;

  // --- Requests: every one reconciles (reconcile.cpp; DESIGN.md, "Convergence") ---
  // How a path turned out after its look and commit.
  enum class Found { Absent, Directory, Other };
  struct Committed {
    std::uint64_t bytes = 0;
    Found found = Found::Absent;
    std::optional<Fault> refused;  // present but not archivable (fifo, socket, device)
  };
  // UPDATE, STAT, DELETE: the archive's latest state of `path`, and of what it holds
  // beneath it, made equal to the disk.
  Expected<std::uint64_t> reconcile(std::string_view raw, Op hint);
  Expected<std::uint64_t> reconcile_path(const std::string& path, Op hint);
  // MOVE: as reconcile for both names, with the history following the file where the
  // disk confirms the rename.
  Expected<std::uint64_t> move(std::string_view raw_from, std::string_view raw_to);
  // SCAN (Store::scan).
  Expected<std::uint64_t> scan(std::string_view raw, const Filter* filter);
  // Looks at `path` and commits what it sees, under its lock; nothing beneath it.
  Expected<Committed> settle(const std::string& path, Op hint);
  // The commit step for a look made under the path's lock: a version of what is there, a
  // tombstone, or nothing when the latest version already says so. `follow` is the live
  // version of the name a confirmed MOVE came from.
  Expected<Committed> commit_look(const std::string& path, History& history, const SourceLook& look,
                                  Op hint, const Version* follow, const std::string& follow_from);
  // A version of what `look` found (content read and stored when new).
  Expected<Version> observe(const std::string& path, const SourceLook& look, Op hint,
                            const Version* live, const Version* follow,
                            std::uint64_t& object_bytes);
  // One MOVE step: old name `p` and new name `q` looked at under both locks; the history
  // follows when the disk confirms the rename, else both are reconciled. Reports `q`.
  Expected<Committed> move_step(const std::string& p, const std::string& q);
  // What is archived beneath `path` made to match the disk: for a directory, its archived
  // direct children the disk no longer holds are reconciled; for anything else, every
  // archived path strictly beneath it is tombstoned (after a fresh look each).
  Expected<std::uint64_t> settle_structure(const std::string& path, bool directory);
  // `each` over `items` in order, summing the bytes stored; stops at the first fault or
  // when the store is cancelled.
  template <typename Items, typename Each>
  Expected<std::uint64_t> sum_each(const Items& items, Each each) {
    std::uint64_t bytes = 0;
    for (const auto& item : items) {
      if (cancelled()) return retry("cancelled");
      auto done = each(item);
      if (!done) return done.fault();
      bytes += *done;
    }
    return bytes;
  }
  Expected<std::uint64_t> append_and_save(History& history, Version version);
};

ArchiveResult to_archive_result(const Expected<std::uint64_t>& result);

}  // namespace tw::archive
