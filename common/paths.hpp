// Lexical path helpers shared by every component: the one spelling of "is this path
// inside that directory", of a path's parent and last component, and of joining a name to
// a directory. Paths are raw bytes (std::filesystem::path on Linux holds them unchanged);
// nothing here looks at the filesystem but absolute_path's working directory. Pure
// functions, safe from any thread.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace tw {

// `path` made absolute against the working directory and lexically normalised (". " and
// ".." resolved without following links; no trailing slash).
std::filesystem::path absolute_path(const std::filesystem::path& path);

// The longest of `roots` that contains `path` (component-wise), or an empty path.
std::filesystem::path source_root_of(const std::filesystem::path& path,
                                     const std::vector<std::filesystem::path>& roots);

// `child` is `dir` itself or lies beneath it (component-wise; both absolute and normal).
inline bool path_within(std::string_view child, std::string_view dir) {
  if (dir == "/") return !child.empty() && child.front() == '/';
  return child.size() >= dir.size() && child.compare(0, dir.size(), dir) == 0 &&
         (child.size() == dir.size() || child[dir.size()] == '/');
}

// The directory part of `path`: what precedes its last '/' ("/a/b" -> "/a", "a/b/c" ->
// "a/b", "/a/b/" -> "/a/b"); "/" for "/" and for a name directly under it ("/a"); "." for
// a name without any '/' (relative to the working directory).
std::string parent_path(std::string_view path);
// What follows the last '/' of `path` ("/a/b" -> "b", "/" -> "", "/a/" -> "", "a" -> "a").
std::string base_name(std::string_view path);

// `dir` + "/" + `name`, without doubling the slash of "/".
inline std::string join_path(std::string_view dir, std::string_view name) {
  std::string out(dir);
  if (out.empty() || out.back() != '/') out.push_back('/');
  out.append(name);
  return out;
}

}  // namespace tw
