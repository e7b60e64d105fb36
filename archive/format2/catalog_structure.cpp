// The tree of format 2's catalog (catalog.hpp): the paths beneath a directory, and the
// parts of the tree that no path reaches (FORMAT.md, "Verify"): rows whose name cannot be
// a file's, rows whose parent (or versions whose node) names no row, rows with no parent
// besides the root, and loops of parents. A walk is one recursive query down the index by
// parent, which stops at a name that cannot be a file's. Verify's walk from the root
// (archived_paths) counts what it reached: when that is every row and every history's row,
// and nothing changed since, no part is lost but the names it met. Else the other kinds are
// found by their own queries (a walk from the root in SQL, then the rows it did not reach),
// never by holding the tree in memory: what is held is the damage found.
#include <sqlite3.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "archive/format2/catalog_impl.hpp"

namespace tw::archive {
namespace {

using Each = std::function<void(const std::string&, const Version&)>;

// Whether the name of row `n` can be a path component, in SQL: bytes (a look-up by path
// compares bytes, so it never finds a name stored as text), not empty, not "." or "..", no
// '/' and no NUL. Schema 1 keeps whole paths, not names: nothing to check.
std::string name_ok(int schema) {
  if (schema == 1) return "1";
  return "(typeof(n.name) = 'blob' AND length(n.name) > 0 AND n.name NOT IN (x'2e', x'2e2e') "
         "AND instr(n.name, x'2f') = 0 AND instr(n.name, x'00') = 0)";
}

// The rows beneath row ?1, in the columns Tree::beneath reads.
std::string beneath_sql(int schema) {
  if (schema == 1) return "SELECT n.path, n.id, 1 FROM nodes n WHERE n.parent = ?1 ORDER BY n.path";
  return fmt::format("SELECT n.name, n.id, {} FROM nodes n WHERE n.parent = ?1 ORDER BY n.name",
                     name_ok(schema));
}

// A walk down from row ?1 (whose path is ?2; "" for the root, so that its children are
// "/name"), in the columns Tree::walk reads: every row it reaches, with its path and
// whether its name can be a file's; it goes on beneath those only. A row with a name that
// cannot be a file's gets its raw name and whether that is text (looked up for those rows
// only, not carried down the walk). It never comes back to row ?1, the only way a walk down
// could meet a loop of parents, so it always ends. Schema 1 keeps whole paths.
std::string walk_sql(int schema) {
  if (schema == 1) {
    return "WITH RECURSIVE walk(id, path) AS (SELECT ?1, ?2 UNION ALL SELECT n.id, n.path FROM "
           "nodes n JOIN walk w ON n.parent = w.id WHERE n.id IS NOT ?1) "
           "SELECT id, path, 1, NULL, 0 FROM walk";
  }
  return fmt::format(
      "WITH RECURSIVE walk(id, path, ok) AS (SELECT ?1, ?2, 1 UNION ALL SELECT n.id, "
      "w.path || x'2f' || n.name, {} FROM nodes n JOIN walk w ON n.parent = w.id WHERE w.ok "
      "AND n.id IS NOT ?1) "
      "SELECT id, path, ok, CASE WHEN ok THEN NULL ELSE (SELECT name FROM nodes WHERE id = "
      "w.id) END, CASE WHEN ok THEN 0 ELSE (SELECT typeof(name) = 'text' FROM nodes WHERE id = "
      "w.id) END FROM walk w",
      name_ok(schema));
}

// Rows whose parent names no row, and rows with no parent that are not the root (?1).
constexpr const char* kLostTops =
    "(n.parent IS NULL AND n.id IS NOT ?1) OR (n.parent IS NOT NULL AND NOT EXISTS "
    "(SELECT 1 FROM nodes p WHERE p.id = n.parent))";

// The paths of a part are shown from the part, whose own path is lost: "<node 12>/sub/y".
std::string part_root(std::int64_t node) { return fmt::format("<node {}>", node); }

LostPart bad_name(std::int64_t node, std::string parent, std::string name, bool text) {
  LostPart part;
  part.kind = LostPart::Kind::BadName;
  part.node = node;
  part.parent = std::move(parent);
  part.name = std::move(name);
  part.text = text;
  return part;
}

// A row directly beneath a node, as a listing sees it.
struct Row {
  std::string path;  // its parent's path joined with its name (schema 1: the path it keeps)
  std::int64_t id = 0;
  bool ok = true;  // its name can be a file's
};

// How many rows a walk reached (with a name that cannot be a file's too), and how many of
// them have a history (when asked).
struct Walked {
  std::uint64_t rows = 0;
  std::uint64_t histories = 0;
};

// Where a row the walk reached at `path` lies: `path` without "/" and its `name`.
std::string parent_of(const std::string& path, const std::string& name) {
  if (path.size() <= name.size() + 1) return "/";
  return path.substr(0, path.size() - name.size() - 1);
}

// The tree as one catalog connection reads it, in the catalog's schema; `root` is the row
// of "/" (none in a catalog without rows).
class Tree {
 public:
  Tree(sqlite::Database& db, int schema, std::optional<std::int64_t> root)
      : db_(db),
        schema_(schema),
        root_(root),
        beneath_sql_(beneath_sql(schema)),
        walk_sql_(walk_sql(schema)) {}

