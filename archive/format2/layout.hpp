// Format 2, the layout every new version is written in (FORMAT.md, "Format 2"): the catalog
// (catalog.hpp), packs of content-defined chunks (chunk_store.hpp), the slot locks
// (slot_locks.hpp), and group commit: the versions of a group of requests are staged, their
// packs synced on a thread of their own (sync_worker.hpp) while the next group's requests
// run, then committed to the catalog in one transaction. Internal to the archive library;
// one Format2Layout belongs to one thread at a time (its sync thread is its own).
#pragma once

#include <sys/types.h>

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
#include <vector>

#include "archive/disk.hpp"
#include "archive/format2/catalog.hpp"
#include "archive/format2/chunk_store.hpp"
#include "archive/format2/content_reader.hpp"
#include "archive/format2/slot_locks.hpp"
#include "archive/format2/sync_worker.hpp"
#include "archive/layout.hpp"

namespace tw::archive {

class Format2Layout final : public WritableLayout {
 public:
  // Opens format 2's catalog, chunk store and locks under `root` (creating them when
  // `mode` is ReadWrite), cutting files at `sizes` (those the FORMAT file names).
  static Expected<std::unique_ptr<Format2Layout>> open(const std::string& root, OpenMode mode,
                                                       const StoreHooks& hooks,
                                                       const CompressionOptions& compression,
                                                       ChunkSizes sizes);
  Format2Layout(const std::string& root, OpenMode mode, const StoreHooks& hooks);
  ~Format2Layout() override;

  // Removes temporary files left in <root>/tmp by processes that no longer run.
  void remove_stale_temps() const { disk_.remove_stale_temps(); }

  // Layout
  ArchiveFormat format() const override { return ArchiveFormat::V2; }
  // A read-only layout on the same root, while nothing is staged here (staged versions
  // name blobs only this view can find).
  std::unique_ptr<Layout> reader() const override;
  Expected<std::vector<Version>> versions(std::string_view path) override;
  Done each_history(const std::vector<std::string>& paths, const EachHistory& each) override;
  Expected<std::vector<std::string>> children(std::string_view dir) override;
  Expected<std::vector<std::string>> paths_within(std::string_view dir,
                                                  Unplaced* unplaced) override;
  Expected<std::vector<std::string>> archived_paths() override;
  Expected<std::uint64_t> extract(const Version& v, int fd, bool sparse) override;
  Expected<std::size_t> read_content(const Version& v, std::uint64_t offset,
                                     std::span<char> out) override;
  std::vector<std::string> content_ids(const Version& v) const override { return v.chunks; }
  void verify_storage(ContentUsers users, VerifyReport& report,
                      const std::function<void(std::string_view)>& progress) override;
  void begin_verify_storage() override;

  // WritableLayout
  Expected<std::optional<Version>> latest(std::string_view path) override;
  Expected<bool> has_children(std::string_view path) override;
  Expected<PathState> path_state(std::string_view path) override;
  bool content_available(const Version& v) const override;
  Expected<StoredContent> store_content(int fd, std::uint64_t size, const std::string& shown,
                                        const Version* prior) override;
  Expected<std::uint64_t> commit(const std::string& path, const Version& v) override;
  Expected<PathLock> lock(std::string_view path) override;
  std::string lock_rank(std::string_view path) const override;
  void begin_group() override { grouping_ = writable(); }
  void close_group(std::function<void(const Done&)> on_durable) override;
  void advance() override;
  int group_fd() const override { return worker_ ? worker_->done_fd() : -1; }
  bool syncing() const override { return grouping_ && worker_ && !worker_->idle(); }
  Done flush() override;
  std::size_t staged_versions() const override { return staged_.version_count(); }
  std::uint64_t staged_bytes() const override { return staged_.blob_bytes(group_opened_); }
  Expected<bool> fold_journal() override;

  // Retention and collection (layout_retention.cpp)
  Expected<KeptScopes> kept_moments() override;
  Expected<std::uint64_t> forgotten(std::string_view path) override;
  Expected<std::set<std::uint64_t>> pinned(std::string_view path) override;
  Expected<std::optional<CollectReport>> last_collection() override;
  Expected<KeptScopes> record_kept(const KeptScopes& kept) override;
  Done drop_versions(const std::vector<DroppedVersions>& dropped) override;
  Done set_pin(std::string_view path, std::uint64_t number, bool pinned) override;
  Expected<PurgeReport> purge(std::string_view path, bool dry_run) override;
  Expected<CollectReport> collect(const CollectOptions& options) override;
  // Shipping (shipping.cpp).
  Done ship(PackStore& store, ShipReport& report, std::uint64_t keep_local) override;
  Expected<ShipBacklog> ship_backlog(const std::string& store) override;
  // The packs and the catalog on disk, and the catalog's blob figures (layout.cpp).
  Expected<SpaceReport> space(const std::vector<DroppedVersions>& left_out) override;

