// One bucket of an S3-compatible object store (AWS S3, Ceph's radosgw, Garage, SeaweedFS,
// MinIO), spoken to over HTTP(S) with path-style addresses and AWS Signature Version 4
// (libcurl signs each request: CURLOPT_AWS_SIGV4). The store the archive's packs go to
// (ARCHITECTURE.md, "Object store"). What a failure means is in its kind: the object (or
// the bucket) is not there, try again later (no answer, a timeout, a 5xx or a throttle),
// or it will not work as asked (refused credentials, a bad name). Messages name the
// request and the store's own error code and words, never the keys.
//
// One Bucket holds one connection (kept alive between requests) and is used by one thread
// at a time; a thread that needs the store at the same time opens a Bucket of its own.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"

namespace tw::objstore {

struct BucketConfig {
  std::string endpoint;              // http://host[:port] or https://host[:port], no path
  std::string bucket;                // 3 to 63 characters: lower-case letters, digits, '.' and '-'
  std::string region = "us-east-1";  // signed into each request; stores with one region
                                     // accept any
  std::string access_key;
  std::string secret_key;
  std::chrono::milliseconds connect_timeout{10'000};
  // A request is given up (Retry) when fewer than 1 KiB/s moved for this long.
  std::chrono::milliseconds stall_timeout{30'000};
};

enum class Failure {
  NotFound,   // no such object (or no such bucket)
  Retry,      // the store did not answer, or asked to be asked again later
  Permanent,  // refused as asked: credentials, a name, a range past the end
};

struct StoreError {
  Failure kind;
  std::string message;
  long status = 0;   // the HTTP status, when the store answered
  std::string code;  // the store's error code (its XML error's Code), when it gave one
};

template <class T>
using Outcome = ValueOr<T, StoreError>;

struct ObjectInfo {
  std::string key;
  std::uint64_t size = 0;
  std::string etag;  // as the store gives it, quotes removed
};

class Bucket {
 public:
  // Checks `config` (an error names the field that is wrong; no request is made).
  static Result<Bucket> open(BucketConfig config);
  ~Bucket();
  Bucket(Bucket&&) noexcept;
  Bucket& operator=(Bucket&&) noexcept;
  Bucket(const Bucket&) = delete;
  Bucket& operator=(const Bucket&) = delete;

  const BucketConfig& config() const;

  // Makes the bucket; one that is there already and ours is no failure.
  Outcome<Ok> create();
  // Stores `bytes` as `key` (replacing an object of that name). The payload's SHA-256 is
  // signed with the request, so the store refuses bytes changed on the way.
  Outcome<Ok> put(std::string_view key, std::span<const char> bytes);
  // The whole object.
  Outcome<std::string> get(std::string_view key);
  // `length` bytes from `offset` (a range past the object's end: Permanent; a shorter
  // answer than asked: Retry).
  Outcome<std::string> get_range(std::string_view key, std::uint64_t offset, std::uint64_t length);
  Outcome<ObjectInfo> head(std::string_view key);
  // Every object whose key starts with `prefix`, in key order, asking `page` keys at a
  // time (1 to 1000).
  Outcome<std::vector<ObjectInfo>> list(std::string_view prefix, int page = 1000);
  // Removes `key`; an object already absent is no failure.
  Outcome<Ok> remove(std::string_view key);

 private:
  struct Impl;
  explicit Bucket(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// `text` percent-encoded as SigV4 wants it: every byte but A-Z a-z 0-9 - . _ ~ as %XX
// (upper-case hex), and '/' too unless `keep_slash`.
std::string uri_encode(std::string_view text, bool keep_slash);

}  // namespace tw::objstore
