// One bucket of an S3-compatible object store (objstore/bucket.hpp).
#include "objstore/bucket.hpp"

#include <curl/curl.h>
#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <iterator>
#include <mutex>
#include <utility>

#include <fmt/format.h>
#include <pugixml.hpp>

#include "common/escape.hpp"
#include "common/text.hpp"

namespace tw::objstore {
namespace {

constexpr std::string_view kHex = "0123456789ABCDEF";

std::string sha256_hex(std::span<const char> bytes) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int size = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest.data(), &size, EVP_sha256(), nullptr);
  std::string out;
  out.reserve(size * 2);
  for (unsigned int i = 0; i < size; ++i)
    fmt::format_to(std::back_inserter(out), "{:02x}", digest[i]);
  return out;
}

// A key as a listing with encoding-type=url gives it, decoded.
std::string uri_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto byte =
        text[i] == '%' ? parse_int<std::uint8_t>(text.substr(i + 1, 2), 16) : std::nullopt;
    if (byte && text.size() > i + 2) {
      out += static_cast<char>(*byte);
      i += 2;
    } else {
      out += text[i] == '+' ? ' ' : text[i];
    }
  }
  return out;
}

bool valid_bucket_name(std::string_view name) {
  if (name.size() < 3 || name.size() > 63) return false;
  const auto plain = [](char c) {
    return std::islower(static_cast<unsigned char>(c)) ||
           std::isdigit(static_cast<unsigned char>(c));
  };
  if (!plain(name.front()) || !plain(name.back())) return false;
  return std::all_of(name.begin(), name.end(),
                     [&](char c) { return plain(c) || c == '.' || c == '-'; });
}

// The store's own words for a failure: the Code and Message of its XML error body.
std::pair<std::string, std::string> store_words(const std::string& body) {
  pugi::xml_document doc;
  if (body.empty() || !doc.load_buffer(body.data(), body.size())) return {};
  const pugi::xml_node error = doc.child("Error");
  return {error.child_value("Code"), error.child_value("Message")};
}

StoreError failure_of(long status, const std::string& body, const std::string& what) {
  auto [code, message] = store_words(body);
  std::string said = fmt::format("HTTP {}", status);
  if (!code.empty()) {
    said += ", " + shown_path(message.empty() ? code : fmt::format("{}: {}", code, message));
  }
  Failure kind = Failure::Permanent;
  if (status == 404) {
    kind = Failure::NotFound;
  } else if (status >= 500 || status == 408 || status == 429) {
    kind = Failure::Retry;
  }
  return StoreError{kind, fmt::format("{}: {}", what, said), status, std::move(code)};
}

size_t append_body(char* data, size_t size, size_t count, void* to) {
  static_cast<std::string*>(to)->append(data, size * count);
  return size * count;
}

void init_curl_once() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

}  // namespace

std::string uri_encode(std::string_view text, bool keep_slash) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) != 0 || c == '-' || c == '.' || c == '_' || c == '~' ||
        (keep_slash && c == '/')) {
      out += c;
    } else {
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  return out;
}

struct Bucket::Impl {
  BucketConfig config;
  CURL* curl = nullptr;

  struct Answer {
    long status = 0;
    std::string body;
  };
  struct Request {
    Request(const char* m, std::string p, std::string w)
        : method(m), path(std::move(p)), what(std::move(w)) {}
    const char* method = "GET";
    std::string path;   // below the bucket: "" or "/key" (encoded)
    std::string query;  // canonical: names sorted, values encoded; no '?'
    std::span<const char> body;
    std::vector<std::string> headers;
    std::string what;  // for messages: "PUT key"
  };

  ~Impl() {
    if (curl != nullptr) curl_easy_cleanup(curl);
  }

  Outcome<Answer> send(const Request& request);
  std::string object_path(std::string_view key) const { return "/" + uri_encode(key, true); }
};

