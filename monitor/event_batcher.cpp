#include "monitor/event_batcher.hpp"

#include <algorithm>

namespace tw::monitor {

EventBatcher::EventBatcher(Options options, std::function<void()> notify)
    : notify_(std::move(notify)),
      max_items_(std::max<std::size_t>(1, options.max_items)),
      delay_(options.delay) {}

void EventBatcher::add(Change change) {
  bool wake = false;
  {
    std::lock_guard lock(mutex_);
    wake = add_locked(std::move(change));
  }
  if (wake && notify_) notify_();
}

void EventBatcher::add(std::vector<Change> changes) {
  bool wake = false;
  {
    std::lock_guard lock(mutex_);
    for (auto& c : changes) wake = add_locked(std::move(c)) || wake;
  }
  if (wake && notify_) notify_();
}

std::size_t EventBatcher::append(Change change) {
  slots_.push_back(std::move(change));
  ++live_;
  return slots_.size() - 1;
}

void EventBatcher::drop(std::size_t index) {
  if (!slots_[index]) return;
  slots_[index].reset();
  --live_;
}

// Drops the waiting UPDATE/STAT/DELETE of `path` (and, with and_beneath, of every path
// beneath it).
void EventBatcher::drop_path(const std::string& path, bool and_beneath) {
  if (auto it = by_path_.find(path); it != by_path_.end()) {
    drop(it->second);
    by_path_.erase(it);
  }
  if (!and_beneath) return;
  const std::string prefix = path == "/" ? path : path + "/";
  auto it = by_path_.lower_bound(prefix);
  while (it != by_path_.end() && it->first.compare(0, prefix.size(), prefix) == 0) {
    drop(it->second);
    it = by_path_.erase(it);
  }
}

bool EventBatcher::add_locked(Change change) {
  const bool was_empty = live_ == 0;
  if (change.op == Op::Move) {
    if (change.path == change.dest) return false;
    drop_path(change.path, change.is_dir);
    drop_path(change.dest, change.is_dir);
    // A chain a->b, b->c is one move a->c; a->b, b->a is no move at all.
    if (auto it = move_by_dest_.find(change.path); it != move_by_dest_.end()) {
      const std::size_t index = it->second;
      move_by_dest_.erase(it);
      Change earlier = std::move(*slots_[index]);
      drop(index);
      if (earlier.path == change.dest) return false;
      change.path = std::move(earlier.path);
    }
    const std::string dest = change.dest;
    move_by_dest_[dest] = append(std::move(change));
  } else {
    if (change.op == Op::Delete) {
      drop_path(change.path, change.is_dir);
      // A path that arrived by a waiting MOVE and is gone again: the file simply left its
      // old name (a MOVE then a DELETE of the new name could run in either order).
      std::vector<std::size_t> arrived;
      if (auto it = move_by_dest_.find(change.path); it != move_by_dest_.end()) {
        arrived.push_back(it->second);
        move_by_dest_.erase(it);
      }
      if (change.is_dir) {
        const std::string prefix = change.path == "/" ? change.path : change.path + "/";
        auto it = move_by_dest_.lower_bound(prefix);
        while (it != move_by_dest_.end() && it->first.compare(0, prefix.size(), prefix) == 0) {
          arrived.push_back(it->second);
          it = move_by_dest_.erase(it);
        }
      }
      for (const std::size_t index : arrived) {
        Change moved = std::move(*slots_[index]);
        drop(index);
        drop_path(moved.path, moved.is_dir);
        const std::string source = moved.path;
        by_path_[source] = append(Change::remove(std::move(moved.path), moved.is_dir));
      }
    }
    if (auto it = by_path_.find(change.path); it != by_path_.end()) {
      Change& earlier = *slots_[it->second];
      if (change.op == Op::Stat && earlier.op == Op::Update) change.op = Op::Update;
      if (change.op == Op::Stat && earlier.op == Op::Delete) change.op = Op::Update;
      if (!change.size) change.size = earlier.size;
      if (!change.mtime) change.mtime = earlier.mtime;
      drop(it->second);
      by_path_.erase(it);
    }
    const std::string path = change.path;
    by_path_[path] = append(std::move(change));
  }
  if (was_empty && live_ > 0) window_opened_ = Clock::now();
  return (was_empty && live_ > 0) || live_ == max_items_;
}

std::optional<EventBatcher::Clock::time_point> EventBatcher::due() const {
  std::lock_guard lock(mutex_);
  if (live_ == 0) return std::nullopt;
  if (retry_at_) return retry_at_;
  if (live_ >= max_items_) return window_opened_;  // full: due since it opened
  return *window_opened_ + delay_;
}

std::vector<Change> EventBatcher::take() {
  std::lock_guard lock(mutex_);
  std::vector<Change> out;
  out.reserve(live_);
  for (auto& slot : slots_) {
    if (slot) out.push_back(std::move(*slot));
  }
  slots_.clear();
  by_path_.clear();
  move_by_dest_.clear();
  live_ = 0;
  window_opened_.reset();
  retry_at_.reset();
  return out;
}

void EventBatcher::restore(std::vector<Change> changes, Clock::time_point retry_at) {
  {
    std::lock_guard lock(mutex_);
    std::vector<std::optional<Change>> waiting = std::move(slots_);
    slots_.clear();
    by_path_.clear();
    move_by_dest_.clear();
    live_ = 0;
    for (auto& c : changes) add_locked(std::move(c));
    for (auto& slot : waiting) {
      if (slot) add_locked(std::move(*slot));
    }
    if (live_ > 0) {
      if (!window_opened_) window_opened_ = Clock::now();
      retry_at_ = retry_at;
    }
  }
}

void EventBatcher::set_delay(std::chrono::milliseconds delay) {
  std::lock_guard lock(mutex_);
  delay_ = delay;
}

std::size_t EventBatcher::size() const {
  std::lock_guard lock(mutex_);
  return live_;
}

}  // namespace tw::monitor
