// The archive under a backup root (FORMAT.md): the facade that the archiver, the monitor
// and `timewarp` use. It opens whichever layout the archive is in (format 2, written; format
// 1, read only) and runs the generic requests, restore and verify over it. What may fail
// returns Expected (expected.hpp): a value, or a Fault whose message error() gives.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "archive/expected.hpp"
#include "archive/pack_store.hpp"
#include "archive/retention.hpp"
#include "archive/types.hpp"
#include "common/filters.hpp"
#include "common/protocol.hpp"

namespace tw::archive {

// What forget would do now (Store::plan_forget_space): its report, and the archive's figures
// with the versions it removes left out, unless they cannot be read (`unmeasured` says why:
// a catalog of an earlier release, read before a writer upgraded it, cannot give them).
struct ForgetPlan {
  ForgetReport report;
  std::optional<SpaceReport> space;
  std::string unmeasured;
};

// One archived path and its version at a moment (types.hpp; Store::list_at, tree_at).
struct EntryAt {
  std::string path;
  Version version;
};

// A tree at a moment (Store::tree_at): its entries sorted by path components, and what was
// left out of it, one line each (escaped).
struct TreeAt {
  std::vector<EntryAt> entries;
  std::vector<std::string> problems;
};

// An open archive. Several Store objects, in one process or several, may work on the
// same root at once: writes are crash-safe and each path's history is changed under an
// flock. One Store object must be used by one thread at a time.
class Store {
 public:
  using Mode = OpenMode;

  // Opens the archive at `backup_root`, of whichever format it is. ReadWrite creates it,
  // in format 2, when absent, and refuses a format-1 archive (read only, FORMAT.md
  // "Appendix: format 1"); ReadOnly refuses a directory that is not an archive.
  // `compression` applies to new content.
  static Expected<Store> open(const std::string& backup_root, Mode mode, StoreHooks hooks = {},
                              CompressionOptions compression = {});
  // Opens, to read, the archive shipped to `store` (Store::ship; FORMAT.md, "Shipping"):
  // its newest catalog snapshot, fetched into `cache_dir` once, and its packs read from the
  // store as needed, at most `cache_bytes` of them kept (PackCache) in a folder of this
  // process's own under `cache_dir`, removed when the Store closes. PERMANENT when the store
  // holds no catalog.
  static Expected<Store> open_shipped(std::unique_ptr<PackStore> store,
                                      const std::string& cache_dir, std::uint64_t cache_bytes);
  // The format of this archive.
  ArchiveFormat format() const;

  Store(Store&&) noexcept;
  Store& operator=(Store&&) noexcept;
  ~Store();

  // The requests of the line protocol. Paths are raw, absolute. None is replayed as
  // an edit: each makes the archive's latest state of its path (and of what is archived
  // beneath it) equal to the disk now; the op only hints at what changed
  // (ARCHITECTURE.md, "Convergence"). STAT takes the latest content over when size and
  // mtime are unchanged; MOVE lets the history follow the file when the disk confirms the
  // rename.
  // `order` is the request's place in the master queue, when it came with one: a regular
  // file whose content is read records its horizon, and a later request whose changes
  // were all queued before that read began takes that content over when the file's stat
  // is unchanged, without reading it again (FORMAT.md, "Reads that answer later requests").
  ArchiveResult update(std::string_view path, QueueOrder order = {});
  ArchiveResult stat(std::string_view path, QueueOrder order = {});
  ArchiveResult remove(std::string_view path, QueueOrder order = {});  // DELETE
  ArchiveResult move(std::string_view from, std::string_view to, QueueOrder order = {});
  // SCAN: the directory as UPDATE does, then each of its entries but its subdirectories as
  // STAT does (a file whose size and mtime match its latest version is not read).
  // Entries `filter` excludes, or finds too big, are left alone (nullptr: none is). A path
  // that is no longer a directory is reconciled as UPDATE does. An entry that cannot be
  // archived does not stop the others; the answer then names it.
  ArchiveResult scan(std::string_view path, QueueOrder order = {}, const Filter* filter = nullptr);

