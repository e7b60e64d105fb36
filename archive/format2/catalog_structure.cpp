// The tree of format 2's catalog (catalog.hpp): the paths beneath a directory, and the
// parts of the tree that no path reaches (FORMAT.md, "Verify"): rows whose name cannot be
// a file's, rows whose parent (or versions whose node) names no row, rows with no parent
// besides the root, and loops of parents. Each is found by queries over the index by parent
// (a walk from the root in SQL, then the rows it did not reach), never by holding the tree
// in memory: what is held is the damage found.
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

// More parents than a path can have components: a loop.
constexpr std::size_t kMaxDepth = 4096;

// Whether the name of row `n` can be a path component, in SQL: bytes (a look-up by path
// compares bytes, so it never finds a name stored as text), not empty, not "." or "..", no
// '/' and no NUL. Schema 1 keeps whole paths, not names: nothing to check.
std::string name_ok(int schema) {
  if (schema == 1) return "1";
  return "(typeof(n.name) = 'blob' AND length(n.name) > 0 AND n.name NOT IN (x'2e', x'2e2e') "
         "AND instr(n.name, x'2f') = 0 AND instr(n.name, x'00') = 0)";
}

// The rows beneath row ?1, in the columns Tree::beneath reads.
std::string beneath_sql(int schema, bool with_history) {
  const char* archived = with_history ? "EXISTS (SELECT 1 FROM versions WHERE node = n.id)" : "1";
  if (schema == 1) {
    return fmt::format(
        "SELECT n.path, n.id, {}, 1, 0 FROM nodes n WHERE n.parent = ?1 ORDER BY n.path", archived);
  }
  return fmt::format(
      "SELECT n.name, n.id, {}, {}, typeof(n.name) = 'text' FROM nodes n WHERE n.parent = ?1 "
      "ORDER BY n.name",
      archived, name_ok(schema));
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

// A row directly beneath a node, as a walk sees it.
struct Row {
  std::string path;  // its parent's path joined with its name (schema 1: the path it keeps)
  std::string name;  // raw
  std::int64_t id = 0;
  bool archived = true;  // it has a history (when asked; else true)
  bool ok = true;        // its name can be a file's
  bool text = false;     // its name is stored as text
};

// The tree as one catalog connection reads it, in the catalog's schema; `root` is the row
// of "/" (none in a catalog without rows).
class Tree {
 public:
  Tree(sqlite::Database& db, int schema, std::optional<std::int64_t> root)
      : db_(db),
        schema_(schema),
        root_(root),
        beneath_sql_{beneath_sql(schema, false), beneath_sql(schema, true)} {}

  // The rows directly beneath row `id` (at `path`), sorted by name.
  Expected<std::vector<Row>> beneath(std::int64_t id, std::string_view path, bool with_history) {
    TRY_ASSIGN(auto s, db_.statement(beneath_sql_[with_history ? 1 : 0]));
    sqlite3_bind_int64(*s, 1, id);
    std::vector<Row> out;
    int rc;
    while ((rc = sqlite3_step(*s)) == SQLITE_ROW) {
      std::string first = column_bytes(*s, 0);
      Row row;
      row.path = schema_ == 1 ? first : join_path(path, first);
      row.name = schema_ == 1 ? base_name(first) : std::move(first);
      row.id = sqlite3_column_int64(*s, 1);
      row.archived = sqlite3_column_int(*s, 2) != 0;
      row.ok = sqlite3_column_int(*s, 3) != 0;
      row.text = sqlite3_column_int(*s, 4) != 0;
      out.push_back(std::move(row));
    }
    if (rc != SQLITE_DONE) return archive_fault(Error{db_.failure("listing paths")});
    return out;
  }

  // `path` (row `id`) and every path beneath it, depth first; with `archived_only`, those
  // with a history only. A row whose name cannot be a file's is left out with all beneath
  // it, and given to `bad` (optional). Not sorted: a name may sort before its parent's '/'.
  Done walk(std::int64_t id, const std::string& path, bool archived, bool archived_only,
            std::vector<std::string>& out, std::vector<LostPart>* bad) {
    if (archived || !archived_only) out.push_back(path);
    TRY_ASSIGN(auto rows, beneath(id, path, archived_only));
    for (auto& row : rows) {
      if (row.ok) {
        TRY(walk(row.id, row.path, row.archived, archived_only, out, bad));
      } else if (bad != nullptr) {
        bad->push_back(bad_name(row.id, path, std::move(row.name), row.text));
      }
    }
    return Ok{};
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

  // The rows whose name cannot be a file's while their parents' names reach the root (those
  // beneath a lost part are in it).
  Done bad_names(std::vector<LostPart>& parts) {
    if (schema_ == 1) return Ok{};
    std::vector<std::pair<std::int64_t, LostPart>> found;  // with the parent's id
    {
      TRY_ASSIGN(auto s, db_.statement(fmt::format(
                             "SELECT n.id, n.parent, n.name, typeof(n.name) = 'text' FROM nodes "
                             "n WHERE n.parent IS NOT NULL AND NOT {}",
                             name_ok(schema_))));
      int rc;
      while ((rc = sqlite3_step(*s)) == SQLITE_ROW) {
        found.emplace_back(sqlite3_column_int64(*s, 1),
                           bad_name(sqlite3_column_int64(*s, 0), std::string(), column_bytes(*s, 2),
                                    sqlite3_column_int(*s, 3) != 0));
      }
      if (rc != SQLITE_DONE) return archive_fault(Error{db_.failure("reading names")});
    }
    for (auto& [parent_id, part] : found) {
      TRY_ASSIGN(auto parent, path_of(parent_id));
      if (!parent) continue;
      part.parent = std::move(*parent);
      parts.push_back(std::move(part));
    }
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

  // The path of row `id` when its parents reach the root by names that can be files', else
  // none. One look-up per component.
  Expected<std::optional<std::string>> path_of(std::int64_t id) {
    const std::string sql =
        fmt::format("SELECT n.parent, n.name, {} FROM nodes n WHERE n.id = ?1", name_ok(schema_));
    std::vector<std::string> names;
    while (!root_ || id != *root_) {
      if (names.size() >= kMaxDepth) return std::optional<std::string>();  // a loop
      TRY_ASSIGN(auto s, db_.statement(sql));
      sqlite3_bind_int64(*s, 1, id);
      const int rc = sqlite3_step(*s);
      if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        return archive_fault(Error{db_.failure("reading the tree")});
      }
      if (rc == SQLITE_DONE || sqlite3_column_type(*s, 0) == SQLITE_NULL ||
          sqlite3_column_int(*s, 2) == 0) {
        return std::optional<std::string>();
      }
      names.push_back(column_bytes(*s, 1));
      id = sqlite3_column_int64(*s, 0);
    }
    std::string path = "/";
    for (auto it = names.rbegin(); it != names.rend(); ++it) path = join_path(path, *it);
    return std::optional<std::string>(std::move(path));
  }

  sqlite::Database& db_;
  int schema_;
  std::optional<std::int64_t> root_;
  std::string beneath_sql_[2];  // [with_history]: a walk lists every row with one of them
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
    TRY_ASSIGN(auto rows, tree.beneath(*node, dir, false));
    for (auto& row : rows) {
      if (row.ok) out.push_back(std::move(row.path));
    }
    return out;
  });
}

