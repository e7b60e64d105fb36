// Path helpers shared by the operator tool and the monitor. Paths are raw bytes
// (std::filesystem::path on Linux holds them unchanged). Pure functions.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace tw {

// `path` made absolute against the working directory and lexically normalised (". " and
// ".." resolved without following links; no trailing slash).
std::filesystem::path absolute_path(const std::filesystem::path& path);

// The longest of `roots` that contains `path` (component-wise), or an empty path.
std::filesystem::path source_root_of(const std::filesystem::path& path,
                                     const std::vector<std::filesystem::path>& roots);

}  // namespace tw
