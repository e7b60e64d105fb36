// Collection in format 2's catalog (catalog.hpp; FORMAT.md, "Collection"): the mark over
// one snapshot, condemning and removing blobs, the packs' use, moving blobs, the log of
// collections and the catalog file's shrinking.
#include <sqlite3.h>
#include <sys/stat.h>

#include <fmt/format.h>

#include "archive/format2/catalog.hpp"
#include "archive/format2/catalog_impl.hpp"

namespace tw::archive {
namespace {

// Changes to blobs go this many rows per transaction: a writer waits for one at most.
constexpr std::size_t kRowsPerTransaction = 4096;

bool is_set(const std::vector<std::uint64_t>& bits, std::int64_t i) {
  const auto u = static_cast<std::uint64_t>(i);
  return u / 64 < bits.size() && ((bits[u / 64] >> (u % 64)) & 1) != 0;
}

}  // namespace

// Marks, in `bits`, the row ids of the blobs that version rows name; inside mark()'s read
// transaction.
Done Catalog::Impl::mark_versions(std::vector<std::uint64_t>& bits,
                                  const std::function<bool()>& cancelled) {
  TRY_ASSIGN(auto versions,
             statement("SELECT chunks, sha256, op, size, mode, moved_to FROM versions"));
  int rc;
  std::uint64_t seen = 0;
  while ((rc = sqlite3_step(versions)) == SQLITE_ROW) {
    if (++seen % 65536 == 0 && cancelled && cancelled()) return retry("collection stopped");
    std::string ids = sqlite::column_bytes(versions, 0);
    if (ids.empty()) {
      // A file of one chunk names its content's digest (catalog_rows.hpp).
      const std::string op = sqlite::column_bytes(versions, 2);
      const bool tombstone =
          op == "DELETE" || (op == "MOVE" && sqlite3_column_type(versions, 5) != SQLITE_NULL);
      const bool file = S_ISREG(static_cast<mode_t>(sqlite3_column_int64(versions, 4)));
      if (tombstone || !file || sqlite3_column_int64(versions, 3) == 0) continue;
      ids = sqlite::column_bytes(versions, 1);
    }
    for (std::size_t at = 0; at + 32 <= ids.size(); at += 32) {
      TRY_ASSIGN(auto blob, statement("SELECT rowid FROM blobs WHERE id = ?1"));
      sqlite::bind_bytes(blob, 1, std::string_view(ids).substr(at, 32));
      const int found = sqlite3_step(blob);
      if (found == SQLITE_DONE) continue;  // named but missing: verify's to name
      if (found != SQLITE_ROW) return archive_fault(Error{failure("marking blobs")});
      const auto row = static_cast<std::uint64_t>(sqlite3_column_int64(blob, 0));
      if (row / 64 < bits.size()) bits[row / 64] |= std::uint64_t{1} << (row % 64);
    }
  }
  if (rc != SQLITE_DONE) return archive_fault(Error{failure("reading versions to mark")});
  return Ok{};
}

// What to do with each blob, from the same snapshot as the mark.
Done Catalog::Impl::sort_blobs(const std::vector<std::uint64_t>& bits, BlobMarks& marks) {
  TRY_ASSIGN(auto s, statement("SELECT rowid, condemned FROM blobs"));
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    ++marks.blobs;
    const std::int64_t row = sqlite3_column_int64(s, 0);
    const bool condemned = sqlite3_column_type(s, 1) != SQLITE_NULL;
    const bool named = is_set(bits, row);
    if (condemned && !named) marks.remove.push_back(row);
    if (condemned && named) marks.take_back.push_back(row);
    if (!condemned && !named) marks.condemn.push_back(row);
  }
  if (rc != SQLITE_DONE) return archive_fault(Error{failure("reading blobs to collect")});
  return Ok{};
}

