// Helpers shared by the generator's source files (convergence_generator*.cpp): the name
// pool and lexical work on relative paths ("" is the source root). Pure functions.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "common/escape.hpp"

namespace tw::test::convergence::generator_detail {

// Names that have broken tools before: spaces at either end, newlines, tabs, '%' (the
// escape character of the wire format), control bytes, invalid UTF-8, non-ASCII, a leading
// dash, dot files, editor backups, long names.
inline const std::vector<std::string>& name_pool() {
  static const std::vector<std::string> pool = {
      "a",
      "b",
      "notes.txt",
      "data.bin",
      "with space",
      "trailing ",
      " leading",
      "new\nline",
      "tab\there",
      "100%",
      "%41%25",
      "\xff\xfe",
      "caf\xc3\xa9",
      "bad\xc3(utf8",
      "-dash",
      ".hidden",
      "x~",
      "\x01"
      "ctl\x7f",
      "\xe6\x97\xa5\xe6\x9c\xac",
      "UPPER",
      "dots.in.nm",
      "q\"uote'",
      "back\\slash",
      "star*?[x]",
      std::string(120, 'n'),
  };
  return pool;
}

inline std::string esc(const std::string& rel) {
  return rel.empty() ? "(root)" : escape_bytes(rel);
}

inline std::string parent_of(const std::string& rel) {
  const auto slash = rel.rfind('/');
  return slash == std::string::npos ? "" : rel.substr(0, slash);
}

inline std::string base_of(const std::string& rel) {
  const auto slash = rel.rfind('/');
  return slash == std::string::npos ? rel : rel.substr(slash + 1);
}

inline int depth_of(const std::string& rel) {
  if (rel.empty()) return 0;
  int d = 1;
  for (char c : rel) d += c == '/';
  return d;
}

inline bool within(const std::string& rel, const std::string& dir) {
  return rel == dir || (rel.size() > dir.size() && rel.compare(0, dir.size(), dir) == 0 &&
                        rel[dir.size()] == '/');
}

// The whole content of a regular file (empty when it cannot be read); never follows a link.
inline std::string read_all(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  std::string out;
  char buffer[65536];
  ssize_t n;
  while (fd >= 0 && (n = ::read(fd, buffer, sizeof buffer)) > 0) {
    out.append(buffer, static_cast<std::size_t>(n));
  }
  if (fd >= 0) ::close(fd);
  return out;
}

}  // namespace tw::test::convergence::generator_detail
