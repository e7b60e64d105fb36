#include "monitor/shipping_figures.hpp"

#include <sys/stat.h>

#include "archive/store.hpp"
#include "common/store_address.hpp"
#include "common/time.hpp"

namespace tw::monitor {
namespace {

std::optional<double> seconds(const std::optional<std::int64_t>& ns) {
  if (!ns) return std::nullopt;
  return static_cast<double>(*ns) / 1e9;
}

}  // namespace

std::optional<db::ShippingFigures> read_shipping_figures(const Config& config,
                                                         const std::string& run_error) {
  if (config.store_endpoint.empty()) return std::nullopt;
  db::ShippingFigures f;
  f.store = store_address(config);
  f.read_at = static_cast<double>(now_ns()) / 1e9;
  f.error = run_error;
  struct stat st {};
  if (::stat((config.backup_root + "/FORMAT").c_str(), &st) != 0) return f;  // not made yet
  auto store = archive::Store::open(config.backup_root, archive::Store::Mode::ReadOnly);
  if (!store) {
    if (f.error.empty()) f.error = store.error();
    return f;
  }
  auto backlog = store->ship_backlog(f.store);
  if (!backlog) {
    if (f.error.empty()) f.error = backlog.error();
    return f;
  }
  f.packs_pending = static_cast<std::int64_t>(backlog->packs);
  f.bytes_pending = static_cast<std::int64_t>(backlog->bytes);
  f.removals_pending = static_cast<std::int64_t>(backlog->removals);
  f.oldest_pending_at = seconds(backlog->oldest_ns);
  f.last_shipped_at = seconds(backlog->last_shipped_ns);
  f.catalog_shipped_at = seconds(backlog->catalog_shipped_ns);
  return f;
}

}  // namespace tw::monitor