Expected<BlobMarks> Catalog::mark(const std::function<bool()>& cancelled) {
  // One read transaction: the versions and the blobs as of one instant. Writers go on
  // beside it (WAL); what they commit later is seen by the next collection.
  TRY(impl_->db.run("BEGIN"));
  Defer end([&] { (void)impl_->db.run("COMMIT"); });
  TRY_ASSIGN(auto top, impl_->statement("SELECT coalesce(max(rowid), 0) FROM blobs"));
  if (sqlite3_step(top) != SQLITE_ROW) {
    return archive_fault(Error{impl_->failure("counting blobs")});
  }
  std::vector<std::uint64_t> bits(static_cast<std::size_t>(sqlite3_column_int64(top, 0)) / 64 + 1);
  BlobMarks marks;
  TRY(impl_->mark_versions(bits, cancelled));
  TRY(impl_->sort_blobs(bits, marks));
  return marks;
}

Expected<SweptBlobs> Catalog::apply_marks(const BlobMarks& marks, std::int64_t collection) {
  SweptBlobs swept;
  // Removed: condemned by an earlier collection, named by no version in the snapshot, and
  // not taken back since (a writer that names a condemned blob clears `condemned` in its
  // commit). Taken back: condemned, but named again. Condemned: named by no version.
  struct Step {
    const std::vector<std::int64_t>& rows;
    const char* sql;
    std::uint64_t* count;
  };
  const Step steps[] = {
      {marks.remove,
       "DELETE FROM blobs WHERE rowid = ?1 AND condemned IS NOT NULL AND condemned < ?2 "
       "RETURNING stored",
       &swept.removed},
      {marks.take_back, "UPDATE blobs SET condemned = NULL WHERE rowid = ?1 AND ?2 > 0", nullptr},
      {marks.condemn, "UPDATE blobs SET condemned = ?2 WHERE rowid = ?1 AND condemned IS NULL",
       &swept.condemned}};
  for (const auto& step : steps) {
    for (std::size_t from = 0; from < step.rows.size(); from += kRowsPerTransaction) {
      TRY(impl_->in_transaction([&]() -> Done {
        const std::size_t to = std::min(step.rows.size(), from + kRowsPerTransaction);
        for (std::size_t i = from; i < to; ++i) {
          TRY_ASSIGN(auto s, impl_->statement(step.sql));
          sqlite3_bind_int64(s, 1, step.rows[i]);
          sqlite3_bind_int64(s, 2, collection);
          int rc;
          while ((rc = sqlite3_step(s)) == SQLITE_ROW)
            swept.removed_bytes += sqlite3_column_int64(s, 0);
          if (rc != SQLITE_DONE) return archive_fault(Error{impl_->failure("collecting blobs")});
          if (step.count != nullptr) *step.count += sqlite3_changes(impl_->db.handle());
        }
        return Ok{};
      }));
    }
  }
  return swept;
}

Expected<std::vector<PackUsage>> Catalog::pack_usage() {
  TRY_ASSIGN(auto s, impl_->statement(
                         "SELECT p.id, p.name, count(b.rowid), coalesce(sum(b.stored), 0), "
                         "coalesce(max(b.offset + b.stored), 0) FROM packs p LEFT JOIN blobs b "
                         "ON b.pack = p.id GROUP BY p.id"));
  std::vector<PackUsage> out;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    out.push_back({sqlite3_column_int64(s, 0), sqlite::column_bytes(s, 1),
                   static_cast<std::uint64_t>(sqlite3_column_int64(s, 2)),
                   static_cast<std::uint64_t>(sqlite3_column_int64(s, 3)),
                   static_cast<std::uint64_t>(sqlite3_column_int64(s, 4))});
  }
  if (rc != SQLITE_DONE) return archive_fault(Error{impl_->failure("reading the packs' use")});
  return out;
}