  // The rows directly beneath row `id` (at `path`), sorted by name.
  Expected<std::vector<Row>> beneath(std::int64_t id, std::string_view path) {
    TRY_ASSIGN(auto s, db_.statement(beneath_sql_));
    sqlite3_bind_int64(*s, 1, id);
    std::vector<Row> out;
    int rc;
    while ((rc = sqlite3_step(*s)) == SQLITE_ROW) {
      const std::string first = column_bytes(*s, 0);
      out.push_back({schema_ == 1 ? first : join_path(path, first), sqlite3_column_int64(*s, 1),
                     sqlite3_column_int(*s, 2) != 0});
    }
    if (rc != SQLITE_DONE) return archive_fault(Error{db_.failure("listing paths")});
    return out;
  }

  // `path` (row `id`) and every path beneath it, from one query; with `histories` (the
  // sorted ids of the rows with a history), those with a history only. A row whose name
  // cannot be a file's is left out with all beneath it, and given to `bad` (optional). Not
  // sorted.
  Expected<Walked> walk(std::int64_t id, const std::string& path,
                        const std::vector<std::int64_t>* histories, std::vector<std::string>& out,
                        std::vector<LostPart>* bad) {
    TRY_ASSIGN(auto s, db_.statement(walk_sql_));
    sqlite3_bind_int64(*s, 1, id);
    // (The literal "" binds an empty blob; a view without data would bind NULL.)
    bind_bytes(*s, 2, schema_ != 1 && path == "/" ? std::string_view("") : std::string_view(path));
    Walked walked;
    int rc;
    while ((rc = sqlite3_step(*s)) == SQLITE_ROW) {
      const std::int64_t row = sqlite3_column_int64(*s, 0);
      ++walked.rows;
      const bool archived =
          histories == nullptr || std::binary_search(histories->begin(), histories->end(), row);
      if (histories != nullptr && archived) ++walked.histories;
      if (sqlite3_column_int(*s, 2) != 0) {
        if (archived) out.push_back(row == id ? path : column_bytes(*s, 1));
      } else if (bad != nullptr) {
        std::string name = column_bytes(*s, 3);
        std::string parent = parent_of(column_bytes(*s, 1), name);
        bad->push_back(
            bad_name(row, std::move(parent), std::move(name), sqlite3_column_int(*s, 4) != 0));
      }
    }
    if (rc != SQLITE_DONE) return archive_fault(Error{db_.failure("listing paths")});
    return walked;
  }

  // The ids of the rows with a history, sorted: one scan of the versions.
  Expected<std::vector<std::int64_t>> histories() {
    return ids("SELECT DISTINCT node FROM versions ORDER BY node");
  }

  // How many rows the tree has: one count of the index by parent.
  Expected<std::uint64_t> rows() {
    TRY_ASSIGN(const auto count, ids("SELECT count(*) FROM nodes"));
    return static_cast<std::uint64_t>(count.at(0));
  }

  // The whole tree seen by one walk from the root: `out` gets the paths with a history (not
  // sorted); the rows it met whose name cannot be a file's are the parts it returns. The
  // rows with a history are read first and the rows counted last, so a walk inside one
  // snapshot knows whether it reached them all.
  Expected<TreeSeen> look(std::vector<std::string>& out) {
    TRY_ASSIGN(const std::vector<std::int64_t> with_history, histories());
    TreeSeen seen;
    Walked walked;
    if (root_) {
      TRY_ASSIGN(walked, walk(*root_, "/", &with_history, out, &seen.bad));
    }
    TRY_ASSIGN(const std::uint64_t all, rows());
    seen.whole = all == walked.rows && walked.histories == with_history.size();
    return seen;
  }

