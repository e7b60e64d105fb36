// Content objects: <root>/objects/<first two hex digits>/<sha256>.zst, one zstd frame of
// the uncompressed content named by its SHA-256. Streams through fixed-size buffers, so
// files of any size use bounded memory; a large file is compressed by zstd's worker
// threads while the calling thread reads and hashes it. Internal to the archive library.
// One ObjectStore belongs to one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "archiver/disk.hpp"
#include "archiver/store.hpp"
#include "common/result.hpp"

struct ZSTD_CCtx_s;

namespace tw::archive {

// The threads CompressionOptions::threads asks for: 0 is one per online core, at most 4.
int resolved_threads(int threads);

struct StoredContent {
  std::string sha256;
  std::uint64_t size = 0;         // uncompressed bytes read
  std::uint64_t bytes_added = 0;  // compressed bytes newly stored (0 when already present)
};

class ObjectStore {
 public:
  ObjectStore(DiskWriter& disk, std::function<bool()> cancelled, CompressionOptions compression);
  ObjectStore(const ObjectStore&) = delete;
  ObjectStore& operator=(const ObjectStore&) = delete;

  std::string path_of(const std::string& sha256) const;
  bool contains(const std::string& sha256) const;

  // Reads `fd` to its end, hashing and compressing into a new object unless one with that
  // digest exists. A length other than `expected_size` is reported as a change (RETRY).
  // `shown_path` names the source in messages.
  Expected<StoredContent> store(int fd, std::uint64_t expected_size, const std::string& shown_path);
  // Only hashes `fd` to its end (to find out cheaply whether the content is new).
  Expected<StoredContent> hash(int fd, std::uint64_t expected_size, const std::string& shown_path);

  // Decompresses object `sha256` into `out_fd` (-1: nowhere, just check), re-hashing it.
  // Fails, naming the damage, when the object is missing, corrupt, truncated, or its
  // content does not hash to its name. With `sparse`, runs of zeros become holes.
  Result<std::uint64_t> extract(const std::string& sha256, int out_fd, bool sparse) const;

 private:
  struct CCtxFree {
    void operator()(ZSTD_CCtx_s* cctx) const;
  };
  using CCtxPtr = std::unique_ptr<ZSTD_CCtx_s, CCtxFree>;

  Expected<StoredContent> read_source(int fd, std::uint64_t expected_size,
                                      const std::string& shown_path, bool compress);
  // True when a file of `size` bytes is hashed by a thread of its own (and, if it
  // compresses, compressed by zstd's worker threads).
  bool threaded(std::uint64_t size);
  // The single-threaded or multithreaded compression context, created on first use and
  // kept between files (the multithreaded one keeps its threads).
  ZSTD_CCtx_s* context(bool multi);
  // `context(multi)` ready for a new frame of `size` bytes.
  ZSTD_CCtx_s* compressor(std::uint64_t size, bool multi);
  // Whether samples of `fd` (at its start and in its middle) compress at the set level.
  bool compressible(int fd, std::uint64_t size);

  DiskWriter& disk_;
  std::function<bool()> cancelled_;
  int level_;
  int threads_;       // CompressionOptions::threads
  int workers_ = -1;  // zstd workers for large files; 0: none, no hashing thread; -1: unknown
  CCtxPtr single_;
  CCtxPtr multi_;
  std::vector<std::vector<char>> in_;  // read buffers: several when hashing in a thread
  std::vector<char> out_;
};

// Checks one object file by path (used by verify for files whose name may be wrong).
Result<std::uint64_t> check_object_file(const std::string& file, const std::string& expected_sha);

}  // namespace tw::archive
