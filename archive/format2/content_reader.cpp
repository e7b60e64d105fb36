// Format 2's contents read at random (content_reader.hpp).
#include "archive/format2/content_reader.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "archive/format2/pack.hpp"

namespace tw::archive {
namespace {

// The extents of this many contents are kept: a few files read side by side.
constexpr std::size_t kExtentsKept = 16;

}  // namespace

ContentReader::ContentReader(ChunkStore& chunks, const Catalog& catalog, std::uint64_t cache_bytes)
    : chunks_(chunks), catalog_(catalog), cache_bytes_(cache_bytes) {}

Expected<std::size_t> ContentReader::read(const Version& v, std::uint64_t offset,
                                          std::span<char> out, const CatalogBatch* staged) {
  if (offset >= v.size || out.empty()) return std::size_t{0};
  TRY_ASSIGN(const Extents* at, extents(v, staged));
  // The first blob that ends past `offset`.
  auto i = static_cast<std::size_t>(std::upper_bound(at->ends.begin(), at->ends.end(), offset) -
                                    at->ends.begin());
  std::size_t copied = 0;
  for (; i < at->chunks.size() && copied < out.size(); ++i) {
    const std::uint64_t begins = i == 0 ? 0 : at->ends[i - 1];
    // `at` stays valid: blob() changes the blobs kept, not the extents.
    TRY_ASSIGN(const Bytes bytes, blob(at->chunks[i], staged));
    const std::uint64_t from = offset + copied - begins;
    const std::size_t n = std::min<std::uint64_t>(bytes->size() - from, out.size() - copied);
    std::memcpy(out.data() + copied, bytes->data() + from, n);
    copied += n;
  }
  return copied;
}

Expected<const ContentReader::Extents*> ContentReader::extents(const Version& v,
                                                               const CatalogBatch* staged) {
  for (auto it = extents_.begin(); it != extents_.end(); ++it) {
    if (it->sha256 == v.sha256 && it->chunks.size() == v.chunks.size()) {
      extents_.splice(extents_.begin(), extents_, it);
      return &extents_.front();
    }
  }
  Extents made{v.sha256, v.chunks, {}};
  made.ends.reserve(v.chunks.size());
  std::uint64_t end = 0;
  for (const auto& id : v.chunks) {
    std::optional<BlobRef> ref;
    if (const BlobRef* pending = staged != nullptr ? staged->blob(id) : nullptr) {
      ref = *pending;
    } else {
      TRY_ASSIGN(ref, catalog_.blob(id));
    }
    if (!ref)
      return archive_fault(Error{fmt::format("blob {} is missing (not in the catalog)", id)});
    end += ref->raw;
    made.ends.push_back(end);
  }
  if (end != v.size) {
    return archive_fault(Error{
        fmt::format("the blobs of content {} hold {} bytes, not its {}", v.sha256, end, v.size)});
  }
  extents_.push_front(std::move(made));
  if (extents_.size() > kExtentsKept) extents_.pop_back();
  return &extents_.front();
}

Expected<ContentReader::Bytes> ContentReader::blob(const std::string& id,
                                                   const CatalogBatch* staged) {
  if (const auto found = by_id_.find(id); found != by_id_.end()) {
    blobs_.splice(blobs_.begin(), blobs_, found->second);
    return blobs_.front().second;
  }
  TRY_ASSIGN(BlobBytes raw, read_checked(id, staged));
  auto bytes = std::make_shared<const BlobBytes>(std::move(raw));
  cached_bytes_ += bytes->size();
  blobs_.emplace_front(id, bytes);
  by_id_[id] = blobs_.begin();
  // The one just read stays even when it alone is over the budget: the caller copies from it.
  while (cached_bytes_ > cache_bytes_ && blobs_.size() > 1) {
    cached_bytes_ -= blobs_.back().second->size();
    by_id_.erase(blobs_.back().first);
    blobs_.pop_back();
  }
  return bytes;
}

Expected<BlobBytes> ContentReader::read_checked(const std::string& id, const CatalogBatch* staged) {
  TRY_ASSIGN(ChunkStore::Located at, chunks_.locate(id, staged));
  auto raw = read_blob(at.pack_fd, at.ref, id);
  if (!raw && (staged == nullptr || staged->blob(id) == nullptr)) {
    // A collection may have moved the blob to another pack since the pack this descriptor
    // reads was opened (FORMAT.md, "Collection"): read it again where the catalog says it
    // is now.
    TRY_ASSIGN(const std::optional<BlobRef> now, catalog_.blob(id));
    if (now && (now->pack != at.ref.pack || now->offset != at.ref.offset)) {
      TRY_ASSIGN(at, chunks_.locate(id, staged));
      raw = read_blob(at.pack_fd, at.ref, id);
    }
  }
  if (!raw) {
    return archive_fault(
        Error{fmt::format("blob {} in pack {}: {}", id, at.ref.pack, raw.error())});
  }
  return std::move(*raw);
}

}  // namespace tw::archive
