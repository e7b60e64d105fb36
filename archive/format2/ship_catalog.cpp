// Format 2's catalog shipped beside its packs (layout.hpp; FORMAT.md, "Shipping"): a
// snapshot of the catalog, compressed, stored as catalog/NAME (NAME: the time it was
// shipped, in nanoseconds, 20 digits, then ".db.zst": the last in byte order is the
// newest), with the archive's FORMAT file beside it. Once a snapshot is stored, the older
// ones are removed, then the packs this one no longer names: every snapshot in the store
// is whole, and the newest names every version the archive keeps.
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

#include "archive/disk.hpp"
#include "archive/format2/layout.hpp"
#include "common/time.hpp"

namespace tw::archive {
namespace {

// zstd's level for the snapshot: a catalog compresses to about a third at 3, 1 s for 100 MB.
constexpr int kCatalogLevel = 3;

Expected<std::vector<char>> compressed_file(const std::string& file) {
  TRY_ASSIGN(const std::string bytes, read_small_file(file, std::size_t{1} << 40));
  std::vector<char> out(ZSTD_compressBound(bytes.size()));
  const std::size_t n =
      ZSTD_compress(out.data(), out.size(), bytes.data(), bytes.size(), kCatalogLevel);
  if (ZSTD_isError(n) != 0U) {
    return archive_fault(
        Error{fmt::format("compressing the catalog's snapshot: {}", ZSTD_getErrorName(n))});
  }
  out.resize(n);
  return out;
}

}  // namespace

Done Format2Layout::ship_catalog(PackStore& store, const std::string& snapshot, const Catalog& copy,
                                 const SnapshotNeeds& needs, ShipReport& report) {
  const auto failed = [&](std::string_view what, const Fault& fault) {
    return in_context(fmt::format("{} {}", what, store.where()), fault);
  };
  TRY_ASSIGN(const std::string fingerprint, copy.fingerprint());
  TRY_ASSIGN(const auto last, catalog_->catalog_shipped(store.where()));
  if (last && last->fingerprint == fingerprint && needs.unshipped.empty()) {
    // The store's newest snapshot restores the same: it is as good as shipped now.
    report.catalog_unchanged = true;
    return catalog_->record_catalog_shipped(store.where(), {last->name, now_ns(), fingerprint});
  }
  TRY_ASSIGN(const std::string format, read_small_file(root_ + "/FORMAT", 4096));
  if (auto put = store.put_file("FORMAT", format); !put) {
    return failed("shipping the archive's FORMAT to", put.fault());
  }
  TRY_ASSIGN(const std::vector<char> packed, compressed_file(snapshot));
  auto names = store.list_files("catalog");
  if (!names) return failed("listing the catalogs in", names.fault());
  // Named after the newest there when the clock went back: the newest is the last.
  std::int64_t at = now_ns();
  for (const std::string& older : *names) {
    if (older.size() > 20) {
      at = std::max<std::int64_t>(at, std::strtoll(older.substr(0, 20).c_str(), nullptr, 10) + 1);
    }
  }
  const std::string name = fmt::format("{:020}.db.zst", at);
  disk_.step("ship-catalog");
  if (auto put = store.put_file("catalog/" + name, packed); !put) {
    return failed("shipping the catalog to", put.fault());
  }
  report.catalog = "catalog/" + name;
  report.catalog_bytes = packed.size();
  TRY(catalog_->record_catalog_shipped(store.where(), {report.catalog, now_ns(), fingerprint}));
  for (const std::string& older : *names) {
    if (older >= name) continue;
    if (auto removed = store.remove_file("catalog/" + older); !removed) {
      return failed("removing an older catalog from", removed.fault());
    }
  }
  for (const std::string& pack : needs.unshipped) {
    disk_.step("ship-remove");
    if (auto removed = store.remove(pack); !removed) {
      return failed(fmt::format("removing pack {} from", pack), removed.fault());
    }
    TRY(catalog_->forget_unshipped(pack));
    ++report.packs_removed;
  }
  return Ok{};
}

}  // namespace tw::archive
