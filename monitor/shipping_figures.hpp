// What the monitor publishes in its row of the database of its archive's shipping
// (timewarp.monitors' ship_* columns), so `timewarp status` anywhere shows every host's
// backlog: read from the archive at start and after every shipping run, the way `status`
// reads it on the host itself (archive::Store::ship_backlog against the configured store).
// Call from the monitor's thread only.
#pragma once

#include <optional>
#include <string>

#include "common/config.hpp"
#include "db/monitors.hpp"

namespace tw::monitor {

// The figures for the store the configuration names, or none without a store_endpoint.
// `run_error` is why the last shipping run failed (empty when it did not, or none ran); an
// archive that cannot be read (not made yet) says so in the figures' error.
std::optional<db::ShippingFigures> read_shipping_figures(const Config& config,
                                                         const std::string& run_error);

}  // namespace tw::monitor
