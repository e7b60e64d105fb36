// Which paths of the source trees TimeWarp archives (the monitor queues them, `timewarp
// check` compares them): the `exclude` and `include` globs
// and `max_file_size` of the configuration. Immutable after construction, so safe to use
// from several threads.
//
// Glob rules (decided here; docs/decisions.md, "The monitor"):
//   - `*` and `?` match within one path component, `**` matches across `/`, `[a-z]`,
//     `[!a]` / `[^a]` are classes, `\` quotes the next character;
//   - a pattern without `/` is matched against the name of every component below the
//     source root (so `*.tmp` or `.git` matches at any depth);
//   - a pattern starting with `/` is matched against the absolute path, any other pattern
//     with a `/` against the path relative to its source root (`build/*.o`);
//   - a path is excluded when it, or a directory above it (below its source root),
//     matches an exclude pattern and that same path does not match an include pattern. An
//     excluded directory is neither watched nor scanned.
// The backup root is always excluded when it lies inside a source directory (else the
// archivers' own writes would be archived again, for ever).
//
// Source directories are resolved once, when the filter is made from the configuration:
// made absolute and every symbolic link in them (in any component) replaced by what it
// points to, so that no path the monitor queues has a link among its components (the
// archiver treats a path beneath a link as absent). The backup root is resolved the same
// way, and an absolute glob written with a source directory as given applies to its
// resolved name.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/config.hpp"

namespace tw {

// `dir` made absolute and lexically normal, with every symbolic link in the part of it
// that exists resolved (realpath); the rest is kept as given.
std::string resolve_source_dir(std::string_view dir);

// Matches `text` against one glob `pattern` (rules above). Linear in |pattern|·|text|.
bool glob_match(std::string_view pattern, std::string_view text);

class Filter {
 public:
  Filter() = default;
  // `roots` are absolute, lexically normal source directories (with no link among their
  // components, for the monitor).
  Filter(std::vector<std::string> roots, std::vector<std::string> exclude,
         std::vector<std::string> include, std::uint64_t max_file_size,
         std::string backup_root = {});
  // The source directories and the backup root resolved (resolve_source_dir). Throws
  // std::runtime_error when a source directory lies inside the backup root.
  static Filter from_config(const Config& config);

  // True when `path` (absolute, normal) must not be queued. Paths outside every root are
  // excluded too.
  bool excluded(std::string_view path) const;
  // True for a regular file over max_file_size: not queued (its older versions stay).
  bool too_big(const struct stat& st) const;
  // True when some file may be too big (max_file_size set).
  bool limits_size() const { return max_file_size_ > 0; }

  const std::vector<std::string>& roots() const { return roots_; }
  // The root `path` belongs to (the longest containing one), or "" when none.
  std::string root_of(std::string_view path) const;

 private:
  bool matches(const std::vector<std::string>& patterns, std::string_view path,
               std::string_view root) const;

  std::vector<std::string> roots_;
  std::vector<std::string> exclude_;
  std::vector<std::string> include_;
  std::uint64_t max_file_size_ = 0;
  std::string backup_root_;  // absolute, normal; "" when none
};

}  // namespace tw
