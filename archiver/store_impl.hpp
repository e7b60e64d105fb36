// The parts of Store shared by its source files (store.cpp, restore.cpp, verify.cpp).
// Internal to the archive library; same thread-safety as Store.
#pragma once

#include <sys/stat.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "archiver/disk.hpp"
#include "archiver/history.hpp"
#include "archiver/objects.hpp"
#include "archiver/store.hpp"

namespace tw::archive {

// The text of <root>/FORMAT.
inline constexpr std::string_view kFormatLine = "timewarp-archive 1\n";

// An exclusive flock on one path's lock file, released on destruction.
class NodeLock {
 public:
  NodeLock() = default;
  explicit NodeLock(UniqueFd fd) : fd_(std::move(fd)) {}
  NodeLock(NodeLock&&) = default;
  NodeLock& operator=(NodeLock&&) = default;

 private:
  UniqueFd fd_;  // closing it releases the lock
};

struct Store::Impl {
  Impl(std::string root_dir, Store::Mode open_mode, StoreHooks store_hooks,
       CompressionOptions compression);

  // --- constant after construction
  std::string root;
  Store::Mode mode;
  StoreHooks hooks;

  // --- working state
  DiskWriter disk;
  ObjectStore objects;

  bool cancelled() const { return hooks.cancelled && hooks.cancelled(); }

  // Nodes: <root>/nodes/<kk>/<key>.history, .path, .lock and .children/<child key>, where
  // key is the SHA-256 of the raw path (FORMAT.md, "Layout").
  static std::string key_of(std::string_view path);
  std::string node_base(std::string_view key) const;
  std::string node_of(std::string_view path) const { return node_base(key_of(path)); }
  std::string history_file(std::string_view path) const { return node_of(path) + ".history"; }
  // The path a node stands for (from its .path file, else its history), if it has one.
  std::optional<std::string> path_of_key(std::string_view key) const;

  // The history of `path` (empty when none). Errors name the damaged file.
  Result<History> read_history(std::string_view path) const;
  static Result<History> read_history_file(const std::string& file);
  Expected<History> load_history(std::string_view path) const;
  Expected<std::uint64_t> save_history(const History& history);
  // Links `path` and every ancestor from its parent's .children. A `leaf` is about to get
  // a history (which names it); other nodes get a .path file.
  Expected<std::uint64_t> ensure_node(std::string_view path, bool leaf);
  Expected<NodeLock> lock_node(std::string_view path);
  Result<std::vector<std::string>> child_paths(std::string_view path) const;
  // `dir` and every archived path beneath it (nodes only; sorted). Empty when unknown.
  Result<std::vector<std::string>> paths_within(std::string_view dir) const;

  // Operations.
  Expected<std::uint64_t> archive(std::string_view raw, Op op);
  Expected<std::uint64_t> record(const std::string& path, Version version);
  Expected<std::uint64_t> remove(std::string_view raw);
  Expected<std::uint64_t> move(std::string_view raw_from, std::string_view raw_to);
  enum class MoveStep { Moved, AlreadyMoved, NothingToMove };
  Expected<MoveStep> move_one(const std::string& from, const std::string& to, std::uint64_t& bytes);
};

ArchiveResult to_archive_result(const Expected<std::uint64_t>& result);

}  // namespace tw::archive
