// Where the archive's two formats differ (store_impl.hpp; FORMAT.md, "Format 2"): format 1
// keeps objects, history files and marker trees; format 2 keeps a catalog, packs of
// content-defined chunks and one locks file. Everything else (the requests' reconciling,
// restore) is the same code over both.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "archiver/objects.hpp"
#include "archiver/store_impl.hpp"
#include "common/escape.hpp"
#include "common/paths.hpp"

namespace tw::archive {
namespace {

// Format 2's locks: one byte of a slot file per slot, 2^30 slots (two paths sharing a slot
// only wait for each other).
constexpr int kSlotHexDigits = 8;  // of the path's key: 2^32 slots, masked to 2^30 below
// Then 2^20 digest slots, one byte each after the path slots, by the first 20 bits of a
// blob's id: a writer about to store a new blob holds its slot until the blob is committed.
constexpr off_t kDigestSlotBase = off_t{1} << 30;
constexpr int kDigestSlotHexDigits = 5;
// How long one content waits in all for other writers to commit blobs it holds too.
constexpr auto kClaimWait = std::chrono::milliseconds(200);

// The byte of the locks file that stands for `slot`, as an OFD lock request of `type`.
struct flock slot_range(short type, off_t slot) {
  struct flock range {};
  range.l_type = type;
  range.l_whence = SEEK_SET;
  range.l_start = slot;
  range.l_len = 1;
  return range;
}

}  // namespace

void unlock_slot(int slot_fd, off_t slot) {
  struct flock range = slot_range(F_UNLCK, slot);
  ::fcntl(slot_fd, F_OFD_SETLK, &range);
}

Status Store::Impl::open_format2() {
  const bool writable = mode == Store::Mode::ReadWrite;
  if (writable) {
    if (auto made = disk.make_dir(root + "/packs"); !made) return Error{made.fault().message};
  }
  if (writable) {
    const std::string file = root + "/locks";
    locks.reset(::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644));
    if (!locks) {
      return Error{fmt::format("cannot open {}: {}", shown_path(file), std::strerror(errno))};
    }
    // The slot files: slot s is byte s of slots/<s mod 64, two hex digits>. One file would
    // do, but the kernel looks through every lock held on a file at each lock and unlock,
    // and two archivers in a group commit hold a few hundred (FORMAT.md, "Locks").
    const std::string dir = root + "/slots";
    if (auto made = disk.make_dir(dir); !made) return Error{made.fault().message};
    const UniqueFd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
    if (!dir_fd) {
      return Error{fmt::format("cannot open {}: {}", shown_path(dir), std::strerror(errno))};
    }
    for (std::size_t i = 0; i < kSlotFiles; ++i) {
      const std::string name = fmt::format("{:02x}", i);
      slot_files[i].reset(
          ::openat(dir_fd.get(), name.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644));
      if (!slot_files[i]) {
        return Error{
            fmt::format("cannot open {}/{}: {}", shown_path(dir), name, std::strerror(errno))};
      }
    }
    // Writers set the catalog up one at a time (two archivers starting on a new archive
    // would otherwise race to switch it to WAL).
    while (::flock(locks.get(), LOCK_EX) != 0) {
      if (errno != EINTR) {
        return Error{fmt::format("cannot lock {}: {}", shown_path(file), std::strerror(errno))};
      }
    }
  }
  auto opened = Catalog::open(root + "/catalog.db", mode);
  if (writable) ::flock(locks.get(), LOCK_UN);
  if (!opened) return Error{opened.error()};
  catalog.emplace(std::move(*opened));
  chunk_store.emplace(disk, root + "/packs", *catalog, compression.level, chunk_sizes,
                      hooks.cancelled, resolved_threads(compression.threads));
  if (writable) chunk_store->set_claim([this](const std::string& id) { return claim_blob(id); });
  return Ok{};
}

Expected<bool> Store::Impl::has_children(std::string_view path) const {
  if (format == 1) return path_exists(node_of(path) + ".children");
  for (const auto staged_path : staged.paths()) {
    if (staged_path != path && path_within(staged_path, path)) return true;
  }
  auto any = catalog->has_children(path);
  if (!any) return retry("archive: " + any.error());
  return *any;
}

