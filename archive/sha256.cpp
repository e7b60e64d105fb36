#include "archive/sha256.hpp"

#include <array>
#include <stdexcept>

#include <openssl/evp.h>

namespace tw::archive {
namespace {

// SHA-256 as the default provider implements it, fetched once: a digest begun with
// EVP_sha256() looks the implementation up again at every start (about 0.5 µs, as much as
// hashing 1 KiB), and a small file's content is hashed in a few µs.
const EVP_MD* sha256_md() {
  static const EVP_MD* const md = [] {
    const EVP_MD* fetched = EVP_MD_fetch(nullptr, "SHA256", nullptr);
    return fetched != nullptr ? fetched : EVP_sha256();
  }();
  return md;
}

}  // namespace

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  if (ctx_ == nullptr || EVP_DigestInit_ex(ctx_, sha256_md(), nullptr) != 1) {
    EVP_MD_CTX_free(ctx_);
    throw std::runtime_error("cannot initialise SHA-256");
  }
}

Sha256::~Sha256() { EVP_MD_CTX_free(ctx_); }

void Sha256::update(const void* data, std::size_t size) {
  if (size > 0) EVP_DigestUpdate(ctx_, data, size);
}

void Sha256::assign(const Sha256& other) {
  if (EVP_MD_CTX_copy_ex(ctx_, other.ctx_) != 1) {
    throw std::runtime_error("cannot copy a SHA-256 state");
  }
}

std::string Sha256::hex_digest() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(ctx_, digest, &length);
  EVP_DigestInit_ex(ctx_, sha256_md(), nullptr);
  return digest_hex(std::string_view(reinterpret_cast<const char*>(digest), length));
}

std::string sha256_hex(std::string_view data) {
  Sha256 sha;
  sha.update(data);
  return sha.hex_digest();
}

bool is_sha256_hex(std::string_view text) {
  if (text.size() != 64) return false;
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::string digest_hex(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * bytes.size());
  for (const char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    hex.push_back(kHex[b >> 4]);
    hex.push_back(kHex[b & 0x0F]);
  }
  return hex;
}

bool digest_bytes(std::string_view hex, std::span<unsigned char, 32> out) {
  if (!is_sha256_hex(hex)) return false;
  const auto value = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<unsigned char>(value(hex[2 * i]) * 16 + value(hex[2 * i + 1]));
  }
  return true;
}

std::string digest_bytes(std::string_view hex) {
  std::array<unsigned char, 32> bytes{};
  if (!digest_bytes(hex, bytes)) return {};
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

}  // namespace tw::archive
