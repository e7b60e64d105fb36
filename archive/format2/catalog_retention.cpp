// Retention in format 2's catalog (catalog.hpp; FORMAT.md, "Retention"): the moments the
// archive still holds whole, pins, and the removal of versions.
#include <sqlite3.h>

#include <cstring>

#include <fmt/format.h>

#include "archive/format2/catalog.hpp"
#include "archive/format2/catalog_impl.hpp"
#include "common/escape.hpp"

namespace tw::archive {
namespace {

// The kept instants as a column: little-endian 64-bit words, one per instant.
std::string encode_instants(const std::vector<std::int64_t>& instants) {
  std::string out;
  out.reserve(instants.size() * 8);
  for (const auto at : instants) {
    auto u = static_cast<std::uint64_t>(at);
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((u >> (8 * i)) & 0xff));
  }
  return out;
}

std::vector<std::int64_t> decode_instants(std::string_view bytes) {
  std::vector<std::int64_t> out;
  for (std::size_t at = 0; at + 8 <= bytes.size(); at += 8) {
    std::uint64_t u = 0;
    for (int i = 0; i < 8; ++i) {
      u |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
    }
    out.push_back(static_cast<std::int64_t>(u));
  }
  return out;
}

}  // namespace

Expected<KeptScopes> Catalog::Impl::kept() {
  KeptScopes kept;
  if (schema < 4) return kept;  // read before a writer upgraded it: never thinned
  TRY_ASSIGN(auto s, statement("SELECT from_ns, instants FROM retention WHERE id = 1"));
  int rc = sqlite3_step(s);
  if (rc == SQLITE_ROW) {
    kept.archive.from_ns = sqlite3_column_int64(s, 0);
    kept.archive.instants = decode_instants(sqlite::column_bytes(s, 1));
  } else if (rc != SQLITE_DONE) {
    return archive_fault(Error{failure("reading the kept moments")});
  }
  if (schema < 5) return kept;  // no folder had a policy of its own yet
  TRY_ASSIGN(auto f, statement("SELECT folder, from_ns, instants FROM retention_folders"));
  while ((rc = sqlite3_step(f)) == SQLITE_ROW) {
    KeptMoments& folder = kept.folders[std::string(sqlite::column_bytes(f, 0))];
    folder.from_ns = sqlite3_column_int64(f, 1);
    folder.instants = decode_instants(sqlite::column_bytes(f, 2));
  }
  if (rc != SQLITE_DONE) return archive_fault(Error{failure("reading the folders' kept moments")});
  return kept;
}

Done Catalog::Impl::store_kept(std::string_view folder, const KeptMoments& kept) {
  if (!kept.from_ns) return Ok{};  // never thinned: nothing to record
  const char* sql = folder.empty()
                        ? "INSERT INTO retention(id, from_ns, instants) VALUES (1, ?1, ?2) "
                          "ON CONFLICT(id) DO UPDATE SET from_ns = ?1, instants = ?2"
                        : "INSERT INTO retention_folders(folder, from_ns, instants) "
                          "VALUES (?3, ?1, ?2) "
                          "ON CONFLICT(folder) DO UPDATE SET from_ns = ?1, instants = ?2";
  TRY_ASSIGN(auto s, statement(sql));
  sqlite3_bind_int64(s, 1, *kept.from_ns);
  sqlite::bind_bytes(s, 2, encode_instants(kept.instants));
  if (!folder.empty()) sqlite::bind_bytes(s, 3, folder);
  if (sqlite3_step(s) != SQLITE_DONE) {
    return archive_fault(Error{failure("recording the kept moments")});
  }
  return Ok{};
}

Expected<KeptScopes> Catalog::kept_moments() const {
  return impl_->read([&] { return impl_->kept(); });
}

Expected<KeptScopes> Catalog::record_kept(const KeptScopes& kept) {
  return impl_->in_transaction([&]() -> Expected<KeptScopes> {
    // What every earlier run kept, read inside the transaction: two runs at once store
    // what both keep, never more than either.
    TRY_ASSIGN(const KeptScopes before, impl_->kept());
    const KeptScopes both = kept.intersect(before);
    TRY(impl_->store_kept("", both.archive));
    for (const auto& [folder, moments] : both.folders) TRY(impl_->store_kept(folder, moments));
    return both;
  });
}

Expected<std::uint64_t> Catalog::forgotten(std::string_view path) const {
  return impl_->read([&]() -> Expected<std::uint64_t> {
    if (impl_->schema < 4) return std::uint64_t{0};
    TRY_ASSIGN(const auto node, impl_->node_of(path));
    if (!node) return std::uint64_t{0};
    TRY_ASSIGN(auto s, impl_->statement("SELECT forgotten FROM nodes WHERE id = ?1"));
    sqlite3_bind_int64(s, 1, *node);
    if (sqlite3_step(s) != SQLITE_ROW) {
      return archive_fault(Error{impl_->failure("reading a path's removed versions")});
    }
    return static_cast<std::uint64_t>(sqlite3_column_int64(s, 0));
  });
}