Expected<std::optional<PackUsage>> Catalog::pack_use(const std::string& name) {
  TRY_ASSIGN(auto s, impl_->statement(
                         "SELECT p.id, p.name, count(b.rowid), coalesce(sum(b.stored), 0), "
                         "coalesce(max(b.offset + b.stored), 0) FROM packs p LEFT JOIN blobs b "
                         "ON b.pack = p.id WHERE p.name = ?1 GROUP BY p.id"));
  sqlite::bind_text(s, 1, name);
  const int rc = sqlite3_step(s);
  if (rc == SQLITE_DONE) return std::optional<PackUsage>();
  if (rc != SQLITE_ROW) return archive_fault(Error{impl_->failure("reading a pack's use")});
  return std::optional<PackUsage>(
      PackUsage{sqlite3_column_int64(s, 0), sqlite::column_bytes(s, 1),
                static_cast<std::uint64_t>(sqlite3_column_int64(s, 2)),
                static_cast<std::uint64_t>(sqlite3_column_int64(s, 3)),
                static_cast<std::uint64_t>(sqlite3_column_int64(s, 4))});
}

Expected<std::vector<PackedBlob>> Catalog::blobs_in_pack(std::int64_t pack) {
  TRY_ASSIGN(auto s, impl_->statement(
                         "SELECT b.id, p.name, b.offset, b.stored, b.raw FROM blobs b JOIN packs "
                         "p ON p.id = b.pack WHERE b.pack = ?1 ORDER BY b.offset"));
  sqlite3_bind_int64(s, 1, pack);
  std::vector<PackedBlob> out;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    out.push_back({digest_hex(sqlite::column_bytes(s, 0)), read_ref(s, 1)});
  }
  if (rc != SQLITE_DONE) return archive_fault(Error{impl_->failure("listing a pack's blobs")});
  return out;
}

Done Catalog::move_blobs(std::int64_t from, const std::vector<MovedBlob>& moved) {
  return impl_->in_transaction([&]() -> Done {
    for (const auto& m : moved) {
      TRY_ASSIGN(const std::int64_t pack, impl_->ensure_pack(m.to.pack));
      TRY_ASSIGN(
          auto s,
          impl_->statement("UPDATE blobs SET pack = ?1, offset = ?2 WHERE id = ?3 AND pack = ?4"));
      sqlite3_bind_int64(s, 1, pack);
      sqlite3_bind_int64(s, 2, static_cast<sqlite3_int64>(m.to.offset));
      sqlite::bind_bytes(s, 3, digest_bytes(m.id));
      sqlite3_bind_int64(s, 4, from);
      if (sqlite3_step(s) != SQLITE_DONE)
        return archive_fault(Error{impl_->failure("moving a blob")});
    }
    return impl_->drop_pack_row(from);
  });
}

Done Catalog::drop_pack(std::int64_t pack) {
  return impl_->in_transaction([&] { return impl_->drop_pack_row(pack); });
}

// The row of pack `pack`, when no blob lives in it any more.
Done Catalog::Impl::drop_pack_row(std::int64_t pack) {
  TRY_ASSIGN(auto s, statement("DELETE FROM packs WHERE id = ?1 AND NOT EXISTS (SELECT 1 FROM "
                               "blobs WHERE pack = ?1)"));
  sqlite3_bind_int64(s, 1, pack);
  if (sqlite3_step(s) != SQLITE_DONE) return archive_fault(Error{failure("removing a pack")});
  pack_ids.forget();
  return Ok{};
}

Expected<std::int64_t> Catalog::begin_collection(std::int64_t now_ns) {
  return impl_->in_transaction([&]() -> Expected<std::int64_t> {
    TRY_ASSIGN(auto s, impl_->statement("INSERT INTO collections(started) VALUES (?1)"));
    sqlite3_bind_int64(s, 1, now_ns);
    if (sqlite3_step(s) != SQLITE_DONE) {
      return archive_fault(Error{impl_->failure("starting a collection")});
    }
    return impl_->db.last_insert_rowid();
  });
}

