#include "common/filters.hpp"

#include <algorithm>
#include <filesystem>
#include <stdexcept>
#include <system_error>

#include <fmt/format.h>

#include "common/escape.hpp"
#include "common/paths.hpp"

namespace tw {
namespace {

enum class TokenKind { Literal, AnyChar, Class, Star, DoubleStar };

struct Token {
  TokenKind kind = TokenKind::Literal;
  char literal = 0;
  std::string members;  // Class: pairs (lo, hi)
  bool negated = false;
};

std::vector<Token> tokenize(std::string_view p) {
  std::vector<Token> tokens;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      tokens.push_back({TokenKind::Literal, p[++i], {}, false});
    } else if (c == '*') {
      if (i + 1 < p.size() && p[i + 1] == '*') {
        while (i + 1 < p.size() && p[i + 1] == '*') ++i;
        tokens.push_back({TokenKind::DoubleStar, 0, {}, false});
      } else {
        tokens.push_back({TokenKind::Star, 0, {}, false});
      }
    } else if (c == '?') {
      tokens.push_back({TokenKind::AnyChar, 0, {}, false});
    } else if (c == '[') {
      Token t{TokenKind::Class, 0, {}, false};
      std::size_t j = i + 1;
      if (j < p.size() && (p[j] == '!' || p[j] == '^')) {
        t.negated = true;
        ++j;
      }
      bool first = true;
      bool closed = false;
      while (j < p.size()) {
        if (p[j] == ']' && !first) {
          closed = true;
          break;
        }
        first = false;
        char lo = p[j];
        if (lo == '\\' && j + 1 < p.size()) lo = p[++j];
        char hi = lo;
        if (j + 2 < p.size() && p[j + 1] == '-' && p[j + 2] != ']') {
          hi = p[j + 2];
          if (hi == '\\' && j + 3 < p.size()) {
            hi = p[j + 3];
            ++j;
          }
          j += 2;
        }
        t.members.push_back(lo);
        t.members.push_back(hi);
        ++j;
      }
      if (!closed) {
        tokens.push_back({TokenKind::Literal, '[', {}, false});  // a lone '[' is literal
      } else {
        tokens.push_back(std::move(t));
        i = j;
      }
    } else {
      tokens.push_back({TokenKind::Literal, c, {}, false});
    }
  }
  return tokens;
}

bool class_has(const Token& t, char c) {
  const auto u = static_cast<unsigned char>(c);
  bool in = false;
  for (std::size_t k = 0; k + 1 < t.members.size(); k += 2) {
    if (u >= static_cast<unsigned char>(t.members[k]) &&
        u <= static_cast<unsigned char>(t.members[k + 1])) {
      in = true;
      break;
    }
  }
  return in != t.negated;
}

bool has_slash(std::string_view pattern) { return pattern.find('/') != std::string_view::npos; }

}  // namespace

bool glob_match(std::string_view pattern, std::string_view text) {
  const auto tokens = tokenize(pattern);
  const std::size_t n = tokens.size();
  const std::size_t m = text.size();
  // row[j]: tokens[i..] match text[j..]; computed from the last token backwards.
  std::vector<char> next(m + 1, 0), row(m + 1, 0);
  next[m] = 1;  // empty pattern matches empty text
  for (std::size_t ii = n; ii-- > 0;) {
    const Token& t = tokens[ii];
    row.assign(m + 1, 0);
    for (std::size_t jj = m + 1; jj-- > 0;) {
      switch (t.kind) {
        case TokenKind::Literal:
          row[jj] = jj < m && text[jj] == t.literal && next[jj + 1];
          break;
        case TokenKind::AnyChar:
          row[jj] = jj < m && text[jj] != '/' && next[jj + 1];
          break;
        case TokenKind::Class:
          row[jj] = jj < m && text[jj] != '/' && class_has(t, text[jj]) && next[jj + 1];
          break;
        case TokenKind::Star:
          row[jj] = next[jj] || (jj < m && text[jj] != '/' && row[jj + 1]);
          break;
        case TokenKind::DoubleStar:
          row[jj] = next[jj] || (jj < m && row[jj + 1]);
          break;
      }
    }
    std::swap(row, next);
  }
  return next[0] != 0;
}

