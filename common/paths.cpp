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
    const std::string& r = root.native();
    const std::string& p = path.native();
    const bool inside = p == r || (p.size() > r.size() && p.compare(0, r.size(), r) == 0 &&
                                   (r.back() == '/' || p[r.size()] == '/'));
    if (inside && r.size() > best.native().size()) best = root;
  }
  return best;
}

}  // namespace tw
