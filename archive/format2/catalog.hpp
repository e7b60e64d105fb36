// The catalog of archive format 2 (FORMAT.md, "Format 2"): every path's history, the tree
// of archived paths, and where each blob lives, in one SQLite database (catalog.db) in WAL
// mode. A version is one row appended under (path, number), so the cost of one more
// version does not grow with the history; writes are staged in a CatalogBatch and
// committed in one short transaction (group commit), durable once the journal is synced.
// Several processes may read and write one catalog at once. Internal to the archive
// library; one Catalog object belongs to one thread at a time. Beneath it: the SQLite layer
// (sqlite.hpp), the schema and its upgrades (catalog_schema.hpp), the staged writes
// (catalog_batch.hpp), how a version is a row (catalog_rows.hpp) and the ids looked up
// (id_memo.hpp).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "archive/expected.hpp"
#include "archive/format2/catalog_batch.hpp"
#include "archive/format2/pack.hpp"
#include "archive/types.hpp"
#include "common/result.hpp"

namespace tw::archive {

class Catalog {
 public:
  // Opens (ReadWrite: creates when absent) the catalog file.
  static Result<Catalog> open(const std::string& file, OpenMode mode);
  Catalog(Catalog&&) noexcept;
  Catalog& operator=(Catalog&&) noexcept;
  ~Catalog();

  // The history of `path`, oldest first (empty when never archived).
  Result<std::vector<Version>> versions(std::string_view path) const;
  // Its latest version, if any: one look-up whatever the length of the history.
  Result<std::optional<Version>> latest(std::string_view path) const;
  // The paths in the tree directly beneath `dir` (archived or known as parents), sorted.
  Result<std::vector<std::string>> children(std::string_view dir) const;
  // Whether any path lies beneath `dir` (one index look-up).
  Result<bool> has_children(std::string_view dir) const;
  // `dir` (when in the tree) and every path beneath it, sorted.
  Result<std::vector<std::string>> paths_within(std::string_view dir) const;
  // Where blob `id` lives, if the catalog knows it.
  Result<std::optional<BlobRef>> blob(std::string_view id) const;
  // Every blob the catalog names, ordered by pack and offset (for verify).
  Result<std::vector<std::pair<std::string, BlobRef>>> all_blobs() const;
  // Every path with a history, sorted (for verify).
  Result<std::vector<std::string>> archived_paths() const;
  // SQLite's own check of the file: empty when sound, else its findings.
  Result<std::string> integrity_problems() const;
  // The schema version of the file (PRAGMA user_version): 2, or 1 when read-only and not
  // yet upgraded.
  int schema_version() const;

  // Folds the journal (WAL) into the catalog file and empties it, when no other process
  // is reading or writing it for `wait` (a quiet archive is then one file, with nothing
  // left to replay). False when another process was busy with it: try again later.
  Result<bool> fold_journal(std::chrono::milliseconds wait);

  // Commits everything in `batch` in one transaction, seen by every reader when it
  // returns, and durable once a sync_journal() begun after it has returned. Fails (RETRY)
  // when a version number is taken already: nothing of the batch is committed.
  Done commit(const CatalogBatch& batch);
  // Makes every commit made so far, by any process, durable: an fdatasync of the journal
  // (a commit is a run of frames appended to it, valid only whole). Safe from another
  // thread than the one using the catalog; nothing to do when read-only.
  Done sync_journal() const;

 private:
  struct Impl;
  explicit Catalog(std::unique_ptr<Impl> impl);
  Result<std::vector<std::string>> subtree(std::string_view dir, bool archived_only) const;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tw::archive
