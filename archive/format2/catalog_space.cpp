// What format 2's catalog says of the archive's space (catalog.hpp, Catalog::space): the
// blobs, those some version names, and those only a set of versions left out names, from
// one snapshot. Like the collection's mark (catalog_collect.cpp) it reads every version row
// once and sets bits over the blobs' row ids, so its memory is two bits per row id, never
// an index of the blobs.
#include <sqlite3.h>

#include <algorithm>

#include "archive/format2/catalog.hpp"
#include "archive/format2/catalog_impl.hpp"

namespace tw::archive {
namespace {

// The blob ids a version row names: its list of chunks, or, for a regular file of one
// chunk, its content's own digest (catalog_rows.hpp); none for a tombstone, an empty file
// or what is not a regular file. S_IFMT is 0xF000 and S_IFREG 0x8000.
constexpr const char* kNamedBlobsSql =
    "SELECT node, number, CASE WHEN length(chunks) > 0 THEN chunks WHEN op = 'DELETE' OR "
    "(op = 'MOVE' AND moved_to IS NOT NULL) OR size = 0 OR (mode & 61440) <> 32768 THEN NULL "
    "ELSE sha256 END FROM versions";

void set_bit(std::vector<std::uint64_t>& bits, std::uint64_t row) {
  if (row / 64 < bits.size()) bits[row / 64] |= std::uint64_t{1} << (row % 64);
}

bool bit(const std::vector<std::uint64_t>& bits, std::uint64_t row) {
  return row / 64 < bits.size() && ((bits[row / 64] >> (row % 64)) & 1) != 0;
}

bool contains(const std::map<std::int64_t, std::vector<std::uint64_t>>& left_out, std::int64_t node,
              std::uint64_t number) {
  const auto it = left_out.find(node);
  return it != left_out.end() && std::binary_search(it->second.begin(), it->second.end(), number);
}

}  // namespace

// Paths not in the tree have no versions to leave out.
Expected<Catalog::Impl::LeftOut> Catalog::Impl::left_out_nodes(
    const std::vector<DroppedVersions>& left_out) {
  LeftOut out;
  for (const auto& dropped : left_out) {
    TRY_ASSIGN(const std::optional<std::int64_t> node, node_of(dropped.path));
    if (!node) continue;
    auto& numbers = out[*node];
    numbers.insert(numbers.end(), dropped.numbers.begin(), dropped.numbers.end());
    std::sort(numbers.begin(), numbers.end());
  }
  return out;
}

Done Catalog::Impl::mark_space(const LeftOut& left_out, std::vector<std::uint64_t>& all,
                               std::vector<std::uint64_t>& kept,
                               const std::function<bool()>& cancelled) {
  TRY_ASSIGN(auto rows, statement(kNamedBlobsSql));
  int rc;
  std::uint64_t seen = 0;
  while ((rc = sqlite3_step(rows)) == SQLITE_ROW) {
    if (++seen % 65536 == 0 && cancelled && cancelled()) return retry("cancelled");
    if (sqlite3_column_type(rows, 2) == SQLITE_NULL) continue;
    const bool gone = contains(left_out, sqlite3_column_int64(rows, 0),
                               static_cast<std::uint64_t>(sqlite3_column_int64(rows, 1)));
    const std::string ids = sqlite::column_bytes(rows, 2);
    for (std::size_t at = 0; at + 32 <= ids.size(); at += 32) {
      TRY_ASSIGN(auto blob, statement("SELECT rowid FROM blobs WHERE id = ?1"));
      sqlite::bind_bytes(blob, 1, std::string_view(ids).substr(at, 32));
      // One the catalog does not list is verify's to name.
      TRY_ASSIGN(const std::optional<std::int64_t> row, optional_id(blob, "reading the blobs"));
      if (!row) continue;
      set_bit(all, static_cast<std::uint64_t>(*row));
      if (!gone) set_bit(kept, static_cast<std::uint64_t>(*row));
    }
  }
  if (rc != SQLITE_DONE) return archive_fault(Error{failure("reading the versions")});
  return Ok{};
}

Done Catalog::Impl::count_space(const std::vector<std::uint64_t>& all,
                                const std::vector<std::uint64_t>& kept, SpaceReport& out) {
  TRY_ASSIGN(auto s, statement("SELECT rowid, stored FROM blobs"));
  std::uint64_t freed_blobs = 0;
  std::uint64_t freed_bytes = 0;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    ++out.blobs;
    const auto row = static_cast<std::uint64_t>(sqlite3_column_int64(s, 0));
    if (!bit(all, row)) continue;
    const auto stored = static_cast<std::uint64_t>(sqlite3_column_int64(s, 1));
    ++out.live_blobs;
    out.live_bytes += stored;
    if (bit(kept, row)) continue;
    ++freed_blobs;
    freed_bytes += stored;
  }
  if (rc != SQLITE_DONE) return archive_fault(Error{failure("reading the blobs")});
  out.freed_blobs = freed_blobs;
  out.freed_bytes = freed_bytes;
  return Ok{};
}

Done Catalog::space(const std::vector<DroppedVersions>& left_out,
                    const std::function<bool()>& cancelled, SpaceReport& out) const {
  return impl_->read([&]() -> Done {
    if (impl_->schema < 4) {
      return retry(fmt::format(
          "catalog {} has the schema of an earlier release, without the blobs' row ids its "
          "figures need: the next archiver or `timewarp gc` upgrades it",
          shown_path(impl_->db.file())));
    }
    // One read transaction: the versions and the blobs as of one instant, beside writers.
    TRY(impl_->db.run("BEGIN"));
    Defer end([&] { (void)impl_->db.run("COMMIT"); });
    TRY_ASSIGN(auto top, impl_->statement("SELECT coalesce(max(rowid), 0) FROM blobs"));
    if (sqlite3_step(top) != SQLITE_ROW) {
      return archive_fault(Error{impl_->failure("counting blobs")});
    }
    const auto words = static_cast<std::size_t>(sqlite3_column_int64(top, 0)) / 64 + 1;
    TRY_ASSIGN(const Impl::LeftOut gone, impl_->left_out_nodes(left_out));
    std::vector<std::uint64_t> all(words);
    std::vector<std::uint64_t> kept(words);
    TRY(impl_->mark_space(gone, all, kept, cancelled));
    SpaceReport counted;
    TRY(impl_->count_space(all, kept, counted));
    out.blobs = counted.blobs;
    out.live_blobs = counted.live_blobs;
    out.live_bytes = counted.live_bytes;
    out.freed_blobs = counted.freed_blobs;
    out.freed_bytes = counted.freed_bytes;
    return Ok{};
  });
}

}  // namespace tw::archive
