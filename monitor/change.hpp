// One change the monitor found in a source tree, before it becomes a queue item. Paths are
// raw bytes, absolute and lexically normal; they are escaped only when the item is written
// to the database.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/protocol.hpp"

namespace tw::monitor {

struct Change {
  Op op = Op::Update;
  std::string path;
  std::string dest;  // Op::Move only: the new name
  bool is_dir = false;
  std::optional<std::int64_t> size;  // of the file when the change was seen
  std::optional<double> mtime;       // seconds since the epoch

  static Change update(std::string path, bool is_dir = false) {
    return {Op::Update, std::move(path), {}, is_dir, {}, {}};
  }
  static Change stat(std::string path, bool is_dir = false) {
    return {Op::Stat, std::move(path), {}, is_dir, {}, {}};
  }
  static Change remove(std::string path, bool is_dir = false) {
    return {Op::Delete, std::move(path), {}, is_dir, {}, {}};
  }
  static Change move(std::string from, std::string to, bool is_dir = false) {
    return {Op::Move, std::move(from), std::move(to), is_dir, {}, {}};
  }
};

// `child` is `dir` itself or lies beneath it (component-wise; both absolute and normal).
inline bool path_within(std::string_view child, std::string_view dir) {
  if (dir == "/") return !child.empty() && child.front() == '/';
  return child.size() >= dir.size() && child.compare(0, dir.size(), dir) == 0 &&
         (child.size() == dir.size() || child[dir.size()] == '/');
}

// `dir` + "/" + `name`, without doubling the slash of "/".
inline std::string join_path(std::string_view dir, std::string_view name) {
  std::string out(dir);
  if (out.empty() || out.back() != '/') out.push_back('/');
  out.append(name);
  return out;
}

}  // namespace tw::monitor
