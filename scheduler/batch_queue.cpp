#include "scheduler/batch_queue.hpp"

#include <algorithm>

#include "common/paths.hpp"

namespace tw::scheduler {
namespace {

// The escaped paths an item changes: its path, and a MOVE's destination.
std::vector<std::string> touched(const db::ClaimedItem& item) {
  if (item.op == Op::Move) return {item.path, item.dest_path};
  return {item.path};
}

// Equal, or one inside the other (escaping keeps '/' as it is).
bool related(const std::string& a, const std::string& b) {
  return path_within(a, b) || path_within(b, a);
}

bool conflicts(const std::vector<std::string>& paths, const std::vector<std::string>& busy) {
  for (const auto& p : paths) {
    for (const auto& b : busy) {
      if (related(p, b)) return true;
    }
  }
  return false;
}

}  // namespace

std::size_t BatchQueue::first_free() const {
  if (items_.empty()) return 0;
  std::vector<std::string> busy;
  for (const auto& [id, paths] : in_flight_) busy.insert(busy.end(), paths.begin(), paths.end());
  if (busy.empty()) return 0;
  for (std::size_t i = 0; i < items_.size(); ++i) {
    auto paths = touched(items_[i]);
    if (!conflicts(paths, busy)) return i;
    // A held-back item holds back whatever comes after it on the same paths.
    busy.insert(busy.end(), std::make_move_iterator(paths.begin()),
                std::make_move_iterator(paths.end()));
  }
  return items_.size();
}

void BatchQueue::push(std::vector<db::ClaimedItem> batch) {
  {
    std::lock_guard lock(mutex_);
    for (auto& item : batch) items_.push_back(std::move(item));
    high_water_ = std::max(high_water_, items_.size());
  }
  cv_.notify_all();
}

std::optional<db::ClaimedItem> BatchQueue::pop(const std::atomic<bool>& leave) {
  std::unique_lock lock(mutex_);
  std::size_t index = 0;
  cv_.wait(lock, [&] {
    if (leave.load()) return true;
    index = first_free();
    return index < items_.size() || (closed_ && items_.empty());
  });
  if (leave.load() || index >= items_.size()) return std::nullopt;
  return take(lock, index);
}

std::optional<db::ClaimedItem> BatchQueue::try_pop() {
  std::unique_lock lock(mutex_);
  const std::size_t index = first_free();
  if (index >= items_.size()) return std::nullopt;
  return take(lock, index);
}

db::ClaimedItem BatchQueue::take(std::unique_lock<std::mutex>& lock, std::size_t index) {
  db::ClaimedItem item = std::move(items_[index]);
  items_.erase(items_.begin() + static_cast<std::ptrdiff_t>(index));
  in_flight_.emplace(item.id, touched(item));
  // Pops take one item at a time and pushes only add, so the size passes through the
  // low-water mark on its way down: one wake-up per refill.
  const bool low = items_.size() == low_water_;
  lock.unlock();
  if (low && wake_) wake_();
  return item;
}

void BatchQueue::finished(std::int64_t id) {
  bool now_idle = false;
  {
    std::lock_guard lock(mutex_);
    in_flight_.erase(id);
    now_idle = items_.empty() && in_flight_.empty();
  }
  cv_.notify_all();  // items held back behind it may go now
  if (now_idle && wake_) wake_();
}

bool BatchQueue::idle() const {
  std::lock_guard lock(mutex_);
  return items_.empty() && in_flight_.empty();
}

std::vector<db::ClaimedItem> BatchQueue::take_all() {
  std::lock_guard lock(mutex_);
  std::vector<db::ClaimedItem> out(std::make_move_iterator(items_.begin()),
                                   std::make_move_iterator(items_.end()));
  items_.clear();
  return out;
}

void BatchQueue::wake_all() {
  { std::lock_guard lock(mutex_); }  // order the caller's flag store before the wake-up
  cv_.notify_all();
}

void BatchQueue::close() {
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
  }
  cv_.notify_all();
}

std::size_t BatchQueue::size() const {
  std::lock_guard lock(mutex_);
  return items_.size();
}

std::size_t BatchQueue::high_water() const {
  std::lock_guard lock(mutex_);
  return high_water_;
}

}  // namespace tw::scheduler
