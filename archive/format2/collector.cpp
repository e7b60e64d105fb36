// Garbage collection of format 2 (collector.hpp).
#include "archive/format2/collector.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "archive/format2/pack.hpp"
#include "common/dirs.hpp"
#include "common/escape.hpp"
#include "common/paths.hpp"
#include "common/time.hpp"

namespace tw::archive {
namespace {

constexpr std::string_view kPackSuffix = ".pack";

// One collection at a time per archive: an flock on the marker `collecting`, held for the
// whole run and let go by the kernel if the collector dies.
Expected<UniqueFd> take_collection_lock(DiskWriter& disk, const std::string& root) {
  const std::string marker = root + "/collecting";
  TRY(disk.make_marker(marker));
  UniqueFd fd(::open(marker.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return errno_fault(errno, Side::Archive, fmt::format("opening {}", shown_path(marker)));
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      return retry(fmt::format("another collection of {} is running", shown_path(root)));
    }
    return errno_fault(errno, Side::Archive, fmt::format("locking {}", shown_path(marker)));
  }
  return fd;
}

// The size of the record headers of the pack open at `fd`, from its first line.
Expected<std::uint64_t> header_size(int fd, const std::string& file) {
  char magic[kPackMagic.size()];
  const long got = ::pread(fd, magic, sizeof magic, 0);
  const std::string_view first(magic, got > 0 ? static_cast<std::size_t>(got) : 0);
  if (first == kPackMagic) return std::uint64_t{kBlobHeaderSize};
  if (first == kPackMagicV2) return std::uint64_t{kBlobHeaderSizeV2};
  return retry(fmt::format("{} is not a pack (its first line is not a pack's)", shown_path(file)));
}

// The store's copy of a pack given back once shipped, fetched whole through `fetcher` (a
// GivenBackPacks) and open, kept while the pin is held.
struct GivenBack {
  PackPin pin;
  UniqueFd fd;
};

Expected<GivenBack> fetch_given_back(PackFetcher* fetcher, const std::string& name) {
  const std::string* dir = fetcher != nullptr ? fetcher->given_back_dir() : nullptr;
  if (dir == nullptr) return retry(given_back_alone(name));
  GivenBack out;
  auto whole = fetcher->fetch_whole(name);
  if (!whole) return in_context(fmt::format("pack {}", name), whole.fault());
  out.pin = std::move(*whole);
  const std::string file = pack_file(*dir, name);
  out.fd.reset(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!out.fd)
    return errno_fault(errno, Side::Archive, fmt::format("opening {}", shown_path(file)));
  return out;
}

// The packs' files under `packs_dir`, by pack name.
std::map<std::string, std::string> pack_files(const std::string& packs_dir) {
  std::map<std::string, std::string> out;
  auto buckets = directory_names(packs_dir);
  if (!buckets) return out;
  for (const auto& bucket : *buckets) {
    const std::string dir = join_path(packs_dir, bucket);
    auto names = directory_names(dir);
    if (!names) continue;
    for (const auto& name : *names) {
      if (name.size() <= kPackSuffix.size() || !name.ends_with(kPackSuffix)) continue;
      out.emplace(name.substr(0, name.size() - kPackSuffix.size()), join_path(dir, name));
    }
  }
  return out;
}

}  // namespace

struct Collector::Pass {
  const CollectOptions& options;
  CollectReport report;
  std::optional<PackWriter> writer;  // the new packs rewritten blobs go to
  std::set<std::int64_t> shred;      // packs a purge marked: rewritten whatever their share
};

Collector::Collector(DiskWriter& disk, Catalog& catalog, std::string root, PackFetcher* given_back)
    : disk_(disk),
      catalog_(catalog),
      root_(std::move(root)),
      packs_dir_(root_ + "/packs"),
      given_back_(given_back) {}

Expected<CollectReport> Collector::run(const CollectOptions& options) {
  TRY_ASSIGN(const UniqueFd lock, take_collection_lock(disk_, root_));
  Pass pass{options, {}, {}, {}};
  pass.report.started_ns = now_ns();
  disk_.step("collect-begin");
  TRY_ASSIGN(pass.report.collection, catalog_.begin_collection(pass.report.started_ns));
  TRY(sweep_blobs(pass));
  TRY(free_packs(pass));
  disk_.step("collect-vacuum");
  TRY_ASSIGN(pass.report.catalog_bytes_reclaimed, catalog_.vacuum());
  pass.report.finished_ns = now_ns();
  disk_.step("collect-finish");
  TRY(catalog_.finish_collection(pass.report));
  return pass.report;
}

Done Collector::sweep_blobs(Pass& pass) {
  TRY_ASSIGN(const BlobMarks marks, catalog_.mark(pass.options.cancelled));
  disk_.step("collect-sweep");
  TRY_ASSIGN(const SweptBlobs swept, catalog_.apply_marks(marks, pass.report.collection));
  pass.report.blobs = marks.blobs;
  pass.report.blobs_condemned = swept.condemned;
  pass.report.blobs_swept = swept.removed;
  pass.report.bytes_swept = swept.removed_bytes;
  if (pass.options.progress) {
    pass.options.progress(fmt::format(
        "collection {}: {} blobs, {} condemned, {} removed ({} bytes)", pass.report.collection,
        marks.blobs, swept.condemned, swept.removed, swept.removed_bytes));
  }
  return Ok{};
}

Done Collector::free_packs(Pass& pass) {
  TRY_ASSIGN(pass.shred, catalog_.shredded_packs());
  for (const auto& [name, file] : pack_files(packs_dir_)) {
    if (pass.options.cancelled && pass.options.cancelled()) {
      return retry("collection stopped before the end (what it freed so far stays freed)");
    }
    TRY(free_pack(pass, name, file));
  }
  // Rows of packs whose file is gone (a collection killed between the two): dropped when no
  // blob lives there (re-checked as it is dropped); else the blobs are lost, which verify
  // names.
  TRY_ASSIGN(const std::vector<PackUsage> usage, catalog_.pack_usage());
  for (const auto& u : usage) {
    if (u.blobs == 0 && !path_exists(pack_file(packs_dir_, u.name))) TRY(catalog_.drop_pack(u.id));
  }
  return Ok{};
}

// One pack file: deleted when no committed blob lives in it, rewritten when mostly dead,
// cut back when only its tail is; left alone while a writer holds it. Its use is read once
// the lock is taken: a writer lets go of a pack only once every blob it appended there is
// committed or lost, so from then on no commit can name the pack (only a collection, and
// one runs at a time, moves blobs into a pack).
Done Collector::free_pack(Pass& pass, const std::string& name, const std::string& file) {
  UniqueFd fd(::open(file.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) {
    if (errno == ENOENT) return Ok{};
    return errno_fault(errno, Side::Archive, fmt::format("opening {}", shown_path(file)));
  }
  if (!try_lock_pack(fd.get())) {
    ++pass.report.packs_busy;
    return Ok{};
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return errno_fault(errno, Side::Archive, fmt::format("reading {}", shown_path(file)));
  }
  const auto size = static_cast<std::uint64_t>(st.st_size);
  TRY_ASSIGN(const std::optional<PackUsage> usage, catalog_.pack_use(name));
  if (!usage || usage->blobs == 0) {
    disk_.step("collect-unlink");
    if (::unlink(file.c_str()) != 0 && errno != ENOENT) {
      return errno_fault(errno, Side::Archive, fmt::format("removing {}", shown_path(file)));
    }
    ++pass.report.packs_deleted;
    pass.report.bytes_reclaimed += size;
    if (usage) {
      disk_.step("collect-drop-pack");
      TRY(catalog_.drop_pack(usage->id));
      if (pass.shred.contains(usage->id)) TRY(catalog_.unshred(usage->id));
    }
    return Ok{};
  }
  // A pack given back once shipped (its file a hole) is read from the store's copy.
  GivenBack copy;
  int from = fd.get();
  if (!held_locally(from, 0)) {
    TRY_ASSIGN(copy, fetch_given_back(given_back_, name));
    from = copy.fd.get();
  }
  TRY_ASSIGN(const std::uint64_t header, header_size(from, file));
  const std::uint64_t live = kPackMagic.size() + usage->stored + usage->blobs * header;
  const std::uint64_t end = usage->end + header;
  const std::uint64_t dead = size > live ? size - live : 0;
  // A pack that held a purged path's blobs is rewritten once they are removed, so that no
  // byte of them is left (FORMAT.md, "Retention").
  const bool shred = pass.shred.contains(usage->id);
  if (dead > 0 && (shred || static_cast<double>(dead) >=
                                pass.options.rewrite_share * static_cast<double>(size))) {
    const std::uint64_t copied_before = pass.report.bytes_copied;
    TRY(rewrite(pass, from, *usage));
    disk_.step("collect-unlink");
    if (::unlink(file.c_str()) != 0 && errno != ENOENT) {
      return errno_fault(errno, Side::Archive, fmt::format("removing {}", shown_path(file)));
    }
    ++pass.report.packs_rewritten;
    const std::uint64_t copied = pass.report.bytes_copied - copied_before;
    pass.report.bytes_reclaimed += size > copied ? size - copied : 0;
    if (shred) TRY(catalog_.unshred(usage->id));
    return Ok{};
  }
  // Nothing dead: what the purge condemned was named again (the same content archived
  // elsewhere), and stays.
  if (shred && dead == 0) TRY(catalog_.unshred(usage->id));
  if (size > end) {
    // Only the tail is dead (a torn append, or blobs no commit names): no reader reads past
    // the last committed record, and no writer appends to a pack it does not hold.
    disk_.step("collect-truncate");
    if (::ftruncate(fd.get(), static_cast<off_t>(end)) != 0) {
      return errno_fault(errno, Side::Archive, fmt::format("cutting back {}", shown_path(file)));
    }
    ++pass.report.packs_truncated;
    pass.report.bytes_reclaimed += size - end;
  }
  return Ok{};
}

// Copies the live blobs of the pack open at `fd` to the collector's new pack, each read
// and checked first (a damaged blob is not copied: the pack is left as it is, for verify to
// name), syncs the new pack, then moves the blobs' rows in one transaction. The caller
// deletes the old file: a reader that looked a blob up before the move and opens the old
// file after finds it gone and looks again (chunk_store.hpp).
Done Collector::rewrite(Pass& pass, int fd, const PackUsage& usage) {
  TRY_ASSIGN(const std::vector<PackedBlob> blobs, catalog_.blobs_in_pack(usage.id));
  if (!pass.writer) pass.writer.emplace(disk_, packs_dir_);
  std::vector<MovedBlob> moved;
  moved.reserve(blobs.size());
  for (const auto& b : blobs) {
    TRY_ASSIGN(const StoredRecord record, read_record(fd, b.ref, b.id));
    TRY_ASSIGN(const BlobRef to,
               pass.writer->append(b.id, b.ref.raw, StoredBlob{record.bytes, record.compressed}));
    moved.push_back({b.id, to});
    pass.report.bytes_copied += to.stored + kBlobHeaderSize;
  }
  TRY(pass.writer->sync());
  disk_.step("collect-move");
  return catalog_.move_blobs(usage.id, moved);
}

}  // namespace tw::archive
