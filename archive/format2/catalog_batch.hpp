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
#include <unordered_map>
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
  // Whether a version of a path beneath `dir` (not `dir` itself) is staged.
  bool has_within(std::string_view dir) const { return beneath_.contains(dir); }
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
  // The maps below, made again from versions_ and blobs_ (after split_front()).
  void reindex();
  void index_version(const std::string& path, std::size_t at);

  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view key) const {
      return std::hash<std::string_view>{}(key);
    }
  };
  template <class T>
  using Index = std::unordered_map<std::string, T, Hash, std::equal_to<>>;

  std::vector<std::pair<std::string, Version>> versions_;
  std::vector<std::pair<std::string, BlobRef>> blobs_;
  // Where each path's versions and each blob are in versions_ and blobs_ (counted from the
  // batch's start, dropped_ included), so that a request's look-ups cost the same however
  // much is staged: a SCAN stages a whole folder, and scanning the batch for each of its
  // entries made a folder of n files cost n * n / 2 comparisons.
  Index<std::vector<std::size_t>> version_at_;
  Index<std::size_t> blob_at_;  // the first one added
  Index<std::size_t> beneath_;  // every folder above a staged path: how many lie beneath
  Mark dropped_;                // taken out by split_front()
};

}  // namespace tw::archive
