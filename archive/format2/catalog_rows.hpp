// How a version and a blob's place are rows of format 2's catalog (the tables of
// catalog_schema.cpp): digests as their 32 bytes, a file of one chunk without its list of
// blobs (the reader puts back the content's own digest), empty texts as NULL. Internal to
// the archive library.
#pragma once

#include <cstdint>

#include "archive/format2/pack.hpp"
#include "archive/types.hpp"

struct sqlite3_stmt;

namespace tw::archive {

// The columns of `versions` that read_version() reads, in its order (a schema before 3 has
// no read_after: NULL in its place), for a query that selects more after them.
const char* version_columns(int schema);
// A path's versions, newest first (?1 its node, ?2 how many; -1: all), in those columns.
const char* select_versions_sql(int schema);
Version read_version(sqlite3_stmt* s);

// The insert of one version (?1 its node), and the bindings of its other columns.
inline constexpr const char* kInsertVersionSql =
    "INSERT INTO versions(node, number, archived_at, op, size, sha256, mode, uid, gid, "
    "mtime, dev, ino, link, moved_from, moved_to, chunks, read_after) VALUES (?1, ?2, ?3, "
    "?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)";
void bind_version(sqlite3_stmt* s, std::int64_t node, const Version& v);

// A blob's place from a row of (pack name, offset, stored, raw) from column `first`.
BlobRef read_ref(sqlite3_stmt* s, int first);

}  // namespace tw::archive
