// The writes of format 2's catalog staged for one commit (catalog_batch.hpp).
#include "archive/format2/catalog_batch.hpp"

#include <algorithm>
#include <iterator>

namespace tw::archive {

void CatalogBatch::add_version(std::string path, Version version) {
  versions_.emplace_back(std::move(path), std::move(version));
}

void CatalogBatch::add_blob(std::string id, BlobRef ref) {
  blobs_.emplace_back(std::move(id), std::move(ref));
}

const Version* CatalogBatch::latest(std::string_view path) const {
  for (auto it = versions_.rbegin(); it != versions_.rend(); ++it) {
    if (it->first == path) return &it->second;
  }
  return nullptr;
}

const BlobRef* CatalogBatch::blob(std::string_view id) const {
  for (const auto& [blob_id, ref] : blobs_) {
    if (blob_id == id) return &ref;
  }
  return nullptr;
}

std::vector<std::string_view> CatalogBatch::paths() const {
  std::vector<std::string_view> out;
  for (const auto& [path, version] : versions_) out.push_back(path);
  return out;
}

std::vector<Version> CatalogBatch::versions_of(std::string_view path) const {
  std::vector<Version> out;
  for (const auto& [p, version] : versions_) {
    if (p == path) out.push_back(version);
  }
  return out;
}

namespace {

// How many of a batch's entries lie before `mark`, `dropped` of them taken out already
// (none when the mark itself was taken out).
std::size_t beyond(std::size_t mark, std::size_t dropped) {
  return mark > dropped ? mark - dropped : 0;
}

}  // namespace

std::uint64_t CatalogBatch::blob_bytes(Mark from) const {
  std::uint64_t total = 0;
  for (std::size_t i = beyond(from.blobs, dropped_.blobs); i < blobs_.size(); ++i) {
    total += blobs_[i].second.stored;
  }
  return total;
}

CatalogBatch CatalogBatch::split_front(Mark upto) {
  CatalogBatch front;
  front.dropped_ = dropped_;
  const auto take = [](auto& from, auto& into, std::size_t n) {
    n = std::min(n, from.size());
    into.assign(std::make_move_iterator(from.begin()),
                std::make_move_iterator(from.begin() + static_cast<std::ptrdiff_t>(n)));
    from.erase(from.begin(), from.begin() + static_cast<std::ptrdiff_t>(n));
    return n;
  };
  dropped_.versions += take(versions_, front.versions_, beyond(upto.versions, dropped_.versions));
  dropped_.blobs += take(blobs_, front.blobs_, beyond(upto.blobs, dropped_.blobs));
  return front;
}

}  // namespace tw::archive
