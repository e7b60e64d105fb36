#include "monitor/event_batcher.hpp"

#include <algorithm>

namespace tw::monitor {

EventBatcher::EventBatcher(Options options, std::function<void()> notify)
    : notify_(std::move(notify)),
      max_items_(std::max<std::size_t>(1, options.max_items)),
      first_items_(options.first_items == 0 ? max_items_
                                            : std::min(options.first_items, max_items_)),
      delay_(options.delay),
      limit_(first_items_) {}

void EventBatcher::add(Change change) {
  bool wake = false;
  {
    MutexLock lock(&mutex_);
    wake = add_locked(std::move(change));
  }
  if (wake && notify_) notify_();
}

void EventBatcher::add(std::vector<Change> changes) {
  bool wake = false;
  {
    MutexLock lock(&mutex_);
    for (auto& c : changes) wake = add_locked(std::move(c)) || wake;
  }
  if (wake && notify_) notify_();
}

std::size_t EventBatcher::append(Change change) {
  weight_ += change.weight;
  slots_.push_back(std::move(change));
  ++live_;
  return slots_.size() - 1;
}

void EventBatcher::drop(std::size_t index) {
  if (!slots_[index]) return;
  weight_ -= slots_[index]->weight;
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
  const bool was_full = weight_ >= limit_;
  if (change.op == Op::Move) {
    add_move(std::move(change));
  } else {
    add_path_change(std::move(change));
  }
  if (was_empty && live_ > 0) window_opened_ = Clock::now();
  return (was_empty && live_ > 0) || (!was_full && weight_ >= limit_);
}

// Rules 3 and 4 of the header.
void EventBatcher::add_move(Change change) {
  if (change.path == change.dest) return;
  drop_path(change.path, change.is_dir);
  const auto it = move_by_dest_.find(change.path);
  if (it == move_by_dest_.end()) {
    const std::string dest = change.dest;
    move_by_dest_[dest] = append(std::move(change));
    return;
  }
  // A chain: the file went a -> b, and now b -> c.
  const std::size_t index = it->second;
  move_by_dest_.erase(it);
  Change earlier = std::move(*slots_[index]);
  drop(index);
  const int priority = std::max(earlier.priority, change.priority);
  Change middle = Change::remove(change.path, change.is_dir);
  middle.priority = priority;
  if (earlier.path == change.dest) {
    Change back = Change::update(change.dest, change.is_dir);
    back.priority = priority;
    add_path_change(std::move(back));
  } else {
    change.path = std::move(earlier.path);
    change.priority = priority;
    drop_path(change.path, change.is_dir);
    const std::string dest = change.dest;
    move_by_dest_[dest] = append(std::move(change));
  }
  add_path_change(std::move(middle));
}

// Rules 1 and 2 of the header.
void EventBatcher::add_path_change(Change change) {
  if (auto it = by_path_.find(change.path); it != by_path_.end()) {
    const Change& earlier = *slots_[it->second];
    if (change.op == Op::Stat && earlier.op != Op::Stat) change.op = Op::Update;
    if (earlier.op == Op::Scan && change.op != Op::Delete) change.op = Op::Scan;
    if (!change.size) change.size = earlier.size;
    if (!change.mtime) change.mtime = earlier.mtime;
    change.priority = std::max(change.priority, earlier.priority);
    change.weight = std::max(change.weight, earlier.weight);
    drop(it->second);
    by_path_.erase(it);
  }
  if (change.op == Op::Delete && change.is_dir) drop_path(change.path, true);
  const std::string path = change.path;
  by_path_[path] = append(std::move(change));
}

std::optional<EventBatcher::Clock::time_point> EventBatcher::due() const {
  MutexLock lock(&mutex_);
  if (live_ == 0) return std::nullopt;
  if (retry_at_) return retry_at_;
  if (weight_ >= limit_) return window_opened_;  // full: due since it opened
  return *window_opened_ + delay_;
}

std::vector<Change> EventBatcher::take() {
  MutexLock lock(&mutex_);
  limit_ = weight_ >= limit_ ? std::min(2 * limit_, max_items_) : first_items_;
  std::vector<Change> out;
  out.reserve(live_);
  for (auto& slot : slots_) {
    if (slot) out.push_back(std::move(*slot));
  }
  slots_.clear();
  by_path_.clear();
  move_by_dest_.clear();
  live_ = 0;
  weight_ = 0;
  window_opened_.reset();
  retry_at_.reset();
  return out;
}

void EventBatcher::restore(std::vector<Change> changes, Clock::time_point retry_at) {
  {
    MutexLock lock(&mutex_);
    std::vector<std::optional<Change>> waiting = std::move(slots_);
    slots_.clear();
    by_path_.clear();
    move_by_dest_.clear();
    live_ = 0;
    weight_ = 0;
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
  MutexLock lock(&mutex_);
  delay_ = delay;
}

std::size_t EventBatcher::window_limit() const {
  MutexLock lock(&mutex_);
  return limit_;
}

std::size_t EventBatcher::size() const {
  MutexLock lock(&mutex_);
  return live_;
}

}  // namespace tw::monitor
