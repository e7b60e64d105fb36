// Streaming SHA-256 (OpenSSL EVP) for archive contents and history checksums.
// One Sha256 belongs to one thread at a time.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

struct evp_md_ctx_st;

namespace tw::archive {

class Sha256 {
 public:
  Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  ~Sha256();

  void update(const void* data, std::size_t size);
  void update(std::string_view data) { update(data.data(), data.size()); }
  // Finishes the digest and returns it as 64 lower-case hex digits; resets for reuse.
  std::string hex_digest();

 private:
  evp_md_ctx_st* ctx_;
};

std::string sha256_hex(std::string_view data);

// True when `text` is 64 lower-case hex digits, the form of every digest in the archive.
bool is_sha256_hex(std::string_view text);

}  // namespace tw::archive
