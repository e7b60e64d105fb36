// The S3 gateway the object store tests run against (a one-node Ceph's radosgw, started by
// scripts/test and named by TW_S3_ENDPOINT, TW_S3_ACCESS_KEY, TW_S3_SECRET_KEY and
// TW_S3_REGION), and buckets of a test's own on it.
#pragma once

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

}  // namespace tw::objstore