Expected<std::set<std::uint64_t>> Catalog::pinned(std::string_view path) const {
  return impl_->read([&]() -> Expected<std::set<std::uint64_t>> {
    std::set<std::uint64_t> out;
    if (impl_->schema < 4) return out;
    TRY_ASSIGN(const auto node, impl_->node_of(path));
    if (!node) return out;
    TRY_ASSIGN(auto s, impl_->statement("SELECT number FROM pins WHERE node = ?1"));
    sqlite3_bind_int64(s, 1, *node);
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
      out.insert(static_cast<std::uint64_t>(sqlite3_column_int64(s, 0)));
    }
    if (rc != SQLITE_DONE) return archive_fault(Error{impl_->failure("reading pins")});
    return out;
  });
}

Done Catalog::set_pin(std::string_view path, std::uint64_t number, bool pin) {
  return impl_->in_transaction([&]() -> Done {
    TRY_ASSIGN(const auto node, impl_->node_of(path));
    if (!node) return permanent(fmt::format("{} was never archived", shown_path(path)));
    if (pin) {
      TRY_ASSIGN(auto has,
                 impl_->statement("SELECT 1 FROM versions WHERE node = ?1 AND number = ?2"));
      sqlite3_bind_int64(has, 1, *node);
      sqlite3_bind_int64(has, 2, static_cast<sqlite3_int64>(number));
      if (sqlite3_step(has) != SQLITE_ROW) {
        return permanent(fmt::format("{} has no version {}", shown_path(path), number));
      }
    }
    TRY_ASSIGN(auto s,
               impl_->statement(pin ? "INSERT OR IGNORE INTO pins(node, number) VALUES (?1, ?2)"
                                    : "DELETE FROM pins WHERE node = ?1 AND number = ?2"));
    sqlite3_bind_int64(s, 1, *node);
    sqlite3_bind_int64(s, 2, static_cast<sqlite3_int64>(number));
    if (sqlite3_step(s) != SQLITE_DONE) return archive_fault(Error{impl_->failure("pinning")});
    return Ok{};
  });
}

// One path's versions removed, inside drop_versions()'s transaction. The version that was
// the latest when the history was read goes only when it still is (else a version came
// after it, and its span now ends there: kept); a pinned one stays. The count of removed
// versions grows by those removed, and starts again from 0 when none is left (the next
// version is then number 1: the path's history begins again).
Done Catalog::Impl::drop(const DroppedVersions& dropped) {
  TRY_ASSIGN(const auto node, node_of(dropped.path));
  if (!node) return Ok{};
  TRY_ASSIGN(const std::uint64_t latest, latest_number(*node));
  std::uint64_t removed = 0;
  for (const auto number : dropped.numbers) {
    if (number == dropped.latest && latest != dropped.latest) continue;
    TRY_ASSIGN(auto s,
               statement("DELETE FROM versions WHERE node = ?1 AND number = ?2 AND NOT EXISTS "
                         "(SELECT 1 FROM pins WHERE node = ?1 AND number = ?2)"));
    sqlite3_bind_int64(s, 1, *node);
    sqlite3_bind_int64(s, 2, static_cast<sqlite3_int64>(number));
    if (sqlite3_step(s) != SQLITE_DONE) return archive_fault(Error{failure("removing a version")});
    removed += static_cast<std::uint64_t>(sqlite3_changes(db.handle()));
  }
  TRY_ASSIGN(auto count, statement("UPDATE nodes SET forgotten = CASE WHEN EXISTS (SELECT 1 FROM "
                                   "versions WHERE node = ?1) THEN forgotten + ?2 ELSE 0 END "
                                   "WHERE id = ?1"));
  sqlite3_bind_int64(count, 1, *node);
  sqlite3_bind_int64(count, 2, static_cast<sqlite3_int64>(removed));
  if (sqlite3_step(count) != SQLITE_DONE) {
    return archive_fault(Error{failure("counting removed versions")});
  }
  return Ok{};
}

Done Catalog::drop_versions(const std::vector<DroppedVersions>& dropped) {
  return impl_->in_transaction([&]() -> Done {
    for (const auto& one : dropped) TRY(impl_->drop(one));
    return Ok{};
  });
}

