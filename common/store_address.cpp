#include "common/store_address.hpp"

#include <fmt/format.h>

namespace tw {

std::string store_prefix(const Config& config) {
  std::string prefix = config.store_prefix.empty() ? host_id(config) : config.store_prefix;
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  return prefix;
}

std::string store_address(std::string_view endpoint, std::string_view bucket,
                          std::string_view prefix) {
  return fmt::format("{}/{}/{}", endpoint, bucket, prefix);
}

std::string store_address(const Config& config) {
  if (config.store_endpoint.empty()) return {};
  return store_address(config.store_endpoint, config.store_bucket, store_prefix(config));
}

}  // namespace tw
