#include "cli/shipped_archive.hpp"

#include <unistd.h>

#include <cstdlib>
#include <memory>

#include <fmt/format.h>

#include "archive/sha256.hpp"
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

archive::Expected<archive::Store> open_shipped(const Config& config) {
  auto target = objstore::store_target(config);
  if (!target) return archive::permanent(target.error());
  if (!*target) {
    return archive::permanent("--from-store needs a pack store: store_endpoint is not set");
  }
  auto bucket = objstore::Bucket::open((*target)->bucket);
  if (!bucket) return archive::permanent(bucket.error());
  auto packs = std::make_unique<objstore::BucketPackStore>(std::move(*bucket), (*target)->prefix);
  const std::string dir = shipped_cache_dir(config, packs->where());
  return archive::Store::open_shipped(std::move(packs), dir, config.cache_size);
}

}  // namespace tw
