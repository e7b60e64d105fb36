// Streaming SHA-256 (OpenSSL EVP) for archive contents and history checksums.
// One Sha256 belongs to one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>

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
  // Takes `other`'s state: the digest of what `other` was given so far, to go on from.
  void assign(const Sha256& other);

 private:
  evp_md_ctx_st* ctx_;
};

// The SHA-256 of `data`, as 64 lower-case hex digits.
std::string sha256_hex(std::string_view data);

// True when `text` is 64 lower-case hex digits, the form of every digest in the archive.
bool is_sha256_hex(std::string_view text);

// The lower-case hex form of raw digest bytes, and back: the 32 bytes of a digest in hex
// form (empty when `hex` is not one).
std::string digest_hex(std::string_view bytes);
std::string digest_bytes(std::string_view hex);
// The same into `out`, without allocating: false (and `out` untouched) when `hex` is not one.
bool digest_bytes(std::string_view hex, std::span<unsigned char, 32> out);

}  // namespace tw::archive