Done Catalog::finish_collection(const CollectReport& report) {
  return impl_->in_transaction([&]() -> Done {
    TRY_ASSIGN(auto s, impl_->statement(
                           "UPDATE collections SET finished = ?2, blobs = ?3, condemned = ?4, "
                           "swept = ?5, swept_bytes = ?6, packs_deleted = ?7, packs_rewritten = "
                           "?8, packs_truncated = ?9, bytes_copied = ?10, bytes_reclaimed = ?11 "
                           "WHERE id = ?1"));
    const std::int64_t values[] = {
        report.collection,
        report.finished_ns,
        static_cast<std::int64_t>(report.blobs),
        static_cast<std::int64_t>(report.blobs_condemned),
        static_cast<std::int64_t>(report.blobs_swept),
        static_cast<std::int64_t>(report.bytes_swept),
        static_cast<std::int64_t>(report.packs_deleted),
        static_cast<std::int64_t>(report.packs_rewritten),
        static_cast<std::int64_t>(report.packs_truncated),
        static_cast<std::int64_t>(report.bytes_copied),
        static_cast<std::int64_t>(report.bytes_reclaimed + report.catalog_bytes_reclaimed)};
    for (int i = 0; i < 11; ++i) sqlite3_bind_int64(s, i + 1, values[i]);
    if (sqlite3_step(s) != SQLITE_DONE) {
      return archive_fault(Error{impl_->failure("recording a collection")});
    }
    return Ok{};
  });
}

Expected<std::optional<CollectReport>> Catalog::last_collection() const {
  return impl_->read([&]() -> Expected<std::optional<CollectReport>> {
    if (impl_->schema < 4) return std::optional<CollectReport>();
    TRY_ASSIGN(auto s, impl_->statement(
                           "SELECT id, started, finished, blobs, condemned, swept, swept_bytes, "
                           "packs_deleted, packs_rewritten, packs_truncated, bytes_copied, "
                           "bytes_reclaimed FROM collections WHERE finished IS NOT NULL ORDER "
                           "BY id DESC LIMIT 1"));
    const int rc = sqlite3_step(s);
    if (rc == SQLITE_DONE) return std::optional<CollectReport>();
    if (rc != SQLITE_ROW) return archive_fault(Error{impl_->failure("reading the collections")});
    auto u = [&](int i) { return static_cast<std::uint64_t>(sqlite3_column_int64(s, i)); };
    CollectReport r;
    r.collection = sqlite3_column_int64(s, 0);
    r.started_ns = sqlite3_column_int64(s, 1);
    r.finished_ns = sqlite3_column_int64(s, 2);
    r.blobs = u(3);
    r.blobs_condemned = u(4);
    r.blobs_swept = u(5);
    r.bytes_swept = u(6);
    r.packs_deleted = u(7);
    r.packs_rewritten = u(8);
    r.packs_truncated = u(9);
    r.bytes_copied = u(10);
    r.bytes_reclaimed = u(11);
    return std::optional<CollectReport>(r);
  });
}

// Gives the catalog's free pages back to the filesystem (incremental auto-vacuum, set when
// the catalog was made or upgraded to schema 4): the file shrinks by what the removed rows
// took. Returns the bytes it shrank by.
Expected<std::uint64_t> Catalog::vacuum() {
  auto pages = [&](const char* pragma) -> Expected<std::int64_t> {
    TRY_ASSIGN(auto s, impl_->statement(pragma));
    if (sqlite3_step(s) != SQLITE_ROW) return archive_fault(Error{impl_->failure(pragma)});
    return sqlite3_column_int64(s, 0);
  };
  TRY_ASSIGN(const std::int64_t before, pages("PRAGMA page_count"));
  TRY_ASSIGN(const std::int64_t page_size, pages("PRAGMA page_size"));
  {
    TRY_ASSIGN(auto s, impl_->statement("PRAGMA incremental_vacuum"));
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    }
    if (rc != SQLITE_DONE) return archive_fault(Error{impl_->failure("shrinking the catalog")});
  }
  TRY_ASSIGN(const std::int64_t after, pages("PRAGMA page_count"));
  return static_cast<std::uint64_t>(std::max<std::int64_t>(0, before - after) * page_size);
}

}  // namespace tw::archive
