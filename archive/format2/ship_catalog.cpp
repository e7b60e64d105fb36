// Format 2's catalog shipped beside its packs (layout.hpp; FORMAT.md, "Shipping"): a
// snapshot of the catalog, compressed, stored as catalog/NAME (NAME: the time it was
// shipped, in nanoseconds, 20 digits, then ".db.zst": the last in byte order is the
// newest), with the archive's FORMAT file beside it. Once a snapshot is stored, the older
// ones are removed, then the packs this one no longer names: every snapshot in the store
// is whole, and the newest names every version the archive keeps.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <memory>

#include <fmt/format.h>

#include "archive/disk.hpp"
#include "archive/format2/layout.hpp"
#include "common/fd.hpp"
#include "common/time.hpp"

namespace tw::archive {
namespace {

constexpr int kCatalogLevel = 3;  // zstd's level for the snapshot

// The snapshot file compressed (one zstd frame, its size in it), read a MiB at a time: what
// is held in memory is the compressed bytes, not the catalog too.
Expected<std::vector<char>> compressed_file(const std::string& file) {
  const UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  struct stat st {};
  if (!fd || ::fstat(fd.get(), &st) != 0) {
    return errno_fault(errno, Side::Archive, fmt::format("reading {}", shown_path(file)));
  }
  const std::unique_ptr<ZSTD_CCtx, decltype(&ZSTD_freeCCtx)> cctx(ZSTD_createCCtx(),
                                                                  &ZSTD_freeCCtx);
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_compressionLevel, kCatalogLevel);
  ZSTD_CCtx_setPledgedSrcSize(cctx.get(), static_cast<unsigned long long>(st.st_size));
  std::vector<char> in(std::size_t{1} << 20);
  std::vector<char> out;
  for (;;) {
    ssize_t got = 0;
    while ((got = ::read(fd.get(), in.data(), in.size())) < 0 && errno == EINTR) {
    }
    if (got < 0) {
      return errno_fault(errno, Side::Archive, fmt::format("reading {}", shown_path(file)));
    }
    const ZSTD_EndDirective mode = got == 0 ? ZSTD_e_end : ZSTD_e_continue;
    ZSTD_inBuffer input{in.data(), static_cast<std::size_t>(got), 0};
    std::size_t left = 0;
    do {
      const std::size_t at = out.size();
      out.resize(at + ZSTD_CStreamOutSize());
      ZSTD_outBuffer output{out.data() + at, ZSTD_CStreamOutSize(), 0};
      left = ZSTD_compressStream2(cctx.get(), &output, &input, mode);
      out.resize(at + output.pos);
      if (ZSTD_isError(left) != 0U) {
        return archive_fault(
            Error{fmt::format("compressing the catalog's snapshot: {}", ZSTD_getErrorName(left))});
      }
    } while (mode == ZSTD_e_end ? left != 0 : input.pos < input.size);
    if (got == 0) return out;
  }
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
