// The catalog of archive format 2 (FORMAT.md, "Format 2"): every path's history, the tree
// of archived paths, and where each blob lives, in one SQLite database (catalog.db) in WAL
// mode. A version is one row appended under (path, number), so the cost of one more
// version does not grow with the history; writes are staged in a CatalogBatch and
// committed in one short transaction (group commit), durable when commit() returns.
// Several processes may read and write one catalog at once. Internal to the archive
// library; one Catalog object belongs to one thread at a time.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "archiver/fault.hpp"
#include "archiver/pack.hpp"
#include "archiver/store.hpp"
#include "common/result.hpp"

struct sqlite3;

namespace tw::archive {

// A version and the blobs its content is made of, in order (empty for what is not a
// regular file; one id, the content's own SHA-256, for a file of one chunk).
struct StoredVersion {
  Version version;
  std::vector<std::string> chunks;  // hex SHA-256 of each blob
};

// Writes staged for one commit, in the order they were added.
class CatalogBatch {
 public:
  // A new version of `path` (raw, canonical, absolute); its number must follow the
  // latest committed one. The path's ancestors join the tree if they are not in it.
  void add_version(std::string path, StoredVersion version);
  // Where a blob newly written to a pack lives.
  void add_blob(std::string id, BlobRef ref);
  bool empty() const { return versions_.empty() && blobs_.empty(); }
  std::size_t size() const { return versions_.size() + blobs_.size(); }
  // The staged version of `path` with the highest number, if any (for requests that run
  // before the commit).
  const StoredVersion* latest(std::string_view path) const;
  const BlobRef* blob(std::string_view id) const;

 private:
  friend class Catalog;
  std::vector<std::pair<std::string, StoredVersion>> versions_;
  std::vector<std::pair<std::string, BlobRef>> blobs_;
};

class Catalog {
 public:
  // Opens (ReadWrite: creates when absent) the catalog file.
  static Result<Catalog> open(const std::string& file, Store::Mode mode);
  Catalog(Catalog&&) noexcept;
  Catalog& operator=(Catalog&&) noexcept;
  ~Catalog();

  // The history of `path`, oldest first (empty when never archived).
  Result<std::vector<StoredVersion>> versions(std::string_view path) const;
  // Its latest version, if any: one look-up whatever the length of the history.
  Result<std::optional<StoredVersion>> latest(std::string_view path) const;
  // The paths in the tree directly beneath `dir` (archived or known as parents), sorted.
  Result<std::vector<std::string>> children(std::string_view dir) const;
  // `dir` (when in the tree) and every path beneath it, sorted.
  Result<std::vector<std::string>> paths_within(std::string_view dir) const;
  // Where blob `id` lives, if the catalog knows it.
  Result<std::optional<BlobRef>> blob(std::string_view id) const;
  // Every blob the catalog names, and how many versions there are (for verify).
  Result<std::vector<std::pair<std::string, BlobRef>>> all_blobs() const;

  // Commits everything in `batch` in one transaction, durable when it returns. Fails
  // (RETRY) when a version number is taken already: nothing of the batch is committed.
  Done commit(const CatalogBatch& batch);

 private:
  struct Impl;
  explicit Catalog(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tw::archive
