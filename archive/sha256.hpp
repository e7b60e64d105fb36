// Streaming SHA-256 (OpenSSL EVP) for archive contents and history checksums.
// One Sha256 belongs to one thread at a time; Sha256Thread hashes in a thread of its own.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
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

// A SHA-256 computed by a thread of its own, over buffers handed to it in order, so that
// hashing a large file overlaps reading and compressing it. Owned by one thread, which
// calls every method; the hashing thread only reads the buffers it is given.
class Sha256Thread {
 public:
  Sha256Thread();
  Sha256Thread(const Sha256Thread&) = delete;
  Sha256Thread& operator=(const Sha256Thread&) = delete;
  ~Sha256Thread();  // stops after the buffer in hand (the digest is then lost)

  // Queues `size` bytes at `data`, which must stay unchanged until wait(ticket) returns.
  std::uint64_t add(const void* data, std::size_t size);
  // Waits until the buffer given ticket `ticket` (and every one before it) is hashed.
  void wait(std::uint64_t ticket);
  // Waits for every buffer, then as Sha256::hex_digest.
  std::string hex_digest();

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable work_;  // for the hashing thread: a buffer or stop_
  std::condition_variable done_;  // for the owner: hashed_ reached waited_for_
  std::deque<std::pair<const void*, std::size_t>> queue_;  // guarded by mutex_
  std::uint64_t added_ = 0;                                // guarded by mutex_
  std::uint64_t hashed_ = 0;                               // guarded by mutex_
  std::uint64_t waited_for_ = 0;  // guarded by mutex_; the ticket the owner waits for
  bool idle_ = false;             // guarded by mutex_; the hashing thread waits for work
  bool stop_ = false;             // guarded by mutex_
  Sha256 sha_;                    // the hashing thread's until every buffer is hashed
  std::thread thread_;
};

std::string sha256_hex(std::string_view data);

// True when `text` is 64 lower-case hex digits, the form of every digest in the archive.
bool is_sha256_hex(std::string_view text);

// The lower-case hex form of raw digest bytes, and back: the 32 bytes of a digest in hex
// form (empty when `hex` is not one).
std::string digest_hex(std::string_view bytes);
std::string digest_bytes(std::string_view hex);

}  // namespace tw::archive