  // Counts the paths with a history at and beneath `part` and finds the first of them;
  // gives each of their versions to `each` (optional). One walk down from the part in SQL
  // (stopping where a loop comes back to it), joined with the versions.
  Done measure(LostPart& part, const Each* each) {
    const std::string sql = fmt::format(
        "WITH RECURSIVE below(id, path) AS (SELECT ?1, {} UNION ALL SELECT n.id, {} "
        "FROM nodes n JOIN below b ON n.parent = b.id WHERE n.id IS NOT ?1) "
        "SELECT {}, b.path, b.id FROM below b CROSS JOIN versions v ON v.node = b.id",
        schema_ == 1 ? "coalesce((SELECT path FROM nodes WHERE id = ?1), ?2)" : "?2",
        schema_ == 1 ? "n.path" : "b.path || x'2f' || n.name", version_columns(schema_));
    TRY_ASSIGN(auto s, db_.statement(sql));
    sqlite3_bind_int64(*s, 1, part.node);
    bind_bytes(*s, 2, part_root(part.node));
    part.archived = 0;
    std::optional<std::int64_t> last;
    int rc;
    while ((rc = sqlite3_step(*s)) == SQLITE_ROW) {
      const std::string path = column_bytes(*s, 16);
      const std::int64_t id = sqlite3_column_int64(*s, 17);
      if (last != id) {
        last = id;
        if (++part.archived == 1) part.first = path;
      }
      if (each != nullptr) (*each)(path, read_version(*s));
    }
    if (rc != SQLITE_DONE) return archive_fault(Error{db_.failure("reading a lost part")});
    return Ok{};
  }

  // The ids that rows name as their parent, or versions as their node, with no row of
  // their own: one scan of the index by parent, one of the versions.
  Done lost_rows(std::vector<LostPart>& parts) {
    std::map<std::int64_t, bool> lost;  // id -> rows name it as their parent
    TRY_ASSIGN(auto parents, ids("SELECT DISTINCT n.parent FROM nodes n WHERE n.parent IS NOT "
                                 "NULL AND NOT EXISTS (SELECT 1 FROM nodes p WHERE p.id = "
                                 "n.parent)"));
    for (const auto id : parents) lost[id] = true;
    TRY_ASSIGN(auto nodes, ids("SELECT DISTINCT v.node FROM versions v WHERE NOT EXISTS "
                               "(SELECT 1 FROM nodes n WHERE n.id = v.node)"));
    for (const auto id : nodes) lost.emplace(id, false);
    for (const auto& [id, has_rows] : lost) {
      LostPart part;
      part.node = id;
      part.has_rows = has_rows;
      parts.push_back(std::move(part));
    }
    return Ok{};
  }

  // The rows with no parent that are not the root.
  Done parentless(std::vector<LostPart>& parts) {
    TRY_ASSIGN(auto s, db_.statement(fmt::format(
                           "SELECT n.id, n.{} FROM nodes n WHERE n.parent IS NULL AND n.id IS "
                           "NOT ?1",
                           schema_ == 1 ? "path" : "name")));
    bind_root(*s);
    int rc;
    while ((rc = sqlite3_step(*s)) == SQLITE_ROW) {
      LostPart part;
      part.kind = LostPart::Kind::NoParent;
      part.node = sqlite3_column_int64(*s, 0);
      part.name = column_bytes(*s, 1);
      parts.push_back(std::move(part));
    }
    if (rc != SQLITE_DONE) return archive_fault(Error{db_.failure("reading the tree")});
    return Ok{};
  }

  Done loops(std::vector<LostPart>& parts);

 private:
  void bind_root(sqlite3_stmt* s) const {
    if (root_) sqlite3_bind_int64(s, 1, *root_);
  }

  // The ids one query of one column returns (?1: the root).
  Expected<std::vector<std::int64_t>> ids(const std::string& sql) {
    TRY_ASSIGN(auto s, db_.statement(sql));
    bind_root(*s);
    std::vector<std::int64_t> out;
    int rc;
    while ((rc = sqlite3_step(*s)) == SQLITE_ROW) out.push_back(sqlite3_column_int64(*s, 0));
    if (rc != SQLITE_DONE) return archive_fault(Error{db_.failure("reading the tree")});
    return out;
  }

