#include "common/paths.hpp"

#include <algorithm>

namespace tw {

std::filesystem::path absolute_path(const std::filesystem::path& path) {
  std::filesystem::path out =
      path.is_absolute() ? path : std::filesystem::current_path() / path;
  out = out.lexically_normal();
  std::string text = out.native();
  while (text.size() > 1 && text.back() == '/') text.pop_back();
  return text;
}

std::filesystem::path source_root_of(const std::filesystem::path& path,
                                     const std::vector<std::filesystem::path>& roots) {
  std::filesystem::path best;
  for (const auto& root : roots) {
    if (path_within(path.native(), root.native()) && root.native().size() > best.native().size()) {
      best = root;
    }
  }
  return best;
}

std::string parent_path(std::string_view path) {
  const auto slash = path.rfind('/');
  if (slash == std::string_view::npos) return ".";
  if (slash == 0) return "/";
  return std::string(path.substr(0, slash));
}

std::string base_name(std::string_view path) {
  return std::string(path.substr(path.rfind('/') + 1));
}

}  // namespace tw