std::vector<std::string> Store::Impl::staged_within(std::string_view dir, bool direct) const {
  std::vector<std::string> out;
  for (const auto staged_path : staged.paths()) {
    if (!path_within(staged_path, dir)) continue;
    // The staged path and its ancestors up to `dir`: a commit adds them all to the tree.
    for (std::string p(staged_path); p != dir; p = parent_path(p)) {
      if (!direct || parent_path(p) == dir) out.push_back(p);
    }
    if (!direct) out.emplace_back(dir);
  }
  return out;
}

bool Store::Impl::content_available(const Version& v) const {
  if (format == 1) return objects.contains(v.sha256);
  // A version names its blobs; the commit that recorded it recorded them too.
  return v.is_file() && (v.size == 0 || !v.chunks.empty());
}

Expected<StoredContent> Store::Impl::store_content(int fd, std::uint64_t size,
                                                   const std::string& shown,
                                                   std::vector<std::string>& chunks,
                                                   const Version* prior) {
  if (format == 1) return objects.store(fd, size, shown);
  std::optional<PriorContent> cut_as;
  if (prior != nullptr && content_available(*prior)) {  // a file whose blobs are named
    cut_as.emplace(prior->chunks, prior->size);
  }
  claim_deadline = std::chrono::steady_clock::now() + kClaimWait;
  auto stored = chunk_store->store(fd, size, shown, staged, cut_as ? &*cut_as : nullptr);
  if (!stored) return stored.fault();
  chunks = std::move(stored->chunks);
  return StoredContent{std::move(stored->sha256), stored->size, stored->bytes_added};
}

Result<std::uint64_t> Store::Impl::extract(const Version& v, int fd, bool sparse) {
  if (format == 1) return objects.extract(v.sha256, fd, sparse);
  return chunk_store->extract(v.chunks, v.sha256, fd, sparse, &staged);
}

std::string Store::Impl::lock_rank(std::string_view path) const {
  const std::string key = key_of(path);
  if (format == 1) return key;
  const std::uint64_t slot = std::stoull(key.substr(0, kSlotHexDigits), nullptr, 16) >> 2;
  return fmt::format("{:08x}", slot);
}

Expected<std::uint64_t> Store::Impl::commit_version(const std::string& path, const Version& v) {
  staged.add_version(path, v);
  if (!grouping) {
    if (auto flushed = flush_group(); !flushed) return flushed.fault();
  }
  // The row's bytes, roughly: fixed fields, the strings, and 32 bytes per blob named.
  return std::uint64_t{96} + path.size() + v.link_target.size() + v.moved_from.size() +
         v.moved_to.size() + 32 * v.chunks.size();
}

Done Store::Impl::flush_group() {
  if (format != 2) return Ok{};
  if (grouping) {
    // An open group that staged nothing and holds no lock needs no group of its own.
    const bool open_empty = staged.end() == group_opened && group_slots.empty() && !open_lost;
    std::optional<Done> flushed;
    if (!open_empty) close_group([&flushed](const Done& done) { flushed = done; });
    advance(true);
    if (worker) worker->wait_idle();
    return flushed.value_or(Ok{});
  }
  // One version at a time: durable before its request returns.
  CatalogBatch batch = std::exchange(staged, CatalogBatch());
  if (batch.empty()) return Ok{};
  Done done = chunk_store->sync();
  if (done) {
    disk.step("catalog-commit");
    done = catalog->commit(batch);
  }
  if (done) {
    disk.step("journal-sync");
    done = catalog->sync_journal();
  }
  return done;
}

void Store::Impl::close_group(std::function<void(const Done&)> on_durable) {
  auto group = std::make_shared<ClosedGroup>();
  group->end = staged.end();
  group_opened = group->end;
  group->slots.assign(group_slots.begin(), group_slots.end());
  group->on_durable = std::move(on_durable);
  group->lost = std::exchange(open_lost, std::nullopt);
  // A group lost with an earlier one: every group closed before it is lost too, so what is
  // staged is its own. It goes now, before the next group's requests could read it (name
  // its blobs, number after its versions).
  if (group->lost) (void)staged.split_front(group->end);
  // The step under way (a flush inside a request) keeps its slots in the next group.
  group_slots.clear();
  for (const auto& [slot, holders] : step_slots) {
    group_slots.insert(slot);
    ++held_slots[slot];
  }
  if (!group->lost) {
    auto taken = chunk_store->take_sync();
    if (!taken) {
      group->sync_fault = taken.fault();
    } else {
      group->pack = std::move(*taken);
    }
  }
  if (!worker) worker = std::make_unique<SyncWorker>();
  closed.push_back(group);
  if (!group->pack) {
    group->synced.store(true);
    return;
  }
  worker->post([this, group] {
    if (auto synced = group->pack->run(disk); !synced) group->sync_fault = synced.fault();
    group->synced.store(true);
  });
}

