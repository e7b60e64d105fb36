#include "archive/paths.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "common/escape.hpp"

namespace tw::archive {

Expected<std::string> normalize_path(std::string_view raw) {
  if (raw.empty()) return permanent("empty path");
  if (raw.front() != '/') return permanent(fmt::format("relative path: {}", escape_bytes(raw)));
  if (raw.find('\0') != std::string_view::npos) {
    return permanent(fmt::format("path holds a NUL byte: {}", escape_bytes(raw)));
  }
  std::string out;
  out.reserve(raw.size());
  std::size_t i = 0;
  while (i < raw.size()) {
    while (i < raw.size() && raw[i] == '/') ++i;
    const std::size_t end = std::min(raw.find('/', i), raw.size());
    const std::string_view part = raw.substr(i, end - i);
    i = end;
    if (part.empty() || part == ".") continue;
    if (part == "..") return permanent(fmt::format("path holds '..': {}", escape_bytes(raw)));
    out.push_back('/');
    out.append(part);
  }
  if (out.empty()) return std::string("/");
  return out;
}

std::vector<std::string> components_below(std::string_view path, std::string_view dir) {
  std::vector<std::string> parts;
  std::string_view rest = path.substr(dir == "/" ? 0 : dir.size());
  while (!rest.empty()) {
    if (rest.front() == '/') {
      rest.remove_prefix(1);
      continue;
    }
    const auto slash = rest.find('/');
    parts.emplace_back(rest.substr(0, slash));
    if (slash == std::string_view::npos) break;
    rest.remove_prefix(slash);
  }
  return parts;
}

std::vector<std::string> sorted_once(std::vector<std::string> paths) {
  std::sort(paths.begin(), paths.end());
  paths.erase(std::unique(paths.begin(), paths.end()), paths.end());
  return paths;
}

}  // namespace tw::archive