Filter::Filter(std::vector<std::string> roots, std::vector<std::string> exclude,
               std::vector<std::string> include, std::uint64_t max_file_size,
               std::string backup_root)
    : roots_(std::move(roots)),
      exclude_(std::move(exclude)),
      include_(std::move(include)),
      max_file_size_(max_file_size),
      backup_root_(std::move(backup_root)) {
  for (auto* patterns : {&exclude_, &include_}) {
    for (auto& p : *patterns) {
      while (p.size() > 1 && p.back() == '/') p.pop_back();
    }
  }
}

std::string resolve_source_dir(std::string_view dir) {
  const std::filesystem::path absolute = absolute_path(std::filesystem::path(std::string(dir)));
  std::error_code error;
  const std::filesystem::path resolved = std::filesystem::weakly_canonical(absolute, error);
  if (error) return absolute.native();
  return absolute_path(resolved).native();
}

Filter Filter::from_config(const Config& config) {
  std::vector<std::string> roots;
  // (given, resolved) pairs whose links were resolved, to rewrite absolute globs.
  std::vector<std::pair<std::string, std::string>> renamed;
  const std::string backup_root =
      config.backup_root.empty() ? std::string() : resolve_source_dir(config.backup_root);
  for (const auto& dir : config.source_dirs) {
    roots.push_back(resolve_source_dir(dir));
    const std::string given = absolute_path(dir).native();
    if (given != roots.back()) renamed.emplace_back(given, roots.back());
    if (!backup_root.empty() && path_within(roots.back(), backup_root)) {
      throw std::runtime_error(fmt::format(
          "source directory {} lies inside backup_root {}: the archive cannot archive itself",
          escape_bytes(roots.back()), escape_bytes(backup_root)));
    }
  }
  // An absolute glob written with a source directory as it was given means the same place
  // under its resolved name.
  const auto rewrite = [&renamed](std::vector<std::string> patterns) {
    for (auto& p : patterns) {
      for (const auto& [given, resolved] : renamed) {
        if (!p.empty() && p.front() == '/' && path_within(p, given)) {
          p = resolved + p.substr(given.size());
          break;
        }
      }
    }
    return patterns;
  };
  return Filter(std::move(roots), rewrite(config.exclude), rewrite(config.include),
                config.max_file_size, backup_root);
}

std::string Filter::root_of(std::string_view path) const {
  std::string best;
  for (const auto& root : roots_) {
    if (path_within(path, root) && root.size() >= best.size()) best = root;
  }
  return best;
}

bool Filter::matches(const std::vector<std::string>& patterns, std::string_view path,
                     std::string_view root) const {
  if (patterns.empty()) return false;
  const std::size_t slash = path.rfind('/');
  const std::string_view name = path.substr(slash + 1);
  std::string_view relative;
  if (path.size() > root.size()) relative = path.substr(root == "/" ? 1 : root.size() + 1);
  for (const auto& p : patterns) {
    if (p.empty()) continue;
    if (!has_slash(p)) {
      if (glob_match(p, name)) return true;
    } else if (p.front() == '/') {
      if (glob_match(p, path)) return true;
    } else if (!relative.empty() && glob_match(p, relative)) {
      return true;
    }
  }
  return false;
}

bool Filter::excluded(std::string_view path) const {
  const std::string root = root_of(path);
  if (root.empty()) return true;
  if (!backup_root_.empty() && path_within(path, backup_root_)) return true;
  if (exclude_.empty() || path.size() == root.size()) return false;
  // Every component below the root, shortest first: an excluded directory excludes all
  // beneath it.
  std::size_t end = root == "/" ? 0 : root.size();
  while (end < path.size()) {
    std::size_t next = path.find('/', end + 1);
    if (next == std::string_view::npos) next = path.size();
    const std::string_view prefix = path.substr(0, next);
    if (matches(exclude_, prefix, root) && !matches(include_, prefix, root)) return true;
    end = next;
  }
  return false;
}

bool Filter::too_big(const struct stat& st) const {
  return max_file_size_ > 0 && S_ISREG(st.st_mode) &&
         static_cast<std::uint64_t>(st.st_size) > max_file_size_;
}

}  // namespace tw
