// How a version and a blob's place are rows of format 2's catalog (catalog_rows.hpp).
#include "archive/format2/catalog_rows.hpp"

#include <sqlite3.h>

#include <string>
#include <string_view>

#include <fmt/format.h>

#include "archive/format2/sqlite.hpp"
#include "archive/sha256.hpp"

namespace tw::archive {

using sqlite::bind_optional;
using sqlite::column_bytes;

const char* version_columns(int schema) {
  return schema >= 3 ? "number, archived_at, op, size, sha256, mode, uid, gid, mtime, dev, ino, "
                       "link, moved_from, moved_to, chunks, read_after"
                     : "number, archived_at, op, size, sha256, mode, uid, gid, mtime, dev, ino, "
                       "link, moved_from, moved_to, chunks, NULL";
}

const char* select_versions_sql(int schema) {
  const auto sql = [](int s) {
    return fmt::format("SELECT {} FROM versions WHERE node = ?1 ORDER BY number DESC LIMIT ?2",
                       version_columns(s));
  };
  static const std::string before_3 = sql(2), from_3 = sql(3);
  return (schema >= 3 ? from_3 : before_3).c_str();
}

Version read_version(sqlite3_stmt* s) {
  // Columns: version_columns()
  Version v;
  v.number = static_cast<std::uint64_t>(sqlite3_column_int64(s, 0));
  v.archived_at_ns = sqlite3_column_int64(s, 1);
  v.op = parse_op(reinterpret_cast<const char*>(sqlite3_column_text(s, 2))).value_or(Op::Update);
  v.size = static_cast<std::uint64_t>(sqlite3_column_int64(s, 3));
  const std::string digest = column_bytes(s, 4);
  if (!digest.empty()) v.sha256 = digest_hex(digest);
  v.mode = static_cast<std::uint32_t>(sqlite3_column_int64(s, 5));
  v.uid = static_cast<std::uint32_t>(sqlite3_column_int64(s, 6));
  v.gid = static_cast<std::uint32_t>(sqlite3_column_int64(s, 7));
  v.mtime_ns = sqlite3_column_int64(s, 8);
  v.dev = static_cast<std::uint64_t>(sqlite3_column_int64(s, 9));
  v.ino = static_cast<std::uint64_t>(sqlite3_column_int64(s, 10));
  v.link_target = column_bytes(s, 11);
  v.moved_from = column_bytes(s, 12);
  v.moved_to = column_bytes(s, 13);
  const std::string chunks = column_bytes(s, 14);
  for (std::size_t at = 0; at + 32 <= chunks.size(); at += 32) {
    v.chunks.push_back(digest_hex(std::string_view(chunks).substr(at, 32)));
  }
  // A file of one chunk, the content itself, is stored without its list (see bind_version).
  if (chunks.empty() && v.exists() && v.is_file() && v.size > 0) v.chunks.push_back(v.sha256);
  if (sqlite3_column_count(s) > 15) v.read_after = sqlite3_column_int64(s, 15);
  return v;
}

void bind_version(sqlite3_stmt* s, std::int64_t node, const Version& v) {
  // The list of blobs, left out when it is just the content's own digest (a file of one
  // chunk: most files), which the reader puts back.
  std::string chunks;
  if (!(v.chunks.size() == 1 && v.chunks.front() == v.sha256)) {
    for (const auto& id : v.chunks) chunks += digest_bytes(id);
  }
  sqlite3_bind_int64(s, 1, node);
  sqlite3_bind_int64(s, 2, static_cast<sqlite3_int64>(v.number));
  sqlite3_bind_int64(s, 3, v.archived_at_ns);
  sqlite::bind_text(s, 4, to_string(v.op));
  sqlite3_bind_int64(s, 5, static_cast<sqlite3_int64>(v.size));
  bind_optional(s, 6, v.sha256.empty() ? std::string() : digest_bytes(v.sha256));
  sqlite3_bind_int64(s, 7, v.mode);
  sqlite3_bind_int64(s, 8, v.uid);
  sqlite3_bind_int64(s, 9, v.gid);
  sqlite3_bind_int64(s, 10, v.mtime_ns);
  sqlite3_bind_int64(s, 11, static_cast<sqlite3_int64>(v.dev));
  sqlite3_bind_int64(s, 12, static_cast<sqlite3_int64>(v.ino));
  bind_optional(s, 13, v.link_target);
  bind_optional(s, 14, v.moved_from);
  bind_optional(s, 15, v.moved_to);
  bind_optional(s, 16, chunks);
  if (v.read_after > 0) sqlite3_bind_int64(s, 17, v.read_after);  // else NULL
}

BlobRef read_ref(sqlite3_stmt* s, int first) {
  return BlobRef{reinterpret_cast<const char*>(sqlite3_column_text(s, first)),
                 static_cast<std::uint64_t>(sqlite3_column_int64(s, first + 1)),
                 static_cast<std::uint64_t>(sqlite3_column_int64(s, first + 2)),
                 static_cast<std::uint64_t>(sqlite3_column_int64(s, first + 3))};
}

}  // namespace tw::archive
