// A source tree as the convergence promise sees it (ARCHITECTURE.md, "Convergence"): every
// entry's name, type, content, link target, mode, owner and mtime, for files, symlinks
// and directories. Tests take one of the live tree at a quiet moment and one of a restore,
// and compare them. Links are never followed; fifos, sockets and devices are left out (the
// archive does not keep them). Pure functions over the filesystem, safe from any thread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

namespace tw::test {

struct TreeEntry {
  char type = '?';  // 'f' file, 'l' symlink, 'd' directory
  std::uint32_t mode = 0;  // permission bits (07777)
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  std::int64_t mtime_ns = 0;
  std::uint64_t size = 0;  // files only
  std::string digest;      // files: SHA-256 of the content; links: the target (raw)
};

struct TreeOptions {
  bool root_metadata = true;  // compare the root directory's own mode, owner and mtime
  bool directory_mtimes = true;
  bool owners = true;
};

// Keys are raw paths relative to the root ("" is the root itself, "a/b" below it).
using TreeSnapshot = std::map<std::string, TreeEntry>;

// Walks `root` (which must be a directory) without following links. Throws
// std::runtime_error when it cannot be read.
TreeSnapshot snapshot_tree(const std::filesystem::path& root);

// Every difference between `expected` and `actual`, one line each with escaped names
// ("missing a/b", "extra c", "a/b: mtime 1.5 != 2.0"...); empty when they are equal.
std::string diff_trees(const TreeSnapshot& expected, const TreeSnapshot& actual,
                       const TreeOptions& options = {});

}  // namespace tw::test
