// Format 2's layout (archive/format2/layout.hpp): reading, storing, locking and group commit.
// Its part of verify is in format2/verify.cpp.
#include "archive/format2/layout.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <thread>
#include <unordered_set>
#include <utility>

#include <fmt/format.h>

#include "archive/format2/catalog_schema.hpp"
#include "archive/paths.hpp"
#include "common/dirs.hpp"
#include "common/escape.hpp"
#include "common/paths.hpp"

namespace tw::archive {
namespace {

// How long one content waits in all for other writers to commit blobs it holds too.
constexpr auto kClaimWait = std::chrono::milliseconds(200);
constexpr std::size_t kMaxGroupSlots = 4096;
// How long folding the journal waits for another process's transaction: a busy catalog is
// a reason to try later, not to block.
constexpr auto kFoldWait = std::chrono::milliseconds(100);

Fault lock_fault(int err) {
  return err == EINTR ? retry("cancelled")
                      : errno_fault(err, Side::Archive, "locking a path in locks");
}

// What a restore of `dir` cannot place: the rows beneath it whose name cannot be a file's
// (`bad`), and the lost rows anywhere that hold archived paths, which may have lain beneath
// it (where they lay went with the row that is gone).
Done name_unplaced(const Catalog& catalog, std::string_view dir, std::vector<LostPart>& bad,
                   Unplaced& unplaced) {
  for (const auto& part : bad) unplaced.named.push_back(describe(part));
  TRY_ASSIGN(const auto lost, catalog.lost_rows());
  for (const auto& part : lost) {
    if (part.archived == 0) continue;
    unplaced.named.push_back(fmt::format(
        "{}; where it lay in the tree is lost: it may belong beneath {}, and is not restored",
        describe(part), shown_path(dir)));
  }
  return Ok{};
}

// Refuses an archive whose catalog file is gone while its packs/ holds data: its list of
// versions was removed or lost, and a writer making a new one would leave every pack
// unreferenced, for a collection to remove. A kill between writing a new archive's FORMAT
// and making its catalog leaves packs/ empty (or not made): a writer goes on making it.
Done catalog_not_lost(const std::string& root, const std::string& catalog_file) {
  const auto packs = directory_names(root + "/packs");
  if (!packs || packs->empty()) return Ok{};
  return archive_fault(Error{fmt::format(
      "catalog {} is missing while {}/packs holds data: the archive's list of versions was "
      "removed or lost; nothing is written to this archive until it is put back",
      shown_path(catalog_file), shown_path(root))});
}

}  // namespace

Format2Layout::Format2Layout(const std::string& root, OpenMode mode, const StoreHooks& hooks)
    : root_(root),
      mode_(mode),
      hooks_(hooks),
      disk_(root, hooks.before_write_step, hooks.fail_write_step) {}

Format2Layout::~Format2Layout() = default;

Expected<std::unique_ptr<Format2Layout>> Format2Layout::open(const std::string& root, OpenMode mode,
                                                             const StoreHooks& hooks,
                                                             const CompressionOptions& compression,
                                                             ChunkSizes sizes) {
  auto layout = std::make_unique<Format2Layout>(root, mode, hooks);
  TRY(layout->open_parts(compression, sizes));
  return layout;
}

std::unique_ptr<Layout> Format2Layout::reader() const {
  if (staged_.version_count() > 0) return nullptr;
  auto opened = open(root_, OpenMode::ReadOnly, hooks_, compression_, sizes_);
  if (!opened) return nullptr;  // the caller works alone, on this view
  return std::move(*opened);
}

Done Format2Layout::open_parts(const CompressionOptions& compression, ChunkSizes sizes) {
  compression_ = compression;
  sizes_ = sizes;
  const std::string catalog_file = root_ + "/catalog.db";
  if (writable()) {
    for (const char* dir : {"/tmp", "/packs"}) TRY(disk_.make_dir(root_ + dir));
    TRY_ASSIGN(locks_, SlotLocks::open(disk_, root_));
    // Writers set the catalog up one at a time, and make it only then: a reader that meets
    // a catalog not set up waits for the writer setting it up (wait_for_setup).
    TRY(locks_.lock_setup());
    if (!path_exists(catalog_file)) {
      if (Done kept = catalog_not_lost(root_, catalog_file); !kept) {
        locks_.unlock_setup();
        return kept;
      }
      // Made private before SQLite creates it (its journal and index files take its mode).
      UniqueFd made(
          ::open(catalog_file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, kFileMode));
    }
  } else {
    // The archivers start beside the monitor's first looks at a new archive, and an
    // operator's: a catalog being set up this moment is read once it is.
    SlotLocks::wait_for_setup(root_);
    if (!path_exists(catalog_file)) {
      TRY(catalog_not_lost(root_, catalog_file));
      return not_set_up(catalog_file);
    }
  }
  auto opened = Catalog::open(catalog_file, mode_);
  if (writable()) locks_.unlock_setup();
  TRY(opened);
  catalog_.emplace(std::move(*opened));
  chunk_store_.emplace(disk_, root_ + "/packs", *catalog_, compression.level, sizes,
                       hooks_.cancelled, resolved_threads(compression.threads));
  chunk_store_->set_fetcher(hooks_.packs_from.get());
  if (writable()) {
    chunk_store_->set_claim([this](const std::string& id) { return claim_blob(id); });
  }
  return Ok{};
}

// --- Reading ----------------------------------------------------------------------------

// What the catalog and the chunk store read comes through TRY_ASSIGN: their failures are
// the archive's (archive_fault, a RETRY).

Expected<std::vector<Version>> Format2Layout::versions(std::string_view path) {
  TRY_ASSIGN(std::vector<Version> versions, catalog_->versions(path));
  for (auto& v : staged_.versions_of(path)) versions.push_back(std::move(v));
  return versions;
}

Done Format2Layout::each_history(const std::vector<std::string>& paths, const EachHistory& each) {
  return catalog_->each_history(paths, [&](std::size_t i, Expected<std::vector<Version>> versions) {
    if (versions) {
      for (auto& v : staged_.versions_of(paths[i])) versions->push_back(std::move(v));
    }
    return each(i, std::move(versions));
  });
}

Expected<std::vector<std::string>> Format2Layout::children(std::string_view dir) {
  TRY_ASSIGN(std::vector<std::string> children, catalog_->children(dir));
  for (auto& p : staged_within(dir, true)) children.push_back(std::move(p));
  return sorted_once(std::move(children));
}

Expected<std::vector<std::string>> Format2Layout::paths_within(std::string_view dir,
                                                               Unplaced* unplaced) {
  std::vector<LostPart> bad;
  TRY_ASSIGN(std::vector<std::string> paths,
             catalog_->paths_within(dir, unplaced != nullptr ? &bad : nullptr));
  if (unplaced != nullptr) TRY(name_unplaced(*catalog_, dir, bad, *unplaced));
  for (auto& p : staged_within(dir, false)) paths.push_back(std::move(p));
  return sorted_once(std::move(paths));
}

Expected<std::vector<std::string>> Format2Layout::archived_paths() {
  TRY_ASSIGN(std::vector<std::string> paths, catalog_->archived_paths());
  return paths;
}

Expected<std::uint64_t> Format2Layout::extract(const Version& v, int fd, bool sparse) {
  TRY_ASSIGN(const std::uint64_t written,
             chunk_store_->extract(v.chunks, v.sha256, fd, sparse, &staged_));
  return written;
}

Expected<std::size_t> Format2Layout::read_content(const Version& v, std::uint64_t offset,
                                                  std::span<char> out) {
  if (!content_reader_) content_reader_.emplace(*chunk_store_, *catalog_, kReadCacheBytes);
  return content_reader_->read(v, offset, out, &staged_);
}

std::vector<std::string> Format2Layout::staged_within(std::string_view dir, bool direct) const {
  std::vector<std::string> out;
  for (const auto staged_path : staged_.paths()) {
    if (!path_within(staged_path, dir)) continue;
    // The staged path and its ancestors up to `dir`: a commit adds them all to the tree.
    for (std::string p(staged_path); p != dir; p = parent_path(p)) {
      if (!direct || parent_path(p) == dir) out.push_back(p);
    }
    if (!direct) out.emplace_back(dir);
  }
  return out;
}

// --- The requests' steps ----------------------------------------------------------------

Expected<std::optional<Version>> Format2Layout::latest(std::string_view path) {
  if (const Version* pending = staged_.latest(path)) return std::optional<Version>(*pending);
  TRY_ASSIGN(std::optional<Version> latest, catalog_->latest(path));
  return latest;
}

Expected<bool> Format2Layout::has_children(std::string_view path) {
  if (staged_.has_within(path)) return true;
  TRY_ASSIGN(const bool any, catalog_->has_children(path));
  return any;
}

Expected<PathState> Format2Layout::path_state(std::string_view path) {
  const Version* pending = staged_.latest(path);
  const bool staged_beneath = staged_.has_within(path);
  PathState state;
  if (pending == nullptr || !staged_beneath) {
    TRY_ASSIGN(state, catalog_->path_state(path));
  }
  if (pending != nullptr) state.latest = *pending;
  state.children = state.children || staged_beneath;
  return state;
}

bool Format2Layout::content_available(const Version& v) const {
  // A version names its blobs; the commit that recorded it recorded them too.
  return v.is_file() && (v.size == 0 || !v.chunks.empty());
}

Expected<StoredContent> Format2Layout::store_content(int fd, std::uint64_t size,
                                                     const std::string& shown,
                                                     const Version* prior) {
  std::optional<PriorContent> cut_as;
  if (prior != nullptr && content_available(*prior))
    cut_as.emplace(PriorContent{prior->chunks, prior->size});
  claim_deadline_ = std::chrono::steady_clock::now() + kClaimWait;
  TRY_ASSIGN(auto stored,
             chunk_store_->store(fd, size, shown, staged_, cut_as ? &*cut_as : nullptr));
  return StoredContent{std::move(stored.sha256), stored.size, stored.bytes_added,
                       std::move(stored.chunks)};
}

Expected<std::uint64_t> Format2Layout::commit(const std::string& path, const Version& v) {
  staged_.add_version(path, v);
  if (!grouping_) TRY(flush());
  // The row's bytes, roughly: fixed fields, the strings, and 32 bytes per blob named.
  return std::uint64_t{96} + path.size() + v.link_target.size() + v.moved_from.size() +
         v.moved_to.size() + 32 * v.chunks.size();
}

std::string Format2Layout::lock_rank(std::string_view path) const {
  return fmt::format("{:08x}", SlotLocks::path_slot(path));
}

Expected<PathLock> Format2Layout::lock(std::string_view path) {
  const off_t slot = SlotLocks::path_slot(path);
  if (!grouping_) {
    if (const int err = locks_.lock(slot, false, hooks_.cancelled); err != 0) {
      return lock_fault(err);
    }
    return PathLock([this, slot] { locks_.unlock(slot); });
  }
  if (group_slots_.count(slot) == 0) TRY(take_group_slot(slot));
  ++step_slots_[slot];
  // In a group the slot stays locked until the group is committed; only the step lets go.
  return PathLock([this, slot] {
    const auto held = step_slots_.find(slot);
    if (held != step_slots_.end() && --held->second == 0) step_slots_.erase(held);
  });
}

Expected<Ok> Format2Layout::take_group_slot(off_t slot) {
  // A group holding kMaxGroupSlots locks (a SCAN of a large folder: a path's and its blobs'
  // for each file) is made durable first, and lets them go: for each lock taken, the kernel
  // looks through every lock this process holds on the locks file (posix_lock_inode), so
  // a group of n slots cost n * n / 2 steps there (13% of a SCAN of 18,000 files).
  if (group_slots_.size() >= kMaxGroupSlots) TRY(flush());
  // A slot a closed group holds is this process's already.
  if (held_slots_.count(slot) == 0) {
    int err = locks_.lock(slot, true, hooks_.cancelled);
    if (err == EAGAIN) {
      // Never wait while holding the locks of staged versions: make them durable and let
      // their locks go first (FORMAT.md, "Locks").
      TRY(flush());
      err = locks_.lock(slot, false, hooks_.cancelled);
    }
    if (err != 0) return lock_fault(err);
  }
  group_slots_.insert(slot);
  ++held_slots_[slot];
  return Ok{};
}

Expected<bool> Format2Layout::claim_blob(const std::string& id) {
  const auto slot = SlotLocks::digest_slot(id);
  if (!grouping_ || !locks_.is_open() || !slot) return false;
  if (group_slots_.count(*slot) != 0) return false;  // the open group holds it already
  bool waited = false;
  if (held_slots_.count(*slot) == 0) {  // else a closed group holds it
    int err = locks_.lock(*slot, true, hooks_.cancelled);
    if (err == EAGAIN) {
      // Another writer is storing a blob of this slot. Let go of what this one holds first
      // (it may be waiting for one of them), then poll until it commits and lets go.
      waited = true;
      TRY(flush());
      while ((err = locks_.lock(*slot, true, hooks_.cancelled)) == EAGAIN &&
             std::chrono::steady_clock::now() < claim_deadline_) {
        if (cancelled()) return retry("cancelled");
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    // Held still, or the locks file failed: store it anyway; a copy costs only space.
    if (err != 0) return waited;
  }
  group_slots_.insert(*slot);
  ++held_slots_[*slot];
  return waited;
}

// --- Group commit -----------------------------------------------------------------------

Done Format2Layout::flush() {
  if (!grouping_) return commit_staged();
  // An open group that staged nothing and holds no lock needs no group of its own.
  const bool open_empty = staged_.end() == group_opened_ && group_slots_.empty() && !open_lost_;
  std::optional<Done> flushed;
  if (!open_empty) close_group([&flushed](const Done& done) { flushed = done; });
  advance_groups(true);
  if (worker_) worker_->wait_idle();
  return flushed.value_or(Ok{});
}

Done Format2Layout::commit_staged() {
  CatalogBatch batch = std::exchange(staged_, CatalogBatch());
  // Packs the writer left while staging: locked until their blobs are committed (or lost).
  const std::vector<UniqueFd> retired = chunk_store_->take_retired_packs();
  if (batch.empty()) return Ok{};
  TRY(chunk_store_->sync());
  disk_.step("catalog-commit");
  TRY(catalog_->commit(batch));
  disk_.step("journal-sync");
  return catalog_->sync_journal();
}

void Format2Layout::close_group(std::function<void(const Done&)> on_durable) {
  if (!grouping_) {
    on_durable(Ok{});
    return;
  }
  auto group = std::make_shared<ClosedGroup>();
  group->end = staged_.end();
  group_opened_ = group->end;
  group->slots.assign(group_slots_.begin(), group_slots_.end());
  group->on_durable = std::move(on_durable);
  group->lost = std::exchange(open_lost_, std::nullopt);
  group->retired_packs = chunk_store_->take_retired_packs();
  // A group lost with an earlier one: every group closed before it is lost too, so what is
  // staged is its own. It goes now, before the next group's requests could read it (name
  // its blobs, number after its versions).
  if (group->lost) (void)staged_.split_front(group->end);
  // The step under way (a flush inside a request) keeps its slots in the next group.
  group_slots_.clear();
  for (const auto& [slot, holders] : step_slots_) {
    group_slots_.insert(slot);
    ++held_slots_[slot];
  }
  if (!group->lost) {
    auto taken = chunk_store_->take_sync();
    if (!taken) {
      group->sync_fault = taken.fault();
    } else {
      group->pack = std::move(*taken);
    }
  }
  if (!worker_) worker_ = std::make_unique<SyncWorker>();
  closed_.push_back(group);
  if (!group->pack) {
    group->synced.store(true);
  } else {
    worker_->post([this, group] {
      if (auto synced = group->pack->run(disk_); !synced) group->sync_fault = synced.fault();
      group->synced.store(true);
    });
  }
  advance_groups(false);
}

void Format2Layout::advance() {
  if (!grouping_) return;
  if (worker_) worker_->clear_done();
  advance_groups(false);
}

void Format2Layout::advance_groups(bool wait) {
  while (!closed_.empty()) {
    const std::shared_ptr<ClosedGroup> group = closed_.front();
    if (!group->synced.load()) {
      if (!wait) return;
      worker_->wait_until([&group] { return group->synced.load(); });
    }
    closed_.pop_front();
    const Done done = commit_group(*group);
    // Seen by every process now: another may look at these paths (FORMAT.md, "Format 2").
    release_slots(group->slots);
    worker_->post([this, group, done] {
      Done durable = done;
      if (durable) {
        disk_.step("journal-sync");
        durable = catalog_->sync_journal();
      }
      if (group->on_durable) group->on_durable(durable);
    });
  }
}

Done Format2Layout::commit_group(ClosedGroup& group) {
  if (group.lost) return *group.lost;  // what it staged went when it was lost, or closed
  if (group.sync_fault) {
    chunk_store_->seal();  // what of the pack reached the disk is unknown
    lose_after(*group.sync_fault);
    return *group.sync_fault;
  }
  CatalogBatch batch = staged_.split_front(group.end);
  if (batch.empty()) return Ok{};
  disk_.step("catalog-commit");
  Done done = disk_.fails("catalog-commit") ? Done(retry("archive: the catalog commit failed"))
                                            : catalog_->commit(batch);
  if (!done) lose_after(done.fault());
  return done;
}

void Format2Layout::release_slots(const std::vector<off_t>& slots) {
  for (const off_t slot : slots) {
    const auto held = held_slots_.find(slot);
    if (held == held_slots_.end() || --held->second > 0) continue;
    held_slots_.erase(held);
    locks_.unlock(slot);
  }
}

void Format2Layout::lose_after(const Fault& fault) {
  for (const auto& group : closed_) {
    if (!group->lost) group->lost = fault;
  }
  (void)staged_.split_front(staged_.end());  // marks of closed groups keep their meaning
  open_lost_ = fault;
}

Expected<bool> Format2Layout::fold_journal() {
  if (!writable()) return true;
  if (!closed_.empty()) return false;  // groups under way: a quiet archive later
  TRY_ASSIGN(const bool folded, catalog_->fold_journal(kFoldWait));
  return folded;
}

}  // namespace tw::archive