  sqlite::Database& db_;
  int schema_;
  std::optional<std::int64_t> root_;
  std::string beneath_sql_;
  std::string walk_sql_;
};

// The loops of parents: the rows that neither the walk from the root reaches nor lie beneath
// another lost part (one query), each put with the least id on the loop above it.
Done Tree::loops(std::vector<LostPart>& parts) {
  const std::string ok = name_ok(schema_);
  const std::string sql = fmt::format(
      "WITH RECURSIVE reached(id) AS (SELECT id FROM nodes WHERE id = ?1 UNION ALL SELECT n.id "
      "FROM nodes n JOIN reached r ON n.parent = r.id WHERE {0}), "
      "parts(id) AS (SELECT n.id FROM nodes n WHERE {1} OR (NOT {0} AND n.parent IN (SELECT id "
      "FROM reached)) UNION ALL SELECT n.id FROM nodes n JOIN parts p ON n.parent = p.id) "
      "SELECT id, parent FROM nodes WHERE id NOT IN (SELECT id FROM reached) AND id NOT IN "
      "(SELECT id FROM parts)",
      ok, kLostTops);
  std::map<std::int64_t, std::int64_t> up;  // the rows left: id -> parent
  {
    TRY_ASSIGN(auto s, db_.statement(sql));
    bind_root(*s);
    int rc;
    while ((rc = sqlite3_step(*s)) == SQLITE_ROW) {
      up[sqlite3_column_int64(*s, 0)] = sqlite3_column_int64(*s, 1);
    }
    if (rc != SQLITE_DONE) return archive_fault(Error{db_.failure("reading the tree")});
  }
  // Each row left goes up until it meets a row already placed or comes back to one on its
  // own trail: the loop, named by its least id.
  std::map<std::int64_t, std::int64_t> loop_of;
  for (const auto& row : up) {
    std::vector<std::int64_t> trail;
    std::map<std::int64_t, std::size_t> on_trail;
    std::int64_t at = row.first;
    std::int64_t loop = at;
    while (true) {
      if (auto placed = loop_of.find(at); placed != loop_of.end()) {
        loop = placed->second;
        break;
      }
      if (auto seen = on_trail.find(at); seen != on_trail.end()) {
        loop = *std::min_element(trail.begin() + static_cast<std::ptrdiff_t>(seen->second),
                                 trail.end());
        break;
      }
      on_trail[at] = trail.size();
      trail.push_back(at);
      const auto parent = up.find(at);
      if (parent == up.end()) break;  // (every row left hangs beneath a loop)
      at = parent->second;
    }
    for (const auto id : trail) loop_of[id] = loop;
  }
  std::set<std::int64_t> loops;
  for (const auto& [id, loop] : loop_of) loops.insert(loop);
  for (const auto id : loops) {
    LostPart part;
    part.kind = LostPart::Kind::Loop;
    part.node = id;
    parts.push_back(std::move(part));
  }
  return Ok{};
}

// Which state of the catalog this connection reads (in a transaction: its snapshot's).
Expected<TreeSeen> seen_now(sqlite::Database& db) {
  TRY_ASSIGN(auto s, db.statement("PRAGMA data_version"));
  if (sqlite3_step(*s) != SQLITE_ROW) return archive_fault(Error{db.failure("reading the tree")});
  TreeSeen seen;
  seen.data_version = sqlite3_column_int64(*s, 0);
  seen.own_changes = sqlite3_total_changes64(db.handle());
  return seen;
}

std::string archived_text(std::uint64_t n) {
  return fmt::format("{} archived path{}", n, n == 1 ? "" : "s");
}

}  // namespace

std::string describe(const LostPart& part) {
  std::string what;
  switch (part.kind) {
    case LostPart::Kind::BadName:
      what = fmt::format("{} holds an entry named \"{}\" (node {}), {}", shown_path(part.parent),
                         shown_path(part.name), part.node,
                         part.text ? "stored as text where names are bytes: no look-up by path "
                                     "finds it"
                                   : "which cannot be a file name");
      break;
    case LostPart::Kind::LostRow:
      what = fmt::format("lost {}node: node {} has no row", part.has_rows ? "directory " : "",
                         part.node);
      break;
    case LostPart::Kind::NoParent:
      what = fmt::format(
          "lost directory node: node {} (named \"{}\") has no parent and is not the root",
          part.node, shown_path(part.name));
      break;
    case LostPart::Kind::Loop:
      what = fmt::format(
          "lost directory node: node {} is its own ancestor (its parents loop without reaching "
          "the root)",
          part.node);
      break;
  }
  if (part.archived == 0) return what + "; nothing archived lies at or beneath it";
  return fmt::format("{}; {} at or beneath it cannot be listed or restored (first: {})", what,
                     archived_text(part.archived), shown_path(part.first));
}

Expected<std::vector<std::string>> Catalog::children(std::string_view dir) const {
  return impl_->read([&]() -> Expected<std::vector<std::string>> {
    TRY_ASSIGN(const std::optional<std::int64_t> node, impl_->node_of(dir));
    std::vector<std::string> out;
    if (!node) return out;
    Tree tree(impl_->db, impl_->schema, std::nullopt);
    TRY_ASSIGN(auto rows, tree.beneath(*node, dir));
    for (auto& row : rows) {
      if (row.ok) out.push_back(std::move(row.path));
    }
    return out;
  });
}

Expected<std::vector<std::string>> Catalog::paths_within(std::string_view dir,
                                                         std::vector<LostPart>* bad) const {
  return impl_->read([&]() -> Expected<std::vector<std::string>> {
    std::vector<std::string> out;
    if (bad != nullptr) bad->clear();  // read again when the schema changed
    TRY_ASSIGN(const std::optional<std::int64_t> node, impl_->node_of(dir));
    if (!node) return out;
    Tree tree(impl_->db, impl_->schema, std::nullopt);
    TRY(tree.walk(*node, std::string(dir), nullptr, out, bad));
    if (bad != nullptr) {
      for (auto& part : *bad) TRY(tree.measure(part, nullptr));
    }
    std::sort(out.begin(), out.end());
    return out;
  });
}

// From one snapshot: the rows with a history, one walk down from the root, and how many rows
// there are. What the walk saw is kept for verify's look for lost parts (lost()).
Expected<std::vector<std::string>> Catalog::archived_paths() const {
  const auto walk = [&]() -> Expected<std::vector<std::string>> {
    TRY_ASSIGN(const TreeSeen now, seen_now(impl_->db));
    TRY_ASSIGN(const std::optional<std::int64_t> root, impl_->node_of("/"));
    Tree tree(impl_->db, impl_->schema, root);
    std::vector<std::string> out;
    TRY_ASSIGN(TreeSeen seen, tree.look(out));
    seen.data_version = now.data_version;
    seen.own_changes = now.own_changes;
    impl_->tree_seen = std::move(seen);
    std::sort(out.begin(), out.end());
    return out;
  };
  return impl_->read([&] {
    impl_->tree_seen.reset();
    return impl_->in_snapshot(walk);
  });
}

Expected<std::vector<LostPart>> Catalog::lost_parts(const Each& each) const {
  return lost(true, &each);
}

Expected<std::vector<LostPart>> Catalog::lost_rows() const { return lost(false, nullptr); }

// The lost parts, from one snapshot (every query sees the tree as one moment left it):
// `whole`, every kind (verify); else the lost rows and the parentless rows (restore).
Expected<std::vector<LostPart>> Catalog::lost(bool whole, const Each* each) const {
  return impl_->read([&]() -> Expected<std::vector<LostPart>> {
    TRY(impl_->db.run("BEGIN"));
    Defer end([&] { (void)impl_->db.run("COMMIT"); });
    TRY_ASSIGN(const TreeSeen now, seen_now(impl_->db));
    TRY_ASSIGN(const std::optional<std::int64_t> root, impl_->node_of("/"));
    Tree tree(impl_->db, impl_->schema, root);
    std::vector<LostPart> parts;
    bool reached_all = false;
    if (whole) {
      // The walk verify made before (archived_paths) while the catalog is as it saw it, else
      // one in this snapshot. When it reached every row and every history's row, nothing is
      // lost but the names it met, and no query looks further.
      const std::optional<TreeSeen>& last = impl_->tree_seen;
      TreeSeen seen;
      if (last && last->data_version == now.data_version && last->own_changes == now.own_changes) {
        seen = *last;
      } else {
        std::vector<std::string> paths;
        TRY_ASSIGN(seen, tree.look(paths));
      }
      parts = std::move(seen.bad);
      reached_all = seen.whole;
    }
    if (!reached_all) {
      TRY(tree.lost_rows(parts));
      TRY(tree.parentless(parts));
      if (whole) TRY(tree.loops(parts));
    }
    for (auto& part : parts) TRY(tree.measure(part, each));
    return parts;
  });
}

}  // namespace tw::archive
