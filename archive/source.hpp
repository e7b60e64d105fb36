// Looking at source paths the way convergence needs (ARCHITECTURE.md, "Convergence"): with
// lstat, never following a symlink in any component of the path. The parent directory is
// resolved with openat2(RESOLVE_NO_SYMLINKS) or, on kernels without openat2, one
// O_NOFOLLOW component at a time from "/"; everything after is relative to that
// descriptor, so a rename of an ancestor into a symlink between two steps cannot redirect
// a read. A path with a symlink among its ancestors is not part of the tree: it is absent.
// Internal to the archive library; plain functions, safe from any thread.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "archive/expected.hpp"
#include "common/fd.hpp"

namespace tw::archive {

struct SourceLook {
  bool present = false;
  struct stat st {};  // lstat of the path when present
  UniqueFd parent;    // its parent directory (O_PATH) when present
  std::string name;   // the last component; "." for "/"
  // When present on a pseudo filesystem (common/filesystems.hpp): its name ("proc").
  std::optional<std::string_view> pseudo_filesystem;

  bool is_file() const { return present && S_ISREG(st.st_mode); }
  bool is_symlink() const { return present && S_ISLNK(st.st_mode); }
  bool is_directory() const { return present && S_ISDIR(st.st_mode); }
  // A regular file, symlink or directory holding data: something the archive keeps.
  bool archivable() const {
    return (is_file() || is_symlink() || is_directory()) && !pseudo_filesystem;
  }
};

// Looks at canonical absolute `path` (and at the filesystem it lies on). ENOENT, ENOTDIR
// and a symlink among the ancestors give an absent look; other errors are faults (EACCES:
// PERMANENT; EIO and the like: RETRY).
Expected<SourceLook> look_at(const std::string& path);

// Opens what `look` found: a regular file for reading (O_NOFOLLOW, O_NOATIME when allowed),
// or a directory for listing. Errors as errno values (ELOOP: replaced by a link meanwhile).
UniqueFd open_looked(const SourceLook& look, bool directory);

// The entry names of the directory `look` found (without "." and ".."). Fails with the
// errno when it cannot be listed.
Expected<std::vector<std::string>> list_looked(const SourceLook& look,
                                               const std::string& shown_path);

// The target of the symlink `look` found; RETRY when it is no longer a link.
Expected<std::string> read_looked_link(const SourceLook& look, const std::string& shown_path);

// True when two lstat results describe the same unchanged file (device, inode, size,
// mtime, ctime).
bool same_file_state(const struct stat& a, const struct stat& b);

}  // namespace tw::archive

namespace tw::archive {

// The SHA-256 (hex) of what `fd` holds from where it stands to its end, which must be
// `expected_size` bytes (another length is a change: RETRY). `cancelled` (optional) is
// polled between reads.
Expected<std::string> hash_source(int fd, std::uint64_t expected_size, const std::string& shown,
                                  const std::function<bool()>& cancelled);

}  // namespace tw::archive
