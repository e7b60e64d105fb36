// The S3 gateway the object store tests run against (a one-node Ceph's radosgw, started by
// scripts/test and named by TW_S3_ENDPOINT, TW_S3_ACCESS_KEY, TW_S3_SECRET_KEY and
// TW_S3_REGION), and buckets of a test's own on it.
#pragma once

#include <chrono>
#include <map>
#include <string>

#include <string>

#include <gtest/gtest.h>

#include "objstore/bucket.hpp"

namespace tw::objstore {

// The environment variable `name`, or "".
std::string env(const char* name);

bool store_configured();

#define TW_REQUIRE_STORE()                                                                   \
  do {                                                                                       \
    if (!store_configured()) GTEST_SKIP() << "TW_S3_ENDPOINT is not set (run scripts/test)"; \
  } while (0)

// The gateway's configuration for bucket `bucket`.
BucketConfig gateway(const std::string& bucket);

// A bucket of the test's own, made on the gateway.
Bucket fresh_bucket();

// The pack files under backup root `root`, by name.
std::map<std::string, std::string> local_packs(const std::string& root);

// The packs in `bucket` under `prefix`/packs/, by name (nothing when it cannot be read).
std::map<std::string, std::string> bucket_packs(Bucket& bucket, const std::string& prefix);

// Stops the gateway process (radosgw serving TW_S3_ENDPOINT: SIGTERM, SIGKILL after 10 s),
// leaves it down for `down`, starts it again as it was (its arguments, environment and
// folder; in a session of its own, so that the stop of scripts/test still finds it by its
// configuration) and waits up to 30 s until it answers. What went wrong, or "".
std::string restart_gateway(std::chrono::milliseconds down);

}  // namespace tw::objstore
