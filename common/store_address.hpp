// Where a pack store is, from the store_* keys alone (no connection, no keys checked): the
// prefix an archive ships under and the name it records its shipping under. Shared by the
// shipper (objstore/pack_store.hpp) and the monitor, which reads that record for the
// database's status of every host.
#pragma once

#include <string>
#include <string_view>

#include "common/config.hpp"

namespace tw {

// store_prefix, or host_id when it is empty, without a trailing '/'.
std::string store_prefix(const Config& config);

// "<endpoint>/<bucket>/<prefix>".
std::string store_address(std::string_view endpoint, std::string_view bucket,
                          std::string_view prefix);
// The configuration's store (empty without a store_endpoint).
std::string store_address(const Config& config);

}  // namespace tw