void Store::Impl::advance(bool wait) {
  while (!closed.empty()) {
    const std::shared_ptr<ClosedGroup> group = closed.front();
    if (!group->synced.load()) {
      if (!wait) return;
      worker->wait_until([&group] { return group->synced.load(); });
    }
    closed.pop_front();
    Done done = Ok{};
    if (group->lost) {
      done = *group->lost;  // what it staged went when it was lost, or when it closed
    } else if (group->sync_fault) {
      done = *group->sync_fault;
      chunk_store->seal();  // what of the pack reached the disk is unknown
      lose_after(done.fault());
    } else {
      CatalogBatch batch = staged.split_front(group->end);
      if (!batch.empty()) {
        disk.step("catalog-commit");
        done = disk.fails("catalog-commit") ? retry("archive: the catalog commit failed")
                                            : catalog->commit(batch);
      }
      if (!done) lose_after(done.fault());
    }
    // Seen by every process now: another may look at these paths (FORMAT.md, "Format 2").
    for (const off_t slot : group->slots) {
      const auto held = held_slots.find(slot);
      if (held == held_slots.end() || --held->second > 0) continue;
      held_slots.erase(held);
      unlock_slot(slot_fd(slot), slot);
    }
    worker->post([this, group, done] {
      Done durable = done;
      if (durable) {
        disk.step("journal-sync");
        durable = catalog->sync_journal();
      }
      if (group->on_durable) group->on_durable(durable);
    });
  }
}

void Store::Impl::lose_after(const Fault& fault) {
  for (const auto& group : closed) {
    if (!group->lost) group->lost = fault;
  }
  (void)staged.split_front(staged.end());  // marks of closed groups keep their meaning
  open_lost = fault;
}

int Store::Impl::lock_slot(off_t slot, bool try_only) {
  struct flock range = slot_range(F_WRLCK, slot);
  while (::fcntl(slot_fd(slot), try_only ? F_OFD_SETLK : F_OFD_SETLKW, &range) != 0) {
    if (errno == EAGAIN || errno == EACCES) return EAGAIN;
    if (errno != EINTR) return errno;
    if (cancelled()) return EINTR;
  }
  return 0;
}

Expected<bool> Store::Impl::claim_blob(const std::string& id) {
  if (!grouping || !locks || id.size() < kDigestSlotHexDigits) return false;
  const off_t slot = kDigestSlotBase + static_cast<off_t>(std::stoull(
                                           id.substr(0, kDigestSlotHexDigits), nullptr, 16));
  if (group_slots.count(slot) != 0) return false;  // the open group holds it already
  bool waited = false;
  if (held_slots.count(slot) == 0) {  // else a closed group holds it
    int err = lock_slot(slot, true);
    if (err == EAGAIN) {
      // Another writer is storing a blob of this slot. Let go of what this one holds first
      // (it may be waiting for one of them), then poll until it commits and lets go.
      waited = true;
      if (auto flushed = flush_group(); !flushed) return flushed.fault();
      while ((err = lock_slot(slot, true)) == EAGAIN &&
             std::chrono::steady_clock::now() < claim_deadline) {
        if (cancelled()) return retry("cancelled");
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    // Held still, or the locks file failed: store it anyway; a copy costs only space.
    if (err != 0) return waited;
  }
  group_slots.insert(slot);
  ++held_slots[slot];
  return waited;
}

Expected<History> Store::Impl::catalog_history(std::string_view path, bool latest_only) const {
  History history{std::string(path), {}};
  if (latest_only) {
    if (const Version* pending = staged.latest(path)) {
      history.versions.push_back(*pending);
      return history;
    }
    auto latest = catalog->latest(path);
    if (!latest) return retry("archive: " + latest.error());
    if (*latest) history.versions.push_back(std::move(**latest));
    return history;
  }
  auto versions = catalog->versions(path);
  if (!versions) return retry("archive: " + versions.error());
  history.versions = std::move(*versions);
  for (auto& v : staged.versions_of(path)) history.versions.push_back(std::move(v));
  return history;
}

}  // namespace tw::archive
