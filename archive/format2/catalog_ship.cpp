// Shipping in format 2's catalog (catalog.hpp; ARCHITECTURE.md, "Object store"): which packs
// the pack store holds, and which it may hold that were dropped here.
#include <sqlite3.h>

#include <memory>

#include <fmt/format.h>

#include "archive/format2/catalog.hpp"
#include "archive/format2/catalog_impl.hpp"
#include "archive/format2/pack.hpp"
#include "common/escape.hpp"

namespace tw::archive {

Expected<std::optional<std::string>> Catalog::Impl::ship_target() {
  if (schema < 6) return std::optional<std::string>();
  TRY_ASSIGN(auto s, statement("SELECT store FROM ship_target WHERE id = 1"));
  const int rc = sqlite3_step(s);
  if (rc == SQLITE_DONE) return std::optional<std::string>();
  if (rc != SQLITE_ROW) return archive_fault(Error{failure("reading the pack store")});
  return std::optional<std::string>(sqlite::column_bytes(s, 0));
}

Expected<std::optional<std::string>> Catalog::ship_target() const {
  return impl_->read([&] { return impl_->ship_target(); });
}

Done Catalog::set_ship_target(const std::string& store) {
  return impl_->in_transaction([&]() -> Done {
    TRY_ASSIGN(const std::optional<std::string> now, impl_->ship_target());
    if (now == store) return Ok{};
    TRY(impl_->db.exec("DELETE FROM shipped; DELETE FROM unshipped;"));
    TRY_ASSIGN(auto s, impl_->statement("INSERT INTO ship_target(id, store) VALUES (1, ?1) "
                                        "ON CONFLICT(id) DO UPDATE SET store = excluded.store"));
    sqlite::bind_text(s, 1, store);
    if (sqlite3_step(s) != SQLITE_DONE) {
      return archive_fault(Error{impl_->failure("recording the pack store")});
    }
    return Ok{};
  });
}

Expected<std::vector<PackShipping>> Catalog::packs_shipping() const {
  return impl_->read([&]() -> Expected<std::vector<PackShipping>> {
    std::vector<PackShipping> out;
    if (impl_->schema < 6) {  // read before a writer upgraded it: nothing shipped
      TRY_ASSIGN(auto s, impl_->statement("SELECT id, name FROM packs ORDER BY id"));
      int rc;
      while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        PackShipping pack;
        pack.id = sqlite3_column_int64(s, 0);
        pack.name = sqlite::column_bytes(s, 1);
        out.push_back(std::move(pack));
      }
      if (rc != SQLITE_DONE) return archive_fault(Error{impl_->failure("listing the packs")});
      return out;
    }
    TRY_ASSIGN(auto s,
               impl_->statement("SELECT p.id, p.name, s.size, coalesce(s.at_ns, 0) "
                                "FROM packs p LEFT JOIN shipped s ON s.pack = p.id ORDER BY p.id"));
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
      PackShipping pack;
      pack.id = sqlite3_column_int64(s, 0);
      pack.name = sqlite::column_bytes(s, 1);
      if (sqlite3_column_type(s, 2) != SQLITE_NULL) {
        pack.size = static_cast<std::uint64_t>(sqlite3_column_int64(s, 2));
      }
      pack.at_ns = sqlite3_column_int64(s, 3);
      out.push_back(std::move(pack));
    }
    if (rc != SQLITE_DONE) return archive_fault(Error{impl_->failure("listing the shipped packs")});
    return out;
  });
}

Expected<bool> Catalog::begin_shipping(std::int64_t pack, std::int64_t now_ns) {
  return impl_->in_transaction([&]() -> Expected<bool> {
    TRY_ASSIGN(
        auto s,
        impl_->statement("INSERT INTO shipped(pack, size, at_ns) SELECT id, NULL, ?2 FROM packs "
                         "WHERE id = ?1 ON CONFLICT(pack) DO UPDATE SET size = NULL, at_ns = ?2"));
    sqlite3_bind_int64(s, 1, pack);
    sqlite3_bind_int64(s, 2, now_ns);
    if (sqlite3_step(s) != SQLITE_DONE) {
      return archive_fault(Error{impl_->failure("recording a pack's shipping")});
    }
    return sqlite3_changes(impl_->db.handle()) > 0;
  });
}

Done Catalog::record_shipped(std::int64_t pack, std::uint64_t size, std::int64_t now_ns) {
  return impl_->in_transaction([&]() -> Done {
    TRY_ASSIGN(auto s,
               impl_->statement("UPDATE shipped SET size = ?2, at_ns = ?3 WHERE pack = ?1"));
    sqlite3_bind_int64(s, 1, pack);
    sqlite3_bind_int64(s, 2, static_cast<std::int64_t>(size));
    sqlite3_bind_int64(s, 3, now_ns);
    if (sqlite3_step(s) != SQLITE_DONE) {
      return archive_fault(Error{impl_->failure("recording a shipped pack")});
    }
    return Ok{};
  });
}

Expected<std::vector<std::string>> Catalog::unshipped() const {
  return impl_->read([&]() -> Expected<std::vector<std::string>> {
    std::vector<std::string> out;
    if (impl_->schema < 6) return out;
    TRY_ASSIGN(auto s, impl_->statement("SELECT name FROM unshipped ORDER BY name"));
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) out.push_back(sqlite::column_bytes(s, 0));
    if (rc != SQLITE_DONE) {
      return archive_fault(Error{impl_->failure("listing the packs to remove from the store")});
    }
    return out;
  });
}

