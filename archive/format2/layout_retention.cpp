// Format 2's part of retention and collection (layout.hpp): the catalog keeps the kept
// moments, pins and removed versions; the collector frees what no version names.
#include "archive/format2/collector.hpp"
#include "archive/format2/layout.hpp"

namespace tw::archive {

Expected<KeptScopes> Format2Layout::kept_moments() { return catalog_->kept_moments(); }

Expected<std::uint64_t> Format2Layout::forgotten(std::string_view path) {
  return catalog_->forgotten(path);
}

Expected<std::set<std::uint64_t>> Format2Layout::pinned(std::string_view path) {
  return catalog_->pinned(path);
}

Expected<KeptScopes> Format2Layout::record_kept(const KeptScopes& kept) {
  return catalog_->record_kept(kept);
}

Done Format2Layout::drop_versions(const std::vector<DroppedVersions>& dropped) {
  return catalog_->drop_versions(dropped);
}

Done Format2Layout::set_pin(std::string_view path, std::uint64_t number, bool pinned) {
  return catalog_->set_pin(path, number, pinned);
}

Expected<PurgeReport> Format2Layout::purge(std::string_view path, bool dry_run) {
  return catalog_->purge(path, dry_run);
}

Expected<CollectReport> Format2Layout::collect(const CollectOptions& options) {
  Collector collector(disk_, *catalog_, root_, hooks_.packs_from.get());
  CollectReport total;
  for (int round = 0; round < std::max(1, options.rounds); ++round) {
    TRY_ASSIGN(const CollectReport one, collector.run(options));
    total.collection = one.collection;
    if (round == 0) total.started_ns = one.started_ns;
    total.finished_ns = one.finished_ns;
    total.blobs = one.blobs;
    total.blobs_condemned = one.blobs_condemned;  // what is left condemned
    total.blobs_swept += one.blobs_swept;
    total.bytes_swept += one.bytes_swept;
    total.packs_deleted += one.packs_deleted;
    total.packs_rewritten += one.packs_rewritten;
    total.packs_truncated += one.packs_truncated;
    total.packs_busy = one.packs_busy;
    total.bytes_copied += one.bytes_copied;
    total.bytes_reclaimed += one.bytes_reclaimed;
    total.catalog_bytes_reclaimed += one.catalog_bytes_reclaimed;
  }
  return total;
}

Expected<std::optional<CollectReport>> Format2Layout::last_collection() {
  return catalog_->last_collection();
}

}  // namespace tw::archive
