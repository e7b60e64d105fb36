#include "objstore/gateway.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdlib>

#include <fmt/format.h>

namespace tw::objstore {

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

bool store_configured() { return !env("TW_S3_ENDPOINT").empty(); }

BucketConfig gateway(const std::string& bucket) {
  BucketConfig config;
  config.endpoint = env("TW_S3_ENDPOINT");
  config.bucket = bucket;
  if (!env("TW_S3_REGION").empty()) config.region = env("TW_S3_REGION");
  config.access_key = env("TW_S3_ACCESS_KEY");
  config.secret_key = env("TW_S3_SECRET_KEY");
  return config;
}

Bucket fresh_bucket() {
  static std::atomic<int> counter{0};
  const std::string name = fmt::format("tw-test-{}-{}", ::getpid(), ++counter);
  auto bucket = Bucket::open(gateway(name));
  EXPECT_TRUE(bucket) << (bucket ? "" : bucket.error());
  auto made = bucket->create();
  EXPECT_TRUE(made) << (made ? "" : made.failure().message);
  return std::move(bucket.value());
}

}  // namespace tw::objstore
