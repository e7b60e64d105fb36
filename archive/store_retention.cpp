// The facade's retention, collection and shipping (archive/store.hpp): forget, pins,
// collect, ship.
#include <fmt/format.h>

#include "archive/forget.hpp"
#include "archive/paths.hpp"
#include "archive/store.hpp"
#include "archive/store_impl.hpp"
#include "common/escape.hpp"

namespace tw::archive {
namespace {

// The layout that may change the archive, or why there is none: a store opened read-only
// (a format-1 archive opens read-only only: Store::open says so when asked for more).
Expected<WritableLayout*> changing(const Store::Impl& impl, std::string_view what) {
  if (impl.writer != nullptr) return impl.writer;
  return permanent(fmt::format("{}: archive {} is open read-only", what, shown_path(impl.root)));
}

}  // namespace

Expected<ForgetReport> Store::forget(const RetentionPolicies& policy, std::int64_t now_ns,
                                     const ForgetOptions& options) {
  TRY_ASSIGN(WritableLayout* const writer, changing(*impl_, "forget"));
  return forget_versions(*writer, writer, policy, now_ns, options);
}

Expected<ForgetReport> Store::plan_forget(const RetentionPolicies& policy, std::int64_t now_ns,
                                          const ForgetOptions& options) const {
  // A dry run changes nothing: it runs over the layout as read, whatever the mode.
  return forget_versions(*impl_->layout, nullptr, policy, now_ns, options);
}

Expected<PurgeReport> Store::purge(std::string_view raw, bool dry_run) {
  TRY_ASSIGN(WritableLayout* const writer, changing(*impl_, "purge"));
  TRY_ASSIGN(const std::string path, normalize_path(raw));
  return writer->purge(path, dry_run);
}

Done Store::pin(std::string_view raw, std::uint64_t number, bool pinned) {
  TRY_ASSIGN(WritableLayout* const writer, changing(*impl_, pinned ? "pin" : "unpin"));
  TRY_ASSIGN(const std::string path, normalize_path(raw));
  return writer->set_pin(path, number, pinned);
}

Expected<std::set<std::uint64_t>> Store::pins(std::string_view raw) const {
  TRY_ASSIGN(const std::string path, normalize_path(raw));
  return impl_->layout->pinned(path);
}

Expected<KeptScopes> Store::kept_moments() const { return impl_->layout->kept_moments(); }

Expected<CollectReport> Store::collect(const CollectOptions& options) {
  TRY_ASSIGN(WritableLayout* const writer, changing(*impl_, "collect"));
  return writer->collect(options);
}

Expected<std::optional<CollectReport>> Store::last_collection() const {
  return impl_->layout->last_collection();
}

Done Store::ship(PackStore& store, ShipReport& report, std::uint64_t keep_local) {
  TRY_ASSIGN(WritableLayout* const writer, changing(*impl_, "ship"));
  return writer->ship(store, report, keep_local);
}

Expected<ShipBacklog> Store::ship_backlog(const std::string& store) const {
  return impl_->layout->ship_backlog(store);
}

}  // namespace tw::archive
