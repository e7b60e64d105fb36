// The writes of format 2's catalog staged for one commit (catalog.hpp): versions and the
// blobs their contents are made of, kept in memory, in the order added, until
// Catalog::commit() writes them in one transaction. Requests that run before the commit
// find what is staged here. Internal to the archive library; belongs to one thread at a
// time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "archive/format2/pack.hpp"
#include "archive/types.hpp"

namespace tw::archive {

class Catalog;

// Writes staged for one commit, in the order they were added.
class CatalogBatch {
 public:
  // A new version of `path` (raw, canonical, absolute), with the blobs of its content
  // (Version::chunks); its number must follow the latest committed one. The path's ancestors join
  // the tree if they are not in it.
  void add_version(std::string path, Version version);
  // Where a blob newly written to a pack lives.
  void add_blob(std::string id, BlobRef ref);
  bool empty() const { return versions_.empty() && blobs_.empty(); }
  std::size_t size() const { return versions_.size() + blobs_.size(); }
  // The staged version of `path` with the highest number, if any (for requests that run
  // before the commit).
  const Version* latest(std::string_view path) const;
  const BlobRef* blob(std::string_view id) const;
  // Every staged version's path, in the order added (repeats kept).
  std::vector<std::string_view> paths() const;
  // The staged versions of `path`, oldest first.
  std::vector<Version> versions_of(std::string_view path) const;
  // How far the batch reaches: the versions and blobs ever added to it, counting those
  // split_front() has taken out.
  struct Mark {
    std::size_t versions = 0;
    std::size_t blobs = 0;
    bool operator==(const Mark&) const = default;
  };
  Mark end() const {
    return {dropped_.versions + versions_.size(), dropped_.blobs + blobs_.size()};
  }
  // The stored bytes of the staged blobs (added since `from`).
  std::uint64_t blob_bytes() const { return blob_bytes(Mark{0, 0}); }
  std::uint64_t blob_bytes(Mark from) const;
  std::size_t version_count() const { return versions_.size(); }
  // Takes out what was added before `upto` (a mark of this batch), as a batch of its own.
  CatalogBatch split_front(Mark upto);

 private:
  friend class Catalog;
  std::vector<std::pair<std::string, Version>> versions_;
  std::vector<std::pair<std::string, BlobRef>> blobs_;
  Mark dropped_;  // taken out by split_front()
};

}  // namespace tw::archive
