// The schema of format 2's catalog (catalog.hpp; FORMAT.md, "Format 2"): its tables as this
// release writes them (PRAGMA user_version 6), made by the first writer of a new archive,
// and the upgrades of the schemas earlier releases wrote (1 to 5), made in place by the
// first writer that opens one. A reader reads any of them as it is. Internal to the archive
// library.
#pragma once

#include "archive/expected.hpp"
#include "archive/format2/sqlite.hpp"

namespace tw::archive {

// The schema version this release writes, and the newest it reads.
inline constexpr int kCatalogSchema = 6;

// Creates the schema in a writable catalog that has none yet, or upgrades an older one, in
// one transaction: a reader sees all of it or none. Refuses a schema newer than
// kCatalogSchema. The catalog's prepared statements are forgotten after it.
Done set_up_schema(sqlite::Database& db);

// What a reader is told of a catalog a writer is making this moment (the file made but not
// its tables, or the archive's FORMAT written but not the file yet).
Fault not_set_up(const std::string& file);

// The schema version of a catalog opened for reading: refused when it is newer than this
// release reads, or not set up yet (a writer has created the file but not its tables).
Expected<int> readable_schema(sqlite::Database& db);

}  // namespace tw::archive
