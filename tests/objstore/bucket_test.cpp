// The object store client against a real S3 gateway (Ceph's radosgw, started by
// scripts/test and named by TW_S3_ENDPOINT, TW_S3_ACCESS_KEY, TW_S3_SECRET_KEY and
// TW_S3_REGION).
#include "objstore/bucket.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <random>
#include <set>
#include <string>

#include <fmt/format.h>

#include "objstore/gateway.hpp"
#include "support/test_support.hpp"

namespace tw::objstore {
namespace {

using test::noise;

// A configuration for tests that make no request, or one that cannot be answered.
BucketConfig offline(const std::string& endpoint) {
  BucketConfig config;
  config.endpoint = endpoint;
  config.bucket = "tw-ok";
  config.access_key = "key";
  config.secret_key = "secret";
  return config;
}

TEST(Bucket, StoresReadsRangesListsAndRemovesObjects) {
  TW_REQUIRE_STORE();
  Bucket bucket = fresh_bucket();
  const std::string big = noise(3 << 20, 1);  // above curl's 1 MiB Expect threshold
  const std::string small = "hello, store";
  ASSERT_TRUE(bucket.put("packs/00/big", big));
  ASSERT_TRUE(bucket.put("packs/01/small", small));
  ASSERT_TRUE(bucket.put("other", small));

  auto whole = bucket.get("packs/00/big");
  ASSERT_TRUE(whole) << whole.failure().message;
  EXPECT_TRUE(*whole == big);
  for (const auto& [offset, length] : std::vector<std::pair<std::uint64_t, std::uint64_t>>{
           {0, 1}, {12345, 70000}, {big.size() - 1, 1}, {0, big.size()}}) {
    auto part = bucket.get_range("packs/00/big", offset, length);
    ASSERT_TRUE(part) << part.failure().message;
    EXPECT_TRUE(*part == big.substr(offset, length)) << offset << "+" << length;
  }
  auto past = bucket.get_range("packs/01/small", small.size() + 10, 4);
  ASSERT_FALSE(past);
  EXPECT_EQ(past.failure().kind, Failure::Permanent) << past.failure().message;

  auto info = bucket.head("packs/00/big");
  ASSERT_TRUE(info) << info.failure().message;
  EXPECT_EQ(info->size, big.size());
  EXPECT_FALSE(info->etag.empty());

  auto listed = bucket.list("packs/");
  ASSERT_TRUE(listed) << listed.failure().message;
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].key, "packs/00/big");
  EXPECT_EQ((*listed)[0].size, big.size());
  EXPECT_EQ((*listed)[1].key, "packs/01/small");

  ASSERT_TRUE(bucket.remove("packs/00/big"));
  auto gone = bucket.get("packs/00/big");
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.failure().kind, Failure::NotFound) << gone.failure().message;
  auto gone_head = bucket.head("packs/00/big");
  ASSERT_FALSE(gone_head);
  EXPECT_EQ(gone_head.failure().kind, Failure::NotFound);
  EXPECT_TRUE(bucket.remove("packs/00/big")) << "removing what is gone is no failure";
  EXPECT_TRUE(bucket.create()) << "a bucket that is ours already is no failure";
}

TEST(Bucket, KeysOfAnyPrintableBytesRoundTripThroughPutGetAndPagedListing) {
  TW_REQUIRE_STORE();
  Bucket bucket = fresh_bucket();
  // Bytes that need encoding in a path, in a query and in XML, and one that sorts early.
  const std::vector<std::string> names = {"host a/p+q=r&s?t#u",
                                          "host a/%41 not an escape",
                                          "host a/caf\xc3\xa9 \xe2\x82\xac",
                                          "host a/<tag attr=\"1\">'x'</tag>",
                                          "host a/~_.-",
                                          "host a/!$'()*,;:@[]",
                                          "host a/semi;colon",
                                          "host a/tab\there"};
  std::set<std::string> expected;
  for (int i = 0; i < 3; ++i) {
    for (const auto& name : names) {
      const std::string key = fmt::format("{}/{}", name, i);
      ASSERT_TRUE(bucket.put(key, key)) << key;
      expected.insert(key);
    }
  }
  ASSERT_TRUE(bucket.put("host b/outside", "x"));
  // Seven at a time: the listing follows continuation tokens across pages.
  auto listed = bucket.list("host a/", 7);
  ASSERT_TRUE(listed) << listed.failure().message;
  std::set<std::string> got;
  for (const auto& info : *listed) got.insert(info.key);
  EXPECT_EQ(got, expected);
  EXPECT_EQ(listed->size(), expected.size()) << "each key once";
  for (const auto& key : expected) {
    auto back = bucket.get(key);
    ASSERT_TRUE(back) << key << ": " << back.failure().message;
    EXPECT_EQ(*back, key);
  }
}

