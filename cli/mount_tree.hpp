// What `timewarp mount` shows (docs/operations.md, "Mounting the archive"): the archive as a
// read-only tree of inodes, independent of FUSE. The root holds `latest/` (every source as
// the archive holds it now), `at/` (a folder per instant typed, as restore --at reads it;
// listed: the moments retention keeps) and `versions/` (each archived path a folder: its
// children, and its file and link versions side by side, named by version_entry_name).
// Inode numbers are given on lookup and taken back when the kernel forgets them. Not
// thread-safe: the FUSE loop that drives it is single-threaded, as its Store must be.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "archive/store.hpp"

namespace tw::cli {

// The name of a file or link version inside versions/PATH/: its archive time in local time
// with the zone's offset, to the second, then its number (unique in the history), e.g.
// "2026-11-26T10:00:03+0100.v12". Names sort by time within a year's offset.
std::string version_entry_name(const archive::Version& v);

// An instant as at/ lists it: local time with offset, to the second, with the fraction of a
// second only when there is one; parse_time_ns reads it back to the same instant.
std::string instant_name(std::int64_t ns);

// The inode numbers the tree gives (the root's is FUSE's, 1).
using Ino = std::uint64_t;
inline constexpr Ino kRootIno = 1;

// An entry found or listed: its inode and attributes, or the errno why not.
struct Found {
  int error = 0;
  Ino ino = 0;
  struct stat attr {};
};

// One inode of the tree: which area it is in, and what it shows there.
struct MountNode {
  enum class Area : char { Root = 'R', AtList = 'L', Tree = 'T', Versions = 'V', Entry = 'E' };
  Area area = Area::Root;
  std::string view;                   // Tree: "latest", or "at/" and the name typed
  std::optional<std::int64_t> at_ns;  // Tree: the instant (nullopt: now)
  std::string path;                   // the archived path ("/" for a tree's root)
  // Tree and Entry: its version (Tree: nullopt for a folder known only as a parent, and a
  // tree's root); Versions: the latest directory version of its path, if any.
  std::optional<archive::Version> version;
  std::uint64_t lookups = 0;
};

// A directory's listing as opened: each entry's name and node, its inode given only when it
// is handed to the kernel with its attributes (readdirplus).
struct Listing {
  struct Entry {
    std::string name;
    MountNode node;
  };
  std::vector<Entry> entries;
};

class MountTree {
 public:
  explicit MountTree(archive::Store& store);

  Found lookup(Ino parent, const std::string& name);
  void forget(Ino ino, std::uint64_t count);
  Found attributes(Ino ino) const;
  // A directory's entries, "." and ".." first; nullptr and `error` when it cannot be listed.
  std::unique_ptr<Listing> list(Ino ino, int& error);
  // The inode and attributes of listed entry `e`, counted as looked up when `counted`.
  Found listed(const Listing::Entry& e, bool counted);
  // A symlink's target; `error` set when `ino` is no link.
  std::string link_target(Ino ino, int& error) const;
  // The version a regular file's inode stands for, to read from; nullopt and `error` else.
  std::optional<archive::Version> file_version(Ino ino, int& error) const;
  // Whether what `ino` shows never changes (a past instant, a version): its pages may stay
  // cached.
  bool immutable(Ino ino) const;
  // Up to `out.size()` bytes of `v`'s content from `offset`; -errno on failure.
  long read(const archive::Version& v, std::uint64_t offset, std::span<char> out);

 private:
  using Node = MountNode;
  using Area = MountNode::Area;
  static std::string key_of(const Node& n);
  Found found(Ino ino) const;
  Ino node(Node n, bool counted);
  Found lookup_tree(const Node& dir, const std::string& name);
  Found lookup_versions(const Node& dir, const std::string& name);
  Found lookup_at(const std::string& name);
  int list_tree(const Node& dir, Listing& out);
  int list_versions(const Node& dir, Listing& out);
  int list_at(Listing& out);
  // Whether `path` is a folder known only as the parent of archived paths (no history).
  bool parent_only(const std::string& path) const;
  struct stat stat_of(Ino ino, const Node& n) const;

  archive::Store& store_;
  std::int64_t mounted_ns_;  // the time of folders the archive knows only by name
  std::map<Ino, Node> nodes_;
  std::unordered_map<std::string, Ino> by_key_;
  Ino next_ino_ = kRootIno + 1;
};

}  // namespace tw::cli
