// Lexical handling of the absolute source paths the archive is keyed by. Paths are raw
// bytes (any byte but NUL). Pure functions, safe from any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "archive/expected.hpp"

namespace tw::archive {

// The canonical form of an absolute path: repeated slashes collapsed, "." components and a
// trailing slash dropped. Refuses relative paths, ".." components and NUL bytes, since
// those cannot be resolved without the filesystem (PERMANENT: the path itself is wrong).
Expected<std::string> normalize_path(std::string_view raw);

// (The parent, the last component and "is this path inside that directory" are in
// common/paths.hpp: parent_path, base_name, path_within.)

// The components of `path` below `dir` (path_within must hold); empty for `dir` itself.
std::vector<std::string> components_below(std::string_view path, std::string_view dir);

// `paths` sorted, each once (a layout may list a path twice: staged and committed, or by two
// markers a power cut left).
std::vector<std::string> sorted_once(std::vector<std::string> paths);

}  // namespace tw::archive