Outcome<Bucket::Impl::Answer> Bucket::Impl::send(const Request& request) {
  curl_easy_reset(curl);  // keeps the connection
  std::string url = fmt::format("{}/{}{}", config.endpoint, config.bucket, request.path);
  if (!request.query.empty()) url += "?" + request.query;
  const std::string sigv4 = fmt::format("aws:amz:{}:s3", config.region);
  char error[CURL_ERROR_SIZE] = {};
  Answer answer;
  curl_slist* headers = nullptr;
  const std::string payload_hash = "x-amz-content-sha256: " + sha256_hex(request.body);
  headers = curl_slist_append(headers, payload_hash.c_str());
  for (const auto& header : request.headers) headers = curl_slist_append(headers, header.c_str());
  const std::string method = request.method;
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_AWS_SIGV4, sigv4.c_str());
  curl_easy_setopt(curl, CURLOPT_USERNAME, config.access_key.c_str());
  curl_easy_setopt(curl, CURLOPT_PASSWORD, config.secret_key.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(config.connect_timeout.count()));
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1024L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME,
                   std::max(1L, static_cast<long>(config.stall_timeout.count() / 1000)));
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, append_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &answer.body);
  if (method == "HEAD") {
    curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
  } else if (method == "PUT") {
    headers = curl_slist_append(headers, "Content-Type: application/octet-stream");
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, request.body.data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE,
                     static_cast<curl_off_t>(request.body.size()));
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, "PUT");
  } else if (method != "GET") {
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, request.method);
  }
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  const CURLcode code = curl_easy_perform(curl);
  curl_slist_free_all(headers);
  if (code != CURLE_OK) {
    const std::string why = error[0] != '\0' ? error : curl_easy_strerror(code);
    return StoreError{Failure::Retry,
                      fmt::format("{}: no answer from {}: {}", request.what, config.endpoint, why),
                      0,
                      {}};
  }
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &answer.status);
  if (answer.status < 200 || answer.status >= 300) {
    return failure_of(answer.status, answer.body, request.what);
  }
  return answer;
}

Result<Bucket> Bucket::open(BucketConfig config) {
  while (!config.endpoint.empty() && config.endpoint.back() == '/') config.endpoint.pop_back();
  const std::string_view endpoint = config.endpoint;
  const auto scheme_end = endpoint.find("://");
  const std::string_view scheme = endpoint.substr(0, scheme_end);
  if (scheme_end == std::string_view::npos || (scheme != "http" && scheme != "https") ||
      endpoint.size() == scheme_end + 3 ||
      endpoint.find('/', scheme_end + 3) != std::string_view::npos) {
    return Error{fmt::format("endpoint {}: not http://host[:port] or https://host[:port]",
                             shown_path(endpoint))};
  }
  if (!valid_bucket_name(config.bucket)) {
    return Error{
        fmt::format("bucket {}: not a bucket name (3 to 63 of a-z, 0-9, '.' and '-', beginning and "
                    "ending with a letter or digit)",
                    shown_path(config.bucket))};
  }
  if (config.region.empty()) return Error{"region: empty"};
  if (config.access_key.empty()) return Error{"access key: empty"};
  if (config.secret_key.empty()) return Error{"secret key: empty"};
  init_curl_once();
  auto impl = std::make_unique<Impl>();
  impl->config = std::move(config);
  impl->curl = curl_easy_init();
  if (impl->curl == nullptr) return Error{"cannot set up an HTTP client (out of memory)"};
  return Bucket(std::move(impl));
}

