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

// A path's key: 64-bit FNV-1a over its bytes, then a final mix so that every bit of the
// key depends on every byte (the tables use the low bits).
constexpr std::uint64_t kKeyStart = 14695981039346656037ULL;
constexpr std::uint64_t step(std::uint64_t h, char c) {
  return (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
}
constexpr std::uint64_t finish(std::uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  return h ^ (h >> 33);
}

// `each(key)` for the key of every folder `path` lies in, by path_within's rule: each
// prefix ending before a '/' (but the empty one), and "/" for an absolute path; returns
// the key of `path` itself.
template <typename Each>
std::uint64_t for_each_folder(std::string_view path, Each each) {
  std::uint64_t h = kKeyStart;
  if (path.empty()) return finish(h);
  h = step(h, path.front());
  if (path.size() > 1 && path.front() == '/') each(finish(h));  // "/"
  for (const char c : path.substr(1)) {
    if (c == '/') each(finish(h));
    h = step(h, c);
  }
  return finish(h);
}

}  // namespace

void BusyPaths::count(Counts& counts, std::uint64_t key, int by) {
  const auto it = counts.try_emplace(key, 0).first;
  it->second += by;
  if (it->second == 0) counts.erase(it);
}

void BusyPaths::add(std::string_view path) {
  const auto key =
      for_each_folder(path, [this](std::uint64_t folder) { count(inside_, folder, 1); });
  count(exact_, key, 1);
}

void BusyPaths::remove(std::string_view path) {
  const auto key =
      for_each_folder(path, [this](std::uint64_t folder) { count(inside_, folder, -1); });
  count(exact_, key, -1);
}

bool BusyPaths::covers(std::string_view path) const {
  if (exact_.empty()) return false;
  bool within = false;
  const auto key = for_each_folder(
      path, [&](std::uint64_t folder) { within = within || exact_.find(folder) != exact_.end(); });
  return within || exact_.find(key) != exact_.end();
}

bool BusyPaths::holds(std::string_view path) const {
  if (inside_.empty()) return false;
  return inside_.find(for_each_folder(path, [](std::uint64_t) {})) != inside_.end();
}

std::size_t BatchQueue::first_free() const {
  // (Nothing is held back while nothing is in flight: the last finished() forgot it all.)
  if (items_.empty() || busy_.empty()) return 0;
  // The paths of the items held back so far, but those inside one already counted (a
  // path related to such a path is related to the one it lies in, so it changes nothing;
  // nor does one that came to lie inside a path in flight since it was counted).
  for (std::size_t i = held_count_; i < items_.size(); ++i) {
    const db::ClaimedItem& item = items_[i];
    const std::string_view paths[2] = {item.path, item.dest_path};
    const std::size_t count = item.op == Op::Move ? 2 : 1;
    bool conflict = false;
    std::string_view open[2];
    std::size_t opened = 0;
    for (std::size_t k = 0; k < count; ++k) {
      if (busy_.covers(paths[k]) || held_.covers(paths[k])) {
        conflict = true;
        continue;
      }
      conflict = conflict || busy_.holds(paths[k]) || held_.holds(paths[k]);
      open[opened++] = paths[k];
    }
    if (!conflict) return i;
    // A held-back item holds back whatever comes after it on the same paths.
    for (std::size_t k = 0; k < opened; ++k) held_.add(open[k]);
    held_count_ = i + 1;
  }
  return items_.size();
}

void BatchQueue::forget_held() const {
  if (held_count_ == 0) return;
  held_count_ = 0;
  held_ = BusyPaths();
}

void BatchQueue::push(std::vector<db::ClaimedItem> batch) {
  {
    MutexLock lock(&mutex_);
    for (auto& item : batch) items_.push_back(std::move(item));
    high_water_ = std::max(high_water_, items_.size());
  }
  cv_.SignalAll();
}

std::optional<db::ClaimedItem> BatchQueue::pop(const std::atomic<bool>& leave) {
  std::optional<db::ClaimedItem> item;
  bool low = false;
  {
    MutexLock lock(&mutex_);
    std::size_t index = 0;
    while (!leave.load()) {
      index = first_free();
      if (index < items_.size() || (closed_ && items_.empty())) break;
      cv_.Wait(&mutex_);
    }
    if (leave.load() || index >= items_.size()) return std::nullopt;
    item = take(index, low);
  }
  if (low && wake_) wake_();
  return item;
}

std::optional<db::ClaimedItem> BatchQueue::try_pop() {
  std::optional<db::ClaimedItem> item;
  bool low = false;
  {
    MutexLock lock(&mutex_);
    const std::size_t index = first_free();
    if (index >= items_.size()) return std::nullopt;
    item = take(index, low);
  }
  if (low && wake_) wake_();
  return item;
}

db::ClaimedItem BatchQueue::take(std::size_t index, bool& low) {
  db::ClaimedItem item = std::move(items_[index]);
  items_.erase(items_.begin() + static_cast<std::ptrdiff_t>(index));
  auto paths = touched(item);
  for (const auto& p : paths) busy_.add(p);
  in_flight_.emplace(item.id, std::move(paths));
  // Pops take one item at a time and pushes only add, so the size passes through the
  // low-water mark on its way down: one wake-up per refill.
  low = items_.size() == low_water_;
  return item;
}

void BatchQueue::finished(std::int64_t id) {
  bool now_idle = false;
  {
    MutexLock lock(&mutex_);
    if (const auto it = in_flight_.find(id); it != in_flight_.end()) {
      for (const auto& p : it->second) busy_.remove(p);
      in_flight_.erase(it);
      forget_held();
    }
    now_idle = items_.empty() && in_flight_.empty();
  }
  cv_.SignalAll();  // items held back behind it may go now
  if (now_idle && wake_) wake_();
}

bool BatchQueue::idle() const {
  MutexLock lock(&mutex_);
  return items_.empty() && in_flight_.empty();
}

std::vector<db::ClaimedItem> BatchQueue::take_all() {
  MutexLock lock(&mutex_);
  std::vector<db::ClaimedItem> out(std::make_move_iterator(items_.begin()),
                                   std::make_move_iterator(items_.end()));
  items_.clear();
  forget_held();
  return out;
}

void BatchQueue::wake_all() {
  { MutexLock lock(&mutex_); }  // order the caller's flag store before the wake-up
  cv_.SignalAll();
}

void BatchQueue::close() {
  {
    MutexLock lock(&mutex_);
    closed_ = true;
  }
  cv_.SignalAll();
}

std::size_t BatchQueue::size() const {
  MutexLock lock(&mutex_);
  return items_.size();
}

std::size_t BatchQueue::high_water() const {
  MutexLock lock(&mutex_);
  return high_water_;
}

}  // namespace tw::scheduler