TEST(Bucket, RefusedCredentialsArePermanentAndNeverPrinted) {
  TW_REQUIRE_STORE();
  Bucket ours = fresh_bucket();
  BucketConfig config = ours.config();
  config.secret_key = "not-the-secret-4d1f";
  auto bucket = Bucket::open(config);
  ASSERT_TRUE(bucket);
  auto put = bucket->put("x", std::string("y"));
  ASSERT_FALSE(put);
  EXPECT_EQ(put.failure().kind, Failure::Permanent) << put.failure().message;
  EXPECT_EQ(put.failure().message.find(config.secret_key), std::string::npos);
  EXPECT_EQ(put.failure().message.find(gateway("x").secret_key), std::string::npos);
  EXPECT_NE(put.failure().message.find("PUT x"), std::string::npos) << put.failure().message;
}

TEST(Bucket, AMissingBucketIsNotFound) {
  TW_REQUIRE_STORE();
  auto bucket = Bucket::open(gateway("tw-test-never-made"));
  ASSERT_TRUE(bucket);
  auto got = bucket->get("x");
  ASSERT_FALSE(got);
  EXPECT_EQ(got.failure().kind, Failure::NotFound) << got.failure().message;
  EXPECT_NE(got.failure().message.find("NoSuchBucket"), std::string::npos) << got.failure().message;
  EXPECT_EQ(got.failure().status, 404);
  EXPECT_EQ(got.failure().code, "NoSuchBucket");
}

TEST(Bucket, AStoreThatDoesNotAnswerIsRetry) {
  // No gateway needed: a port nothing listens on.
  auto bucket = Bucket::open(offline("http://127.0.0.1:9"));
  ASSERT_TRUE(bucket);
  const auto start = std::chrono::steady_clock::now();
  auto put = bucket->put("x", std::string("y"));
  ASSERT_FALSE(put);
  EXPECT_EQ(put.failure().kind, Failure::Retry) << put.failure().message;
  EXPECT_NE(put.failure().message.find("no answer from http://127.0.0.1:9"), std::string::npos)
      << put.failure().message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(Bucket, ABadConfigurationNamesTheField) {
  BucketConfig config = offline("127.0.0.1:7480");
  auto bad = Bucket::open(config);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().rfind("endpoint 127.0.0.1:7480", 0), 0u) << bad.error();
  config.endpoint = "http://127.0.0.1:7480/path";
  EXPECT_FALSE(Bucket::open(config));
  config.endpoint = "https://store.example:443/";  // a trailing slash is fine
  EXPECT_TRUE(Bucket::open(config));
  for (const std::string& name :
       std::vector<std::string>{"ab", "Upper", "-dash", "under_score", std::string(64, 'a')}) {
    config.bucket = name;
    auto refused = Bucket::open(config);
    ASSERT_FALSE(refused) << name;
    EXPECT_EQ(refused.error().rfind("bucket ", 0), 0u) << refused.error();
  }
  config.bucket = "tw-ok";
  config.secret_key = "";
  auto no_secret = Bucket::open(config);
  ASSERT_FALSE(no_secret);
  EXPECT_EQ(no_secret.error(), "secret key: empty");
}

TEST(UriEncode, KeepsUnreservedBytesAndEncodesTheRestUpperCase) {
  EXPECT_EQ(uri_encode("aZ09-._~", false), "aZ09-._~");
  EXPECT_EQ(uri_encode("a/b c+", false), "a%2Fb%20c%2B");
  EXPECT_EQ(uri_encode("a/b c+", true), "a/b%20c%2B");
  EXPECT_EQ(uri_encode("\xc3\xa9\x01", false), "%C3%A9%01");
}

}  // namespace
}  // namespace tw::objstore
