// One change the monitor found in a source tree, before it becomes a queue item. Paths are
// raw bytes, absolute and lexically normal; they are escaped only when the item is written
// to the database.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "common/paths.hpp"
#include "common/protocol.hpp"

namespace tw::monitor {

// Queue priorities (timewarp.items.priority; the `priority` strategy claims higher first).
// Changes the watcher sees live, and the catch-up and overflow rescans that stand in for
// lost events, are live; the periodic rescan repairs what slipped through and waits behind.
inline constexpr int kLivePriority = 0;
inline constexpr int kRescanPriority = -1;

struct Change {
  Op op = Op::Update;
  std::string path;
  std::string dest;  // Op::Move only: the new name
  bool is_dir = false;
  std::optional<std::int64_t> size;  // of the file when the change was seen
  std::optional<double> mtime;       // seconds since the epoch
  int priority = kLivePriority;
  // How many changes this one stands for: a SCAN, its directory's and its entries' (what
  // fills the batcher's window); any other, one.
  std::size_t weight = 1;

  static Change update(std::string path, bool is_dir = false) {
    return {Op::Update, std::move(path), {}, is_dir, {}, {}, kLivePriority, 1};
  }
  static Change stat(std::string path, bool is_dir = false) {
    return {Op::Stat, std::move(path), {}, is_dir, {}, {}, kLivePriority, 1};
  }
  static Change remove(std::string path, bool is_dir = false) {
    return {Op::Delete, std::move(path), {}, is_dir, {}, {}, kLivePriority, 1};
  }
  static Change scan(std::string dir, std::size_t weight) {
    return {Op::Scan, std::move(dir), {}, true, {}, {}, kLivePriority, weight};
  }
  static Change move(std::string from, std::string to, bool is_dir = false) {
    return {Op::Move, std::move(from), std::move(to), is_dir, {}, {}, kLivePriority, 1};
  }
};

}  // namespace tw::monitor