Done Catalog::forget_unshipped(const std::string& name) {
  return impl_->in_transaction([&]() -> Done {
    TRY_ASSIGN(auto s, impl_->statement("DELETE FROM unshipped WHERE name = ?1"));
    sqlite::bind_text(s, 1, name);
    if (sqlite3_step(s) != SQLITE_DONE) {
      return archive_fault(Error{impl_->failure("forgetting a pack removed from the store")});
    }
    return Ok{};
  });
}

Done Catalog::copy_to(const std::string& file) const {
  const auto failed = [&](sqlite3* db, std::string_view what) {
    return archive_fault(Error{fmt::format("copying the catalog to {}: {}: {}", shown_path(file),
                                           what, sqlite3_errmsg(db))});
  };
  sqlite3* raw = nullptr;
  const int rc =
      sqlite3_open_v2(file.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  const std::unique_ptr<sqlite3, decltype(&sqlite3_close)> copy(raw, &sqlite3_close);
  if (rc != SQLITE_OK) return failed(raw, "opening");
  sqlite3_backup* backup = sqlite3_backup_init(raw, "main", impl_->db.handle(), "main");
  if (backup == nullptr) return failed(raw, "beginning");
  // All pages in one step: one read of the source, however many commits come meanwhile.
  const int stepped = sqlite3_backup_step(backup, -1);
  sqlite3_backup_finish(backup);
  if (stepped != SQLITE_DONE) return failed(raw, "copying");
  if (sqlite3_exec(raw, "PRAGMA journal_mode=DELETE", nullptr, nullptr, nullptr) != SQLITE_OK) {
    return failed(raw, "leaving WAL mode");
  }
  return Ok{};
}

Done Catalog::record_catalog_shipped(const std::string& store, const CatalogShipped& shipped) {
  return impl_->in_transaction([&]() -> Done {
    TRY(impl_->db.exec(
        "CREATE TABLE IF NOT EXISTS catalog_shipped(id INTEGER PRIMARY KEY CHECK (id = 1), "
        "store TEXT NOT NULL, name TEXT NOT NULL, at_ns INTEGER NOT NULL, "
        "fingerprint TEXT NOT NULL)"));
    TRY_ASSIGN(auto s,
               impl_->statement("INSERT OR REPLACE INTO catalog_shipped(id, store, name, at_ns, "
                                "fingerprint) VALUES (1, ?1, ?2, ?3, ?4)"));
    sqlite::bind_text(s, 1, store);
    sqlite::bind_text(s, 2, shipped.name);
    sqlite3_bind_int64(s, 3, shipped.at_ns);
    sqlite::bind_text(s, 4, shipped.fingerprint);
    if (sqlite3_step(s) != SQLITE_DONE) {
      return archive_fault(Error{impl_->failure("recording the catalog shipped")});
    }
    return Ok{};
  });
}

Expected<std::optional<Catalog::CatalogShipped>> Catalog::catalog_shipped(
    const std::string& store) const {
  using Found = std::optional<CatalogShipped>;
  return impl_->read([&]() -> Expected<Found> {
    TRY_ASSIGN(auto exists, impl_->statement("SELECT 1 FROM sqlite_master WHERE type = 'table' "
                                             "AND name = 'catalog_shipped'"));
    if (sqlite3_step(exists) != SQLITE_ROW) return Found();
    TRY_ASSIGN(auto s, impl_->statement("SELECT name, at_ns, fingerprint FROM catalog_shipped "
                                        "WHERE store = ?1"));
    sqlite::bind_text(s, 1, store);
    const int rc = sqlite3_step(s);
    if (rc == SQLITE_DONE) return Found();
    if (rc != SQLITE_ROW)
      return archive_fault(Error{impl_->failure("reading the catalog shipped")});
    return Found(CatalogShipped{sqlite::column_bytes(s, 0), sqlite3_column_int64(s, 1),
                                sqlite::column_bytes(s, 2)});
  });
}

Expected<std::string> Catalog::fingerprint() const {
  return impl_->read([&]() -> Expected<std::string> {
    TRY_ASSIGN(
        auto s,
        impl_->statement(
            "SELECT (SELECT coalesce(max(archived_at), 0) || '/' || count(*) FROM versions)"
            " || ' ' || (SELECT count(*) FROM nodes)"
            " || ' ' || (SELECT count(*) FROM pins)"
            " || ' ' || coalesce((SELECT from_ns || '/' || hex(instants) FROM retention), '')"
            " || ' ' || (SELECT count(*) FROM retention_folders)"
            " || ' ' || (SELECT count(*) FROM blobs)"
            " || ' ' || (SELECT coalesce(max(id), 0) || '/' || count(*) FROM packs)"));
    if (sqlite3_step(s) != SQLITE_ROW) {
      return archive_fault(Error{impl_->failure("reading the catalog's fingerprint")});
    }
    return sqlite::column_bytes(s, 0);
  });
}

Expected<SnapshotNeeds> Catalog::snapshot_needs() const {
  TRY_ASSIGN(SnapshotNeeds out, impl_->read([&]() -> Expected<SnapshotNeeds> {
    SnapshotNeeds needs;
    TRY_ASSIGN(auto s, impl_->statement("SELECT p.name, max(b.offset + b.stored) FROM packs p "
                                        "JOIN blobs b ON b.pack = p.id GROUP BY p.id"));
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
      needs.packs.emplace_back(
          sqlite::column_bytes(s, 0),
          static_cast<std::uint64_t>(sqlite3_column_int64(s, 1)) + kBlobHeaderSize);
    }
    if (rc != SQLITE_DONE) return archive_fault(Error{impl_->failure("listing the packs used")});
    return needs;
  }));
  TRY_ASSIGN(out.unshipped, unshipped());
  return out;
}

}  // namespace tw::archive
