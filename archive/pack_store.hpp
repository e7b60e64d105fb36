// The pack store seam (ARCHITECTURE.md, "Object store"): where an archive's sealed packs
// are copied so that they outlive the local disk, and the catalog's snapshots beside them
// (FORMAT.md, "Shipping"). The archive ships through this interface (Store::ship), reads
// back through it when the local folder is gone (PackCache, pack_cache.hpp), and never knows
// what is behind it; objstore/pack_store.hpp puts an S3-compatible bucket behind it. A pack
// is stored under its name (32 hex digits), whole; storing a name again replaces what was
// there (a pack shipped as far as it was committed is shipped again once it grew). Other
// files are named by a path under the store's own place ("FORMAT", "catalog/NAME").
// One PackStore belongs to one thread at a time.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "archive/expected.hpp"

namespace tw::archive {

class PackStore {
 public:
  virtual ~PackStore() = default;
  // Where the packs go, for messages (no secret in it).
  virtual std::string where() const = 0;
  // Stores pack `name` as `bytes`, whole, once the store has them safely (a RETRY fault
  // for what may work later: the store down, slow or throttling).
  virtual Done put(std::string_view name, std::span<const char> bytes) = 0;
  // Removes pack `name`; one that is not there is no failure.
  virtual Done remove(std::string_view name) = 0;
  // The size of pack `name` as stored (PERMANENT when it is not there).
  virtual Expected<std::uint64_t> size(std::string_view name) = 0;
  // `length` bytes of pack `name` from `offset`, which the pack holds.
  virtual Expected<std::string> read(std::string_view name, std::uint64_t offset,
                                     std::uint64_t length) = 0;

  // The other files: `path` is relative to the store's place ("FORMAT", "catalog/NAME").
  virtual Done put_file(std::string_view path, std::span<const char> bytes) = 0;
  // The file's bytes, or nothing when there is no such file.
  virtual Expected<std::optional<std::string>> get_file(std::string_view path) = 0;
  // The names of the files in folder `folder` ("catalog"), in byte order.
  virtual Expected<std::vector<std::string>> list_files(std::string_view folder) = 0;
  virtual Done remove_file(std::string_view path) = 0;
};

}  // namespace tw::archive