// One path's versions counted, and unless `dry_run` removed, its blobs condemned (as of the
// last collection begun: the next one removes those no version names) and their packs
// marked; inside purge()'s transaction.
Done Catalog::Impl::purge_node(std::int64_t node, bool dry_run, std::int64_t collection,
                               PurgeReport& report, std::set<std::int64_t>& packs) {
  TRY_ASSIGN(auto versions, statement(select_versions_sql(schema)));
  sqlite3_bind_int64(versions, 1, node);
  sqlite3_bind_int64(versions, 2, -1);
  std::vector<Version> history;
  int rc;
  while ((rc = sqlite3_step(versions)) == SQLITE_ROW) history.push_back(read_version(versions));
  if (rc != SQLITE_DONE) return archive_fault(Error{failure("reading a history")});
  if (history.empty()) return Ok{};
  ++report.paths;
  report.versions += history.size();
  for (const auto& v : history) {
    if (v.exists() && v.is_file()) report.content_bytes += v.size;
    for (const auto& id : v.chunks) {
      ++report.blobs;
      TRY_ASSIGN(auto pack, statement("SELECT pack FROM blobs WHERE id = ?1"));
      bind_bytes(pack, 1, digest_bytes(id));
      if (sqlite3_step(pack) == SQLITE_ROW) packs.insert(sqlite3_column_int64(pack, 0));
      if (dry_run) continue;
      TRY_ASSIGN(auto condemn, statement("UPDATE blobs SET condemned = ?2 WHERE id = ?1 AND "
                                         "condemned IS NULL"));
      bind_bytes(condemn, 1, digest_bytes(id));
      sqlite3_bind_int64(condemn, 2, collection);
      if (sqlite3_step(condemn) != SQLITE_DONE) return archive_fault(Error{failure("purging")});
      TRY_ASSIGN(auto shred, statement("INSERT OR IGNORE INTO shred(pack) SELECT pack FROM blobs "
                                       "WHERE id = ?1"));
      bind_bytes(shred, 1, digest_bytes(id));
      if (sqlite3_step(shred) != SQLITE_DONE) return archive_fault(Error{failure("purging")});
    }
  }
  if (dry_run) return Ok{};
  for (const char* sql :
       {"DELETE FROM versions WHERE node = ?1", "DELETE FROM pins WHERE node = ?1",
        "UPDATE nodes SET forgotten = 0 WHERE id = ?1"}) {
    TRY_ASSIGN(auto s, statement(sql));
    sqlite3_bind_int64(s, 1, node);
    if (sqlite3_step(s) != SQLITE_DONE) return archive_fault(Error{failure("purging")});
  }
  return Ok{};
}

Expected<PurgeReport> Catalog::purge(std::string_view path, bool dry_run) {
  if (impl_->schema < 4) return permanent("purge: the catalog is not upgraded yet (schema 4)");
  auto purge_all = [&]() -> Expected<PurgeReport> {
    PurgeReport report;
    TRY_ASSIGN(const auto top, impl_->node_of(path));
    if (!top) return report;
    std::vector<std::string> paths;
    TRY(impl_->walk(*top, std::string(path), true, false, paths));
    // Condemned as of the last collection begun, so that the next one may remove them.
    TRY_ASSIGN(auto last, impl_->statement("SELECT coalesce(max(id), 0) FROM collections"));
    if (sqlite3_step(last) != SQLITE_ROW) return archive_fault(Error{impl_->failure("purging")});
    const std::int64_t collection = sqlite3_column_int64(last, 0);
    std::set<std::int64_t> packs;
    for (const auto& p : paths) {
      TRY_ASSIGN(const auto node, impl_->node_of(p));
      if (node) TRY(impl_->purge_node(*node, dry_run, collection, report, packs));
    }
    report.packs = packs.size();
    return report;
  };
  return dry_run ? impl_->read(purge_all) : impl_->in_transaction(purge_all);
}

Expected<std::set<std::int64_t>> Catalog::shredded_packs() {
  std::set<std::int64_t> out;
  if (impl_->schema < 4) return out;
  TRY_ASSIGN(auto s, impl_->statement("SELECT pack FROM shred"));
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) out.insert(sqlite3_column_int64(s, 0));
  if (rc != SQLITE_DONE) return archive_fault(Error{impl_->failure("reading packs to rewrite")});
  return out;
}

Done Catalog::unshred(std::int64_t pack) {
  return impl_->in_transaction([&]() -> Done {
    TRY_ASSIGN(auto s, impl_->statement("DELETE FROM shred WHERE pack = ?1"));
    sqlite3_bind_int64(s, 1, pack);
    if (sqlite3_step(s) != SQLITE_DONE) return archive_fault(Error{impl_->failure("unmarking")});
    return Ok{};
  });
}

}  // namespace tw::archive
