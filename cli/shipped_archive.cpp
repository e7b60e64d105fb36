#include "cli/shipped_archive.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <memory>

#include <fmt/format.h>

#include "archive/pack_cache.hpp"
#include "archive/sha256.hpp"
#include "common/store_address.hpp"
#include "objstore/pack_store.hpp"

namespace tw {
namespace {

std::string user_cache_dir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && *xdg == '/') return fmt::format("{}/timewarp", xdg);
  const char* home = std::getenv("HOME");
  if (::geteuid() == 0 || home == nullptr || *home != '/') return "/var/cache/timewarp";
  return fmt::format("{}/.cache/timewarp", home);
}

}  // namespace

std::string shipped_cache_dir(const Config& config, const std::string& where) {
  std::string name;
  for (const char c :
       where.substr(where.find("://") == std::string::npos ? 0 : where.find("://") + 3)) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '.' || c == '-';
    name += plain ? c : '_';
  }
  // Two stores whose names differ only where '_' stands are told apart by the digest.
  name += "-" + archive::sha256_hex(where).substr(0, 8);
  return fmt::format("{}/{}", config.cache_dir.empty() ? user_cache_dir() : config.cache_dir, name);
}

namespace {

// The pack store the store_* keys name (store_endpoint must be set).
archive::Expected<std::unique_ptr<objstore::BucketPackStore>> bucket_packs(const Config& config) {
  auto target = objstore::store_target(config);
  if (!target) return archive::permanent(target.error());
  auto bucket = objstore::Bucket::open((*target)->bucket);
  if (!bucket) return archive::permanent(bucket.error());
  return std::make_unique<objstore::BucketPackStore>(std::move(*bucket), (*target)->prefix);
}

}  // namespace

archive::StoreHooks given_back_hooks(const Config& config) {
  archive::StoreHooks hooks;
  if (config.store_endpoint.empty()) return hooks;
  // A folder of its own for each archive opened: two in one process never share files.
  static std::atomic<int> opened{0};
  const std::string run = fmt::format(
      "{}/run-{}-{}", shipped_cache_dir(config, store_address(config)), ::getpid(), ++opened);
  auto open = [config]() -> archive::Expected<std::unique_ptr<archive::PackStore>> {
    auto packs = bucket_packs(config);
    if (!packs) return packs.fault();
    return std::unique_ptr<archive::PackStore>(std::move(*packs));
  };
  hooks.packs_from =
      std::make_shared<archive::GivenBackPacks>(run, std::move(open), config.cache_size);
  return hooks;
}

archive::Expected<archive::Store> open_shipped(const Config& config) {
  if (config.store_endpoint.empty()) {
    return archive::permanent("--from-store needs a pack store: store_endpoint is not set");
  }
  TRY_ASSIGN(auto packs, bucket_packs(config));
  const std::string dir = shipped_cache_dir(config, packs->where());
  return archive::Store::open_shipped(std::move(packs), dir, config.cache_size);
}

}  // namespace tw
