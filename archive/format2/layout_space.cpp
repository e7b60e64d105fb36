// Format 2's space report (Layout::space): the catalog's figures, and the packs' and the
// catalog's files.
#include <sys/stat.h>

#include <cerrno>

#include <fmt/format.h>

#include "archive/format2/layout.hpp"
#include "archive/format2/pack.hpp"
#include "common/dirs.hpp"
#include "common/escape.hpp"
#include "common/paths.hpp"

namespace tw::archive {
namespace {

// The bytes of `file`; 0 when it is gone (a pack a collection removed meanwhile, a journal
// folded away).
Expected<std::uint64_t> bytes_of(const std::string& file) {
  struct stat st {};
  if (::lstat(file.c_str(), &st) == 0) return static_cast<std::uint64_t>(st.st_size);
  if (errno == ENOENT) return std::uint64_t{0};
  return errno_fault(errno, Side::Archive, fmt::format("reading {}", shown_path(file)));
}

}  // namespace

Expected<SpaceReport> Format2Layout::space(const std::vector<DroppedVersions>& left_out) {
  SpaceReport out;
  TRY(catalog_->space(left_out, hooks_.cancelled, out));
  const std::string packs = root_ + "/packs";
  const auto buckets = directory_names(packs);
  if (!buckets) {
    return errno_fault(buckets.failure().value, Side::Archive,
                       fmt::format("listing {}", shown_path(packs)));
  }
  for (const auto& bucket : *buckets) {
    const std::string dir = join_path(packs, bucket);
    const auto names = directory_names(dir);
    if (!names) continue;  // not a directory of packs (verify names it)
    for (const auto& name : *names) {
      if (!name.ends_with(".pack")) continue;
      const std::string file = join_path(dir, name);
      struct stat st {};
      if (::lstat(file.c_str(), &st) != 0) {
        if (errno == ENOENT) continue;  // collected meanwhile
        return errno_fault(errno, Side::Archive, fmt::format("reading {}", shown_path(file)));
      }
      const auto bytes = static_cast<std::uint64_t>(st.st_size);
      ++out.content_files;
      out.content_bytes += bytes;
      if (st.st_blocks == 0 && bytes > 0) {
        ++out.given_back_files;
        out.given_back_bytes += bytes;
      }
    }
  }
  for (const char* file : {"/catalog.db", "/catalog.db-wal"}) {
    TRY_ASSIGN(const std::uint64_t bytes, bytes_of(root_ + file));
    out.catalog_bytes += bytes;
  }
  // What the live blobs take in the packs with their record headers (FORMAT.md, "Format 2").
  const std::uint64_t used =
      out.live_bytes + out.live_blobs * kBlobHeaderSize + out.content_files * kPackMagic.size();
  out.dead_bytes = out.content_bytes > used ? out.content_bytes - used : 0;
  return out;
}

}  // namespace tw::archive
