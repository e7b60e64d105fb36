// Content objects: <root>/objects/<first two hex digits>/<sha256>.zst, one zstd frame of
// the uncompressed content named by its SHA-256. Streams through fixed-size buffers, so
// files of any size use bounded memory. Internal to the archive library. One ObjectStore
// belongs to one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "archiver/disk.hpp"
#include "common/result.hpp"

namespace tw::archive {

struct StoredContent {
  std::string sha256;
  std::uint64_t size = 0;         // uncompressed bytes read
  std::uint64_t bytes_added = 0;  // compressed bytes newly stored (0 when already present)
};

class ObjectStore {
 public:
  ObjectStore(DiskWriter& disk, std::function<bool()> cancelled);
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
  Expected<StoredContent> read_source(int fd, std::uint64_t expected_size,
                                      const std::string& shown_path, bool compress);

  DiskWriter& disk_;
  std::function<bool()> cancelled_;
  std::vector<char> in_;
  std::vector<char> out_;
};

// Checks one object file by path (used by verify for files whose name may be wrong).
Result<std::uint64_t> check_object_file(const std::string& file, const std::string& expected_sha);

}  // namespace tw::archive
