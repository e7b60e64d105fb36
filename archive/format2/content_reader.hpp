// Format 2's contents read at random (Layout::read_content; FORMAT.md, "Format 2"): a file's
// content is its blobs end to end, so the blob that holds a byte is found by the blobs' sizes
// (the catalog's), and only that blob is read, decompressed and checked against its id (its
// SHA-256), as every blob extract reads is checked. The blobs read last are kept decompressed,
// up to a byte budget, and so are the extents of the contents read last: a file read in small
// pieces from start to end reads each blob once. Internal to the archive library; one
// ContentReader belongs to one thread at a time, as the layout that holds it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "archive/expected.hpp"
#include "archive/format2/catalog.hpp"
#include "archive/format2/chunk_store.hpp"
#include "archive/types.hpp"

namespace tw::archive {

class ContentReader {
 public:
  // Reads blobs through `chunks` (which keeps packs open and finds a blob a collection
  // moved), their sizes from `catalog`; keeps at most `cache_bytes` of decompressed blobs.
  ContentReader(ChunkStore& chunks, const Catalog& catalog, std::uint64_t cache_bytes);

  // Layout::read_content for version `v` (a regular file); blobs are looked up in `staged`
  // (optional) first.
  Expected<std::size_t> read(const Version& v, std::uint64_t offset, std::span<char> out,
                             const CatalogBatch* staged);

 private:
  using Bytes = std::shared_ptr<const BlobBytes>;
  // Where each blob of one content ends in it, the blobs being the version's, in order.
  struct Extents {
    std::string sha256;
    std::vector<std::string> chunks;
    std::vector<std::uint64_t> ends;
  };
  Expected<const Extents*> extents(const Version& v, const CatalogBatch* staged);
  // Blob `id`, decompressed and checked: from the cache, or read and then kept.
  Expected<Bytes> blob(const std::string& id, const CatalogBatch* staged);
  Expected<BlobBytes> read_checked(const std::string& id, const CatalogBatch* staged);

  ChunkStore& chunks_;
  const Catalog& catalog_;
  std::uint64_t cache_bytes_;
  std::list<std::pair<std::string, Bytes>> blobs_;  // most recently used first
  std::unordered_map<std::string, std::list<std::pair<std::string, Bytes>>::iterator> by_id_;
  std::uint64_t cached_bytes_ = 0;
  std::list<Extents> extents_;  // most recently used first
};

}  // namespace tw::archive
