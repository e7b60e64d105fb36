// The pack store over a bucket, and the bucket the configuration names (pack_store.hpp).
#include "objstore/pack_store.hpp"

#include <fstream>
#include <utility>

#include <fmt/format.h>

#include "common/escape.hpp"
#include "common/store_address.hpp"
#include "common/text.hpp"

namespace tw::objstore {
namespace {

struct Keys {
  std::string access;
  std::string secret;
};

// The keys of `file`, in the AWS credentials file's form: `aws_access_key_id` and
// `aws_secret_access_key` of its [default] section, or of lines before any section.
Result<Keys> read_credentials(const std::string& file) {
  std::ifstream in(file);
  if (!in) {
    return Error{fmt::format("store_credentials_file: cannot read {}", shown_path(file))};
  }
  Keys keys;
  std::string section = "default";
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();  // a file written on Windows
    const std::string text(trim(line));
    if (text.empty() || text.front() == '#' || text.front() == ';') continue;
    if (text.front() == '[' && text.back() == ']') {
      section = std::string(trim(std::string_view(text).substr(1, text.size() - 2)));
      continue;
    }
    const auto equals = text.find('=');
    if (section != "default" || equals == std::string::npos) continue;
    const std::string name(trim(std::string_view(text).substr(0, equals)));
    const std::string value(trim(std::string_view(text).substr(equals + 1)));
    if (name == "aws_access_key_id") keys.access = value;
    if (name == "aws_secret_access_key") keys.secret = value;
  }
  if (keys.access.empty() || keys.secret.empty()) {
    return Error{fmt::format(
        "store_credentials_file: {} has no aws_access_key_id and aws_secret_access_key in its "
        "[default] section",
        shown_path(file))};
  }
  return keys;
}

archive::Fault as_fault(const StoreError& error) {
  if (error.kind == Failure::Retry) return archive::retry(error.message);
  return archive::permanent(error.message);
}

}  // namespace

Result<std::optional<StoreTarget>> store_target(const Config& config) {
  if (config.store_endpoint.empty()) return std::optional<StoreTarget>();
  StoreTarget target;
  target.bucket.endpoint = config.store_endpoint;
  target.bucket.bucket = config.store_bucket;
  target.bucket.region = config.store_region;
  target.bucket.access_key = config.store_access_key;
  target.bucket.secret_key = config.store_secret_key;
  if (!config.store_credentials_file.empty() &&
      (target.bucket.access_key.empty() || target.bucket.secret_key.empty())) {
    auto keys = read_credentials(config.store_credentials_file);
    if (!keys) return keys.failure();
    if (target.bucket.access_key.empty()) target.bucket.access_key = keys->access;
    if (target.bucket.secret_key.empty()) target.bucket.secret_key = keys->secret;
  }
  if (config.store_bucket.empty()) return Error{"store_bucket: a store_endpoint needs a bucket"};
  if (target.bucket.access_key.empty() || target.bucket.secret_key.empty()) {
    return Error{
        "store_access_key, store_secret_key: a store_endpoint needs both keys (or "
        "store_credentials_file)"};
  }
  target.prefix = store_prefix(config);
  return std::optional<StoreTarget>(std::move(target));
}

BucketPackStore::BucketPackStore(Bucket bucket, std::string prefix)
    : bucket_(std::move(bucket)), prefix_(std::move(prefix)) {
  while (!prefix_.empty() && prefix_.back() == '/') prefix_.pop_back();
}

std::string BucketPackStore::file_key(std::string_view path) const {
  return prefix_.empty() ? std::string(path) : fmt::format("{}/{}", prefix_, path);
}

std::string BucketPackStore::key(std::string_view name) const {
  return file_key(fmt::format("packs/{}", name));
}

std::string where(const BucketConfig& bucket, std::string_view prefix) {
  return store_address(bucket.endpoint, bucket.bucket, prefix);
}

std::string BucketPackStore::where() const { return objstore::where(bucket_.config(), prefix_); }

archive::Done BucketPackStore::put(std::string_view name, std::span<const char> bytes) {
  auto put = bucket_.put(key(name), bytes);
  if (!put) return as_fault(put.failure());
  return Ok{};
}

archive::Done BucketPackStore::remove(std::string_view name) {
  auto removed = bucket_.remove(key(name));
  if (!removed) return as_fault(removed.failure());
  return Ok{};
}

archive::Expected<std::uint64_t> BucketPackStore::size(std::string_view name) {
  auto info = bucket_.head(key(name));
  if (!info) return as_fault(info.failure());
  return info->size;
}

archive::Expected<std::string> BucketPackStore::read(std::string_view name, std::uint64_t offset,
                                                     std::uint64_t length) {
  auto bytes = bucket_.get_range(key(name), offset, length);
  if (!bytes) return as_fault(bytes.failure());
  return std::move(*bytes);
}

archive::Done BucketPackStore::put_file(std::string_view path, std::span<const char> bytes) {
  auto put = bucket_.put(file_key(path), bytes);
  if (!put) return as_fault(put.failure());
  return Ok{};
}

archive::Expected<std::optional<std::string>> BucketPackStore::get_file(std::string_view path) {
  auto bytes = bucket_.get(file_key(path));
  if (!bytes) {
    if (bytes.failure().kind == Failure::NotFound) return std::optional<std::string>();
    return as_fault(bytes.failure());
  }
  return std::optional<std::string>(std::move(*bytes));
}

archive::Expected<std::vector<std::string>> BucketPackStore::list_files(std::string_view folder) {
  const std::string under = file_key(folder) + "/";
  auto listed = bucket_.list(under);
  if (!listed) {
    if (listed.failure().kind == Failure::NotFound) return std::vector<std::string>();
    return as_fault(listed.failure());
  }
  std::vector<std::string> out;
  for (const ObjectInfo& object : *listed) {
    const std::string_view name = std::string_view(object.key).substr(under.size());
    if (!name.empty() && name.find('/') == std::string_view::npos) out.emplace_back(name);
  }
  return out;
}

archive::Done BucketPackStore::remove_file(std::string_view path) {
  auto removed = bucket_.remove(file_key(path));
  if (!removed) return as_fault(removed.failure());
  return Ok{};
}

}  // namespace tw::objstore
