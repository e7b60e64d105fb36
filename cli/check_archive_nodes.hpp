// The archived paths directly beneath one path, read from the archive's tree of nodes
// (archiver/FORMAT.md, "Layout": nodes/<kk>/<key>.children/<child key> markers, a node
// named by its <key>.path file or its history's `path` line). `timewarp check` lists one
// directory's children at a time with it, so a walk of a million files never holds the
// whole archive's list of paths in memory (Store::paths_within returns every path beneath
// a directory at once). It reads the documented layout directly because the archive
// library has no public per-directory listing yet; it belongs there, as a
// Store::children(path) beside paths_within.
//
// Read-only. Holds no state but the root, so it is safe from any thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"

namespace tw::cli {

class ArchiveNodes {
 public:
  explicit ArchiveNodes(std::string backup_root) : root_(std::move(backup_root)) {}

  // A node's key: the SHA-256 (hex) of the canonical raw path.
  static std::string key_of(std::string_view path);

  // The keys of the nodes marked directly beneath `path` (unsorted); empty when none.
  Result<std::vector<std::string>> child_keys(std::string_view path) const;
  // The path node `key` stands for; nothing when it has no name yet (a marker left by an
  // interrupted first archiving) or its name does not hash to `key` (damage, which
  // `verify` reports).
  std::optional<std::string> path_of(std::string_view key) const;

 private:
  std::string node_base(std::string_view key) const;

  std::string root_;
};

}  // namespace tw::cli
