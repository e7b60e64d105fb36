// Format 2's packs shipped to a pack store (layout.hpp; ARCHITECTURE.md, "Object store").
// A pack is sealed once no writer holds its lock (FORMAT.md, "Collection": a writer holds it
// from the pack's creation until every blob it appended is committed); a pack's committed
// records never change. Shipping takes the same lock, without waiting, so that no
// collection deletes, rewrites or cuts back a pack while it is copied; of a pack a writer
// still appends to, the committed records are shipped, and the pack again once it grew.
// The copy is recorded as begun (durably) before the store sees it: a pack dropped
// afterwards, whatever happened to the copy, is removed from the store too (the catalog's
// trigger).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "archive/format2/layout.hpp"
#include "archive/format2/pack.hpp"
#include "archive/pack_cache.hpp"
#include "common/escape.hpp"
#include "common/time.hpp"

namespace tw::archive {
namespace {

struct PackFile {
  std::uint64_t size = 0;
  std::int64_t born_ns = 0;  // its birth where the filesystem keeps it, else its mtime
};

// The size and birth of pack file `file`; nullopt when it is gone (being collected).
Expected<std::optional<PackFile>> look_at_pack(const std::string& file) {
  struct statx st {};
  if (::statx(AT_FDCWD, file.c_str(), AT_SYMLINK_NOFOLLOW, STATX_SIZE | STATX_BTIME | STATX_MTIME,
              &st) != 0) {
    if (errno == ENOENT) return std::optional<PackFile>();
    return errno_fault(errno, Side::Archive, fmt::format("looking at {}", shown_path(file)));
  }
  const statx_timestamp at = (st.stx_mask & STATX_BTIME) != 0 ? st.stx_btime : st.stx_mtime;
  return std::optional<PackFile>(
      PackFile{st.stx_size, at.tv_sec * 1'000'000'000LL + static_cast<std::int64_t>(at.tv_nsec)});
}

bool holds_whole(const PackShipping& pack, std::uint64_t size) {
  return pack.size && *pack.size == size;
}

}  // namespace

Expected<ShipBacklog> Format2Layout::ship_backlog(const std::string& store) {
  ShipBacklog out;
  TRY_ASSIGN(const std::optional<std::string> target, catalog_->ship_target());
  const bool ours = target == store;  // else the records are another store's
  TRY_ASSIGN(const std::vector<std::string> removals, catalog_->unshipped());
  if (ours) out.removals = removals.size();
  if (ours) {
    TRY_ASSIGN(const auto shipped, catalog_->catalog_shipped(store));
    if (shipped) out.catalog_shipped_ns = shipped->at_ns;
  }
  TRY_ASSIGN(std::vector<PackShipping> packs, catalog_->packs_shipping());
  for (PackShipping& pack : packs) {
    if (!ours) pack.size.reset();
    TRY_ASSIGN(const std::optional<PackFile> file,
               look_at_pack(pack_file(root_ + "/packs", pack.name)));
    if (!file) continue;
    if (holds_whole(pack, file->size)) {
      ++out.shipped_packs;
      out.shipped_bytes += file->size;
      out.last_shipped_ns = std::max(out.last_shipped_ns.value_or(pack.at_ns), pack.at_ns);
      continue;
    }
    ++out.packs;
    out.bytes += file->size;
    out.oldest_ns = std::min(out.oldest_ns.value_or(file->born_ns), file->born_ns);
  }
  return out;
}

Done Format2Layout::ship(PackStore& store, ShipReport& report, std::uint64_t keep_local) {
  TRY(catalog_->set_ship_target(store.where()));
  // The snapshot is taken first, then the packs are shipped, so that the store holds every
  // pack record it names before it goes (FORMAT.md, "Shipping"). A collection may drop a
  // pack it names before that pack was shipped: then it is taken again.
  const std::string snapshot = fmt::format("{}/tmp/{}-catalog-snapshot.db", root_, ::getpid());
  const Defer gone([&] { ::unlink(snapshot.c_str()); });
  for (int attempt = 1;; ++attempt) {
    ::unlink(snapshot.c_str());
    TRY(catalog_->copy_to(snapshot));
    TRY_ASSIGN(const Catalog copy, Catalog::open(snapshot, OpenMode::ReadOnly));
    TRY_ASSIGN(const SnapshotNeeds needs, copy.snapshot_needs());
    TRY_ASSIGN(const std::vector<PackShipping> packs, catalog_->packs_shipping());
    for (const PackShipping& pack : packs) TRY(ship_pack(store, pack, report));
    TRY_ASSIGN(const bool held, store_holds(needs));
    if (held) {
      TRY(ship_catalog(store, snapshot, copy, needs, report));
      return keep_local > 0 ? give_back(store.where(), keep_local, report) : Done(Ok{});
    }
    if (attempt == kSnapshotAttempts) {
      return retry(fmt::format(
          "a collection dropped packs the catalog's snapshot named before they were shipped, "
          "{} times in a row: the catalog is shipped by the next run",
          kSnapshotAttempts));
    }
  }
}

Expected<bool> Format2Layout::store_holds(const SnapshotNeeds& needs) const {
  TRY_ASSIGN(const std::vector<PackShipping> packs, catalog_->packs_shipping());
  std::unordered_map<std::string_view, std::uint64_t> shipped;
  for (const PackShipping& pack : packs) {
    if (pack.size) shipped.emplace(pack.name, *pack.size);
  }
  return std::all_of(needs.packs.begin(), needs.packs.end(), [&](const auto& need) {
    const auto it = shipped.find(need.first);
    return it != shipped.end() && it->second >= need.second;
  });
}

Done Format2Layout::ship_pack(PackStore& store, const PackShipping& pack, ShipReport& report) {
  const std::string file = pack_file(root_ + "/packs", pack.name);
  UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) {
    if (errno == ENOENT) return Ok{};  // collected
    return errno_fault(errno, Side::Archive, fmt::format("opening {}", shown_path(file)));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return errno_fault(errno, Side::Archive, fmt::format("reading {}", shown_path(file)));
  }
  if (holds_whole(pack, static_cast<std::uint64_t>(st.st_size))) return Ok{};
  std::uint64_t size = 0;
  if (try_lock_pack(fd.get())) {
    // Looked at again under the lock: a collection may have cut it back or deleted it.
    if (::fstat(fd.get(), &st) != 0) {
      return errno_fault(errno, Side::Archive, fmt::format("reading {}", shown_path(file)));
    }
    size = static_cast<std::uint64_t>(st.st_size);
    if (st.st_nlink == 0 || holds_whole(pack, size)) return Ok{};
  } else {
    // A writer appends to it: its committed records (synced before their commit) never
    // change, and while the writer holds the lock no collection touches them. They are
    // shipped as they are now, and the pack again once it grew.
    ++report.packs_busy;
    TRY_ASSIGN(const std::optional<PackUsage> usage, catalog_->pack_use(pack.name));
    if (!usage || usage->blobs == 0) return Ok{};
    size = usage->end + kBlobHeaderSize;
    if (pack.size && *pack.size >= size) return Ok{};
  }
  if (!held_locally(fd.get(), 0)) {
    // Given back once shipped: the store's copy is the pack. Cut back since (a collection),
    // it is as shipped as far as it goes now; never shipped from its hole.
    if (pack.size && *pack.size >= size) return catalog_->record_shipped(pack.id, size, pack.at_ns);
    return permanent(fmt::format(
        "pack {} was given back once shipped to another store (local_packs_size): its bytes "
        "are there alone, so it cannot be shipped to {}; copy that store's packs here first",
        pack.name, store.where()));
  }
  std::vector<char> bytes(size);
  const long got = pread_full(fd.get(), bytes.data(), bytes.size(), 0);
  if (got < 0)
    return errno_fault(static_cast<int>(-got), Side::Archive,
                       fmt::format("reading {}", shown_path(file)));
  if (static_cast<std::uint64_t>(got) != size) {
    return retry(fmt::format("pack {} ended while it was read to be shipped", shown_path(file)));
  }
  TRY_ASSIGN(const bool listed, catalog_->begin_shipping(pack.id, now_ns()));
  if (!listed) return Ok{};  // its row was dropped before the lock was taken
  TRY(catalog_->sync_journal());
  disk_.step("ship-put");
  if (auto put = store.put(pack.name, bytes); !put) {
    return in_context(fmt::format("shipping pack {} to {}", pack.name, store.where()), put.fault());
  }
  disk_.step("ship-record");
  TRY(catalog_->record_shipped(pack.id, size, now_ns()));
  ++report.packs_shipped;
  report.bytes_shipped += size;
  return Ok{};
}

Done Format2Layout::give_back(const std::string& store, std::uint64_t keep, ShipReport& report) {
  TRY_ASSIGN(const auto catalog_shipped, catalog_->catalog_shipped(store));
  if (!catalog_shipped) return Ok{};
  struct Candidate {
    std::string file;
    std::uint64_t size = 0;
    std::uint64_t allocated = 0;
    std::int64_t shipped_ns = 0;
  };
  std::vector<Candidate> candidates;
  std::uint64_t held = 0;
  TRY_ASSIGN(const std::vector<PackShipping> packs, catalog_->packs_shipping());
  for (const PackShipping& pack : packs) {
    const std::string file = pack_file(root_ + "/packs", pack.name);
    struct stat st {};
    if (::stat(file.c_str(), &st) != 0) continue;  // collected
    const auto allocated = static_cast<std::uint64_t>(st.st_blocks) * 512;
    held += allocated;
    // Shipped whole before the store's catalog was: the store can be read for it.
    if (allocated > 0 && holds_whole(pack, static_cast<std::uint64_t>(st.st_size)) &&
        pack.at_ns <= catalog_shipped->at_ns) {
      candidates.push_back({file, *pack.size, allocated, pack.at_ns});
    }
  }
  std::sort(candidates.begin(), candidates.end(),
            [](const Candidate& a, const Candidate& b) { return a.shipped_ns < b.shipped_ns; });
  for (const Candidate& c : candidates) {
    if (held <= keep) break;
    TRY_ASSIGN(const bool given, give_back_pack(c.file, c.size));
    if (!given) continue;
    held -= std::min(held, c.allocated);
    ++report.packs_given_back;
    report.bytes_given_back += c.allocated;
  }
  return Ok{};
}

// The pack's file is replaced by one of the same name and size holding nothing (a hole):
// a reader that opened the pack before reads it whole from its descriptor, one that opens
// it after finds the hole and reads the store's copy (FORMAT.md, "Giving packs back").
Expected<bool> Format2Layout::give_back_pack(const std::string& file, std::uint64_t size) {
  UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) {
    if (errno == ENOENT) return false;
    return errno_fault(errno, Side::Archive, fmt::format("opening {}", shown_path(file)));
  }
  if (!try_lock_pack(fd.get())) return false;  // a writer or a collection holds it
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return errno_fault(errno, Side::Archive, fmt::format("reading {}", shown_path(file)));
  }
  if (st.st_nlink == 0 || static_cast<std::uint64_t>(st.st_size) != size) return false;
  const std::string empty = fmt::format("{}/tmp/{}-given-back.pack", root_, ::getpid());
  ::unlink(empty.c_str());
  UniqueFd out(::open(empty.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, st.st_mode & 07777));
  if (!out) return errno_fault(errno, Side::Archive, fmt::format("creating {}", shown_path(empty)));
  if (::ftruncate(out.get(), static_cast<off_t>(size)) != 0) {
    const int error = errno;
    ::unlink(empty.c_str());
    return errno_fault(error, Side::Archive, fmt::format("sizing {}", shown_path(empty)));
  }
  // A filesystem without holes writes the zeros: that would free nothing, and read as data.
  if (struct stat made{};
      ::fstat(out.get(), &made) != 0 || made.st_blocks != 0 || held_locally(out.get(), 0)) {
    ::unlink(empty.c_str());
    return false;
  }
  disk_.step("give-back-rename");
  if (::rename(empty.c_str(), file.c_str()) != 0) {
    const int error = errno;
    ::unlink(empty.c_str());
    return errno_fault(error, Side::Archive, fmt::format("replacing {}", shown_path(file)));
  }
  return true;
}

}  // namespace tw::archive