 private:
  // Verify's read-back of the blobs begun before the walk of the histories (verify.cpp).
  struct EarlyCheck;
  struct EndEarlyCheck {
    void operator()(EarlyCheck* check) const;
  };
  std::unique_ptr<EarlyCheck, EndEarlyCheck> early_check_;
  // A blob's id and where it is, hashed: the early check's record of what it read (two
  // blobs told apart unless both 64-bit hashes meet).
  using BlobKey = std::pair<std::size_t, std::uint64_t>;
  static BlobKey blob_key(const std::string& id, const BlobRef& ref);
  std::optional<std::vector<std::optional<std::string>>> blob_problems(
      const std::vector<std::pair<std::string, BlobRef>>& blobs, EarlyCheck* early,
      const std::function<void(std::string_view)>& progress);
  // A closed group: its versions and blobs are those of `staged_` before `end`, committed
  // once its pack sync (run by `worker_`) is done, then answered once the journal is synced.
  struct ClosedGroup {
    CatalogBatch::Mark end;
    std::vector<off_t> slots;
    std::function<void(const Done&)> on_durable;  // runs on the worker
    std::optional<Fault> lost;     // it cannot be committed (this thread's, not the worker's)
    std::optional<PackSync> pack;  // the worker's
    std::vector<UniqueFd> retired_packs;  // locked until the group is committed or lost
    std::optional<Fault> sync_fault;      // written by the worker before `synced`
    std::atomic<bool> synced{false};
  };

  bool writable() const { return mode_ == OpenMode::ReadWrite; }
  bool cancelled() const { return hooks_.cancelled && hooks_.cancelled(); }
  Done open_parts(const CompressionOptions& compression, ChunkSizes sizes);
  // The staged paths within `dir`, with their ancestors below it (`direct`: only those
  // directly beneath it; else `dir` too when any). Unsorted, repeats possible.
  std::vector<std::string> staged_within(std::string_view dir, bool direct) const;
  // Commits the closed groups whose pack is synced, in order (with `wait`, all of them,
  // waiting for their syncs).
  void advance_groups(bool wait);
  // Commits one closed group whose pack is synced: what its answers are to say.
  Done commit_group(ClosedGroup& group);
  // Lets go of a committed group's slots that no other group holds.
  void release_slots(const std::vector<off_t>& slots);
  // Makes every staged version durable without a group: the pack synced, the catalog
  // committed and its journal synced.
  Done commit_staged();
  // Every closed group and every staged version after `fault` are lost: their requests are
  // answered FAILED RETRY.
  void lose_after(const Fault& fault);
  // In a group: takes `slot` for the open group (flushing first when another writer holds
  // it); true when this process held it already.
  Expected<Ok> take_group_slot(off_t slot);
  // In a group: takes the digest slot of blob `id`, which this writer is about to store,
  // until the group that stages it is committed (FORMAT.md, "Locks"). When another writer
  // holds it, flushes the open group, then waits until `claim_deadline_` at most; past it
  // the blob is stored without the slot (a copy, never a loss). True when it waited.
  Expected<bool> claim_blob(const std::string& id);
  // Copies pack `pack` to `store` when it is sealed and the store does not hold it whole.
  Done ship_pack(PackStore& store, const PackShipping& pack, ShipReport& report);
  // Gives back shipped packs, those shipped longest ago first, until at most `keep` bytes of
  // packs are allocated here (shipping.cpp).
  Done give_back(const std::string& store, std::uint64_t keep, ShipReport& report);
  // Gives back pack `file` if it is still `size` bytes and no writer or collection holds it.
  Expected<bool> give_back_pack(const std::string& file, std::uint64_t size);
  // Whether the store holds every pack record snapshot `needs` names (shipping.cpp).
  Expected<bool> store_holds(const SnapshotNeeds& needs) const;
  // Ships catalog snapshot `snapshot` (a file), then drops the older ones and the packs it
  // no longer names from the store (ship_catalog.cpp).
  // A snapshot whose fingerprint is the one last shipped, with no pack to remove, is not
  // shipped again: the store's restores the same.
  Done ship_catalog(PackStore& store, const std::string& snapshot, const Catalog& copy,
                    const SnapshotNeeds& needs, ShipReport& report);
  // How many snapshots a run takes before it gives up (a collection each time between).
  static constexpr int kSnapshotAttempts = 3;

  // --- constant after construction
  std::string root_;
  OpenMode mode_;
  StoreHooks hooks_;
  DiskWriter disk_;
  std::optional<Catalog> catalog_;
  std::optional<ChunkStore> chunk_store_;
  SlotLocks locks_;
  CompressionOptions compression_;  // as opened (a reader's extract takes its threads)
  ChunkSizes sizes_;

  // --- working state
  CatalogBatch staged_;
  std::optional<ContentReader> content_reader_;  // made by the first read_content
  // Group commit: slots held by a live PathLock (the step under way), with how many hold
  // each; slots held for the versions of the open group; and every slot held for a group,
  // open or closed, with how many groups hold it (released when none does).
  bool grouping_ = false;
  std::map<off_t, int> step_slots_;
  std::set<off_t> group_slots_;
  std::map<off_t, int> held_slots_;
  std::deque<std::shared_ptr<ClosedGroup>> closed_;  // in the order closed
  std::optional<Fault> open_lost_;   // the open group went with a group closed before it
  CatalogBatch::Mark group_opened_;  // where the open group's part of `staged_` begins
  std::chrono::steady_clock::time_point claim_deadline_;  // set per content stored

  // Runs the closed groups' syncs and answers; last, so it is gone before what they use.
  std::unique_ptr<SyncWorker> worker_;
};

}  // namespace tw::archive
