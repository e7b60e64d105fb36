// The pack store seam (ARCHITECTURE.md, "Object store"): where an archive's sealed packs
// are copied so that they outlive the local disk. The archive ships through this interface
// (Store::ship) and never knows what is behind it; objstore/pack_store.hpp puts an
// S3-compatible bucket behind it. A pack is stored under its name (32 hex digits), whole;
// storing a name again replaces what was there (a pack cut back by a collection is shipped
// again). One PackStore belongs to one thread at a time.
#pragma once

#include <span>
#include <string>
#include <string_view>

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
};

}  // namespace tw::archive