  // Group commit (format 2; on format 1 every version is durable when its request
  // returns, and these change nothing; FORMAT.md, "Format 2", Group commit). After
  // begin_group(), the requests' versions are staged in the open group, their paths
  // locked. close_group() closes it: a thread of the Store syncs its pack while the
  // requests of the next group run; advance() then commits it to the catalog (seen by all,
  // its paths unlocked), and once the catalog's journal is synced, `on_durable` runs on
  // that thread with Ok, or with the error that lost the group (its requests, and those of
  // every group after it not yet committed, are to be answered FAILED RETRY). Groups are
  // committed and their `on_durable` run in the order closed. A request answered COMPLETE
  // in a group may be reported as such only from its `on_durable`. Reads through this
  // Store see every staged version. `on_durable` and flush() give Done: Ok, or the Fault
  // that lost the group, whose message the archiver's group commit
  // (archiver/group_commit.hpp) answers a lost group's requests with (always FAILED RETRY).
  void begin_group();
  void close_group(std::function<void(const Done&)> on_durable);
  // Commits the closed groups whose pack is synced; call it when group_fd() is readable
  // and between requests.
  void advance();
  // Readable when a closed group's sync or answers are done (-1 before the first group).
  int group_fd() const;
  // Whether the thread of the groups is busy with a closed group (its sync, its journal
  // sync or its answers). A group closed meanwhile would only wait behind that work, so
  // the caller may keep it open for more requests until group_fd() says the work is done.
  bool syncing() const;
  // Closes the open group and waits until every group is committed, durable and its
  // `on_durable` run: Ok, or why the last group was lost.
  Done flush();
  // How many versions wait to be committed, and the content bytes staged in the open group.
  std::size_t staged_versions() const;
  std::uint64_t staged_bytes() const;
  // For a quiet archive (no request for a while, nothing staged): folds the catalog's
  // journal into it and empties it, if no other process is busy with the catalog. True when
  // done or nothing to do (format 1, read-only); false when to be tried again later.
  Expected<bool> fold_journal();

  // The history of `path`, oldest first; empty when it was never archived.
  Expected<std::vector<Version>> versions(std::string_view path) const;
  // Every archived path at or beneath `dir` (including ones known only as parents), sorted.
  Expected<std::vector<std::string>> paths_within(std::string_view dir) const;
  // The archived paths directly beneath `dir`, sorted, leaving out those whose last
  // component is in `except` (raw names; for instance a directory's entries on disk, so
  // only what the disk no longer holds is read and returned). Reads one directory of the
  // archive, not the subtree.
  Expected<std::vector<std::string>> children(std::string_view dir,
                                              const std::vector<std::string>& except = {}) const;
  // Copies the content of file version `v` (one of versions()) from byte `offset` into
  // `out`, as much as fits: the bytes copied, fewer only where the content ends. Every piece
  // is checked as restore checks it, and the last pieces read are kept decompressed (64 MiB
  // at most), so that a file read in small pieces in order is read once
  // (store_content.cpp).
  Expected<std::size_t> read_content(const Version& v, std::uint64_t offset,
                                     std::span<char> out) const;

  // The archive's tree at a moment (store_snapshot.cpp; FORMAT.md, "Restore"), read as
  // restore reads it: each path's latest version archived at or before `at_ns` (nullopt:
  // now, each path's latest), a tombstone (deleted, moved away) meaning the path did not
  // exist then. A moment the retention policy of the path's scope thinned is refused as
  // restore --at refuses it (naming the nearest kept moments). EntryAt and TreeAt are
  // declared above the class.
  using EntryAt = archive::EntryAt;
  using TreeAt = archive::TreeAt;
  // The version `path` had then (nullopt: none, or a tombstone).
  Expected<std::optional<Version>> version_at(std::string_view path,
                                              std::optional<std::int64_t> at_ns) const;
  // The entries directly beneath directory `dir` that existed then, sorted by name (raw
  // bytes); their histories read from one snapshot (Layout::each_history), so listing 10,000
  // entries is well under a second. A child folder whose own retention policy thinned the
  // moment is left out (tree_at names it; version_at and list_at of it refuse the moment).
  Expected<std::vector<EntryAt>> list_at(std::string_view dir,
                                         std::optional<std::int64_t> at_ns) const;
  // `dir` and everything beneath it that existed then, sorted by path components, from one
  // snapshot. Folders whose own retention policy thinned the moment are left out and named
  // in `problems`, as are histories that could not be read and what the archive cannot
  // place (damage, as restore names it).
  Expected<TreeAt> tree_at(std::string_view dir, std::optional<std::int64_t> at_ns) const;