Bucket::Bucket(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Bucket::~Bucket() = default;
Bucket::Bucket(Bucket&&) noexcept = default;
Bucket& Bucket::operator=(Bucket&&) noexcept = default;

const BucketConfig& Bucket::config() const { return impl_->config; }

Outcome<Ok> Bucket::create() {
  Impl::Request request("PUT", "", "creating bucket " + impl_->config.bucket);
  auto answer = impl_->send(request);
  if (!answer) {
    // Ours already: made by an earlier run, or by another host with the same keys.
    const StoreError& failed = answer.failure();
    if (failed.status == 409 && failed.code == "BucketAlreadyOwnedByYou") return Ok{};
    return answer.failure();
  }
  return Ok{};
}

Outcome<Ok> Bucket::put(std::string_view key, std::span<const char> bytes) {
  Impl::Request request("PUT", impl_->object_path(key), "PUT " + shown_path(key));
  request.body = bytes;
  auto answer = impl_->send(request);
  if (!answer) return answer.failure();
  return Ok{};
}

Outcome<std::string> Bucket::get(std::string_view key) {
  Impl::Request request("GET", impl_->object_path(key), "GET " + shown_path(key));
  auto answer = impl_->send(request);
  if (!answer) return answer.failure();
  return std::move(answer.value().body);
}

Outcome<std::string> Bucket::get_range(std::string_view key, std::uint64_t offset,
                                       std::uint64_t length) {
  const std::string what = fmt::format("GET {} bytes {}+{}", shown_path(key), offset, length);
  if (length == 0) return std::string();
  Impl::Request request("GET", impl_->object_path(key), what);
  request.headers.push_back(fmt::format("Range: bytes={}-{}", offset, offset + length - 1));
  auto answer = impl_->send(request);
  if (!answer) return answer.failure();
  if (answer->status != 206) {
    // A store that ignores ranges answers 200 with the whole object.
    if (answer->status == 200 && answer->body.size() >= offset + length) {
      return answer->body.substr(offset, length);
    }
    return StoreError{Failure::Retry,
                      fmt::format("{}: HTTP {} instead of a range", what, answer->status),
                      answer->status,
                      {}};
  }
  if (answer->body.size() != length) {
    return StoreError{Failure::Retry,
                      fmt::format("{}: {} bytes came", what, answer->body.size()),
                      answer->status,
                      {}};
  }
  return std::move(answer.value().body);
}

Outcome<ObjectInfo> Bucket::head(std::string_view key) {
  Impl::Request request("HEAD", impl_->object_path(key), "HEAD " + shown_path(key));
  auto answer = impl_->send(request);
  if (!answer) return answer.failure();
  ObjectInfo info;
  info.key = std::string(key);
  curl_off_t size = 0;
  curl_easy_getinfo(impl_->curl, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &size);
  info.size = size > 0 ? static_cast<std::uint64_t>(size) : 0;
  curl_header* etag = nullptr;
  if (curl_easy_header(impl_->curl, "ETag", 0, CURLH_HEADER, -1, &etag) == CURLHE_OK) {
    info.etag = etag->value;
    std::erase(info.etag, '"');
  }
  return info;
}

Outcome<std::vector<ObjectInfo>> Bucket::list(std::string_view prefix, int page) {
  page = std::clamp(page, 1, 1000);
  std::vector<ObjectInfo> out;
  std::string token;
  const std::string what = "listing " + shown_path(prefix) + "*";
  while (true) {
    // The query's names in order, as the signature's canonical form wants them.
    std::string query;
    if (!token.empty()) query += "continuation-token=" + uri_encode(token, false) + "&";
    query += fmt::format("encoding-type=url&list-type=2&max-keys={}&prefix={}", page,
                         uri_encode(prefix, false));
    Impl::Request request("GET", "", what);
    request.query = query;
    auto answer = impl_->send(request);
    if (!answer) return answer.failure();
    pugi::xml_document doc;
    if (!doc.load_buffer(answer->body.data(), answer->body.size())) {
      return StoreError{Failure::Retry, what + ": the answer is not XML", 200, {}};
    }
    const pugi::xml_node result = doc.child("ListBucketResult");
    for (const pugi::xml_node item : result.children("Contents")) {
      ObjectInfo info;
      info.key = uri_decode(item.child_value("Key"));
      info.size = item.child("Size").text().as_ullong();
      info.etag = item.child_value("ETag");
      std::erase(info.etag, '"');
      out.push_back(std::move(info));
    }
    if (std::string_view(result.child_value("IsTruncated")) != "true") break;
    std::string next = result.child_value("NextContinuationToken");
    if (next.empty() || next == token) {
      return StoreError{Failure::Retry, what + ": a truncated page without a way on", 200, {}};
    }
    token = std::move(next);
  }
  return out;
}

Outcome<Ok> Bucket::remove(std::string_view key) {
  Impl::Request request("DELETE", impl_->object_path(key), "DELETE " + shown_path(key));
  auto answer = impl_->send(request);
  if (!answer && answer.failure().kind != Failure::NotFound) return answer.failure();
  return Ok{};
}

}  // namespace tw::objstore
