// The comparison behind `timewarp check`: walks a source tree on disk, directory by
// directory and without following links, beside the archive's latest state of the same
// paths, and reports every way they differ. Each directory's entries are compared with the
// archive's children of that directory, so memory grows with the largest directory and the
// depth, not with the tree.
//
// What the archive never keeps is skipped on both sides: paths the filters exclude (the
// backup root included), regular files over max_file_size (their older versions stay in
// the archive), fifos, sockets and devices.
//
// A TreeCheck is used by one thread at a time (as the Store it reads is).
#pragma once

#include <sys/stat.h>

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "archive/store.hpp"
#include "common/filters.hpp"

namespace tw::cli {

enum class DiffKind {
  Missing,     // on disk, not live in the archive
  Extra,       // live in the archive, not on disk
  Type,        // file, directory and symlink differ
  Size,        // a regular file's size
  Mtime,       // of a file, a symlink or a directory
  Mode,        // permission bits (07777)
  Owner,       // uid:gid
  Link,        // a symlink's target
  Content,     // a regular file's SHA-256 (only when asked, and only when sizes agree)
  Unreadable,  // a directory, file or history that could not be read: nothing is known
};
inline constexpr std::size_t kDiffKinds = 10;
std::string_view to_string(DiffKind kind);

// One difference. `archive` and `disk` are display values (escaped, one line); "-" where a
// side has nothing, and for Unreadable the side that failed holds the reason.
struct Difference {
  DiffKind kind = DiffKind::Missing;
  std::string path;  // raw bytes
  std::string archive;
  std::string disk;
};

struct CheckOptions {
  bool content = false;  // re-hash every regular file and compare the digests
};

class TreeCheck {
 public:
  using Report = std::function<void(const Difference&)>;

  // `store` and `filter` must outlive the TreeCheck. `report` receives each difference as
  // it is found, in walk order (a directory's entries by name, each subtree after its
  // directory; the archive-only entries of a directory after its entries on disk).
  TreeCheck(const archive::Store& store, const Filter& filter, CheckOptions options, Report report);

  // Compares `path` (absolute, canonical, no link among its ancestors) and everything
  // beneath it. A path the filters exclude is not compared at all.
  void check(const std::string& path);

  std::uint64_t compared() const { return compared_; }  // paths on disk compared
  std::uint64_t count(DiffKind kind) const { return counts_[static_cast<std::size_t>(kind)]; }
  std::uint64_t total() const;

 private:
  void emit(DiffKind kind, const std::string& path, std::string archive, std::string disk);
  // The latest version of `path` when it is not a tombstone; false when the history cannot
  // be read (reported).
  bool live_version(const std::string& path, std::optional<archive::Version>& live);
  // `st` is what lstat (or fstatat relative to `dir_fd`) found at `path`, whose last
  // component is `name`. Compares it, then what lies beneath it.
  void check_present(int dir_fd, const std::string& name, const std::string& path,
                     const struct stat& st);
  void compare(int dir_fd, const std::string& name, const std::string& path, const struct stat& st,
               const archive::Version& live);
  void compare_content(int dir_fd, const std::string& name, const std::string& path,
                       const archive::Version& live);
  // Every entry of the open directory `fd` at `path`, then its archive-only children.
  void walk(int fd, const std::string& path);
  // `path` and everything archived beneath it, known not to be on disk: each live one is
  // Extra.
  void report_gone(const std::string& path);
  // Everything archived beneath `path` (not `path` itself), which is not a directory on disk.
  void report_gone_beneath(const std::string& path);

  const archive::Store& store_;
  const Filter& filter_;
  const CheckOptions options_;
  const Report report_;
  std::uint64_t compared_ = 0;
  std::array<std::uint64_t, kDiffKinds> counts_{};
};

}  // namespace tw::cli
