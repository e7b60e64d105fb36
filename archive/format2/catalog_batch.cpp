// The writes of format 2's catalog staged for one commit (catalog_batch.hpp).
#include "archive/format2/catalog_batch.hpp"

#include <algorithm>
#include <iterator>

namespace tw::archive {

void CatalogBatch::add_version(std::string path, Version version) {
  index_version(path, dropped_.versions + versions_.size());
  versions_.emplace_back(std::move(path), std::move(version));
}

void CatalogBatch::index_version(const std::string& path, std::size_t at) {
  version_at_[path].push_back(at);
  // Its folders, up to the root ("/a/b": "/a", then "/").
  for (std::string_view p = path; p.size() > 1;) {
    const std::size_t slash = p.rfind('/');
    if (slash == std::string_view::npos) break;
    p = slash == 0 ? std::string_view("/") : p.substr(0, slash);
    if (const auto found = beneath_.find(p); found != beneath_.end()) {
      ++found->second;
    } else {
      beneath_.emplace(std::string(p), 1);
    }
  }
}

void CatalogBatch::add_blob(std::string id, BlobRef ref) {
  blob_at_.try_emplace(id, dropped_.blobs + blobs_.size());
  blobs_.emplace_back(std::move(id), std::move(ref));
}

const Version* CatalogBatch::latest(std::string_view path) const {
  const auto found = version_at_.find(path);
  if (found == version_at_.end()) return nullptr;
  return &versions_[found->second.back() - dropped_.versions].second;
}

const BlobRef* CatalogBatch::blob(std::string_view id) const {
  const auto found = blob_at_.find(id);
  if (found == blob_at_.end()) return nullptr;
  return &blobs_[found->second - dropped_.blobs].second;
}

std::vector<std::string_view> CatalogBatch::paths() const {
  std::vector<std::string_view> out;
  for (const auto& [path, version] : versions_) out.push_back(path);
  return out;
}

std::vector<Version> CatalogBatch::versions_of(std::string_view path) const {
  std::vector<Version> out;
  const auto found = version_at_.find(path);
  if (found == version_at_.end()) return out;
  for (const std::size_t at : found->second)
    out.push_back(versions_[at - dropped_.versions].second);
  return out;
}

void CatalogBatch::reindex() {
  version_at_.clear();
  blob_at_.clear();
  beneath_.clear();
  for (std::size_t i = 0; i < versions_.size(); ++i)
    index_version(versions_[i].first, dropped_.versions + i);
  for (std::size_t i = 0; i < blobs_.size(); ++i) {
    blob_at_.try_emplace(blobs_[i].first, dropped_.blobs + i);
  }
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
  reindex();
  front.reindex();
  return front;
}

}  // namespace tw::archive