// `dir`'s subtree (the whole tree from "/"), sorted by path; `archived_only`: the paths
// with a history.
Expected<std::vector<std::string>> Catalog::subtree(std::string_view dir, bool archived_only,
                                                    std::vector<LostPart>* bad) const {
  return impl_->read([&]() -> Expected<std::vector<std::string>> {
    std::vector<std::string> out;
    if (bad != nullptr) bad->clear();  // read again when the schema changed
    TRY_ASSIGN(const std::optional<std::int64_t> node, impl_->node_of(dir));
    if (!node) return out;
    bool archived = true;
    if (archived_only) {
      TRY_ASSIGN(auto s,
                 impl_->statement("SELECT EXISTS (SELECT 1 FROM versions WHERE node = ?1)"));
      sqlite3_bind_int64(*s, 1, *node);
      if (sqlite3_step(*s) != SQLITE_ROW) {
        return archive_fault(Error{impl_->failure("reading a history")});
      }
      archived = sqlite3_column_int(*s, 0) != 0;
    }
    Tree tree(impl_->db, impl_->schema, std::nullopt);
    TRY(tree.walk(*node, std::string(dir), archived, archived_only, out, bad));
    if (bad != nullptr) {
      for (auto& part : *bad) TRY(tree.measure(part, nullptr));
    }
    std::sort(out.begin(), out.end());
    return out;
  });
}

Expected<std::vector<std::string>> Catalog::archived_paths() const {
  return subtree("/", true, nullptr);
}

Expected<std::vector<std::string>> Catalog::paths_within(std::string_view dir,
                                                         std::vector<LostPart>* bad) const {
  return subtree(dir, false, bad);
}

Expected<std::vector<LostPart>> Catalog::lost_parts(const Each& each) const {
  return lost(true, &each);
}

Expected<std::vector<LostPart>> Catalog::lost_rows() const { return lost(false, nullptr); }

// The lost parts, from one snapshot (every query sees the tree as one moment left it):
// `whole`, every kind (verify); else the lost rows and the parentless rows (restore).
Expected<std::vector<LostPart>> Catalog::lost(bool whole, const Each* each) const {
  return impl_->read([&]() -> Expected<std::vector<LostPart>> {
    TRY(impl_->db.exec("BEGIN"));
    Defer end([&] { (void)impl_->db.exec("COMMIT"); });
    TRY_ASSIGN(const std::optional<std::int64_t> root, impl_->node_of("/"));
    Tree tree(impl_->db, impl_->schema, root);
    std::vector<LostPart> parts;
    if (whole) TRY(tree.bad_names(parts));
    TRY(tree.lost_rows(parts));
    TRY(tree.parentless(parts));
    if (whole) TRY(tree.loops(parts));
    for (auto& part : parts) TRY(tree.measure(part, each));
    return parts;
  });
}

}  // namespace tw::archive
