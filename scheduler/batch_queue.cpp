#include "scheduler/batch_queue.hpp"

#include <algorithm>

namespace tw::scheduler {

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
  cv_.wait(lock, [&] { return leave.load() || closed_ || !items_.empty(); });
  if (leave.load() || items_.empty()) return std::nullopt;
  db::ClaimedItem item = std::move(items_.front());
  items_.pop_front();
  ++in_flight_;
  return item;
}

void BatchQueue::finished() {
  std::lock_guard lock(mutex_);
  if (in_flight_ > 0) --in_flight_;
}

bool BatchQueue::idle() const {
  std::lock_guard lock(mutex_);
  return items_.empty() && in_flight_ == 0;
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