  // Restores `path` (a file, a link, or a directory with its whole subtree). Fails when
  // nothing could be restored; entries that failed inside a directory are listed in the
  // report's problems.
  Expected<RestoreReport> restore(std::string_view path, const RestoreOptions& options) const;

  // Retention (FORMAT.md, "Retention"; store_retention.cpp). forget() applies `policy` as
  // of `now_ns` (each path that of the deepest folder holding it): the moments it keeps, and those
  // every earlier run kept, are recorded, then every version no kept moment sees is removed (never
  // a pinned one, nor the latest of a path that exists). plan_forget() says what forget() would
  // remove, changing nothing. Format 1 and a read-only store refuse the changes, saying why.
  Expected<ForgetReport> forget(const RetentionPolicies& policy, std::int64_t now_ns,
                                const ForgetOptions& options);
  Expected<ForgetReport> plan_forget(const RetentionPolicies& policy, std::int64_t now_ns,
                                     const ForgetOptions& options) const;
  // Removes every version of `path` and of every path beneath it, the latest and pinned
  // ones included (a secret archived by mistake); the next collection removes the blobs
  // they named and rewrites the packs that held them. With `dry_run`, only counts.
  Expected<PurgeReport> purge(std::string_view path, bool dry_run);
  // Pins (or unpins) version `number` of `path`: retention never removes a pinned version.
  Done pin(std::string_view path, std::uint64_t number, bool pinned);
  Expected<std::set<std::uint64_t>> pins(std::string_view path) const;
  // The moments whose state the archive holds whole, scope by scope (every one until a
  // forget thins them).
  Expected<KeptScopes> kept_moments() const;
  // Collection (FORMAT.md, "Collection"): frees the space of what no version names, beside
  // archivers that keep writing; and the last one that finished.
  Expected<CollectReport> collect(const CollectOptions& options);
  Expected<std::optional<CollectReport>> last_collection() const;

  // Shipping (ARCHITECTURE.md, "Object store"; store_retention.cpp). ship() copies every
  // sealed pack the pack store does not hold whole to it, and removes from it the packs
  // collection dropped here, recording each in the catalog once the store has it; `report`
  // says what was done, also when it fails part way (the store down: a RETRY fault; what
  // was shipped stays shipped). A pack still written to is left for a later run.
  // The records are about one store (PackStore::where: the bucket and prefix): shipping to
  // another starts again from nothing. ship_backlog() says what pack store `store` does
  // not hold yet (format 1: refused). With `keep_local` above 0, once the catalog is in the
  // store, the packs shipped longest ago are given back until at most that many bytes of
  // packs stay on the local disk (FORMAT.md, "Giving packs back"); readers then need the
  // store (StoreHooks::packs_from, a GivenBackPacks) to read them.
  Done ship(PackStore& store, ShipReport& report, std::uint64_t keep_local = 0);
  Expected<ShipBacklog> ship_backlog(const std::string& store) const;

  // Space (store_space.cpp). What the archive's files take on disk and what its versions
  // use (SpaceReport), the catalog read in one snapshot; the versions `left_out` names
  // (paths and numbers, as forget removes them) are counted as gone, so that `freed_bytes`
  // says what removing them gives back once collected, after deduplication. Like a
  // collection's mark it reads every version once, with two bits of memory per blob.
  Expected<SpaceReport> space(const std::vector<DroppedVersions>& left_out = {}) const;
  // What forget() would remove now (plan_forget()), and the archive's figures with those
  // versions left out: what that would free. Fails only when the plan does.
  Expected<ForgetPlan> plan_forget_space(const RetentionPolicies& policy, std::int64_t now_ns,
                                         const ForgetOptions& options) const;

  // Re-reads every object and history. `progress` (optional) receives a line now and then.
  VerifyReport verify(const std::function<void(std::string_view)>& progress = {}) const;

  const std::string& root() const;

  struct Impl;

 private:
  explicit Store(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tw::archive
