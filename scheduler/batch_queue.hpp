// The scheduler's in-memory batch queue: claimed items waiting for a consumer. Thread-safe:
// the main thread pushes whole batches, consumer threads pop one item at a time.
//
// Changes to one path keep their order: pop() never hands out an item whose path (or MOVE
// destination) is the same as, inside, or above a path in flight, nor one that would
// overtake such a waiting item; it takes the first item free of both, so one busy path
// never idles the other consumers.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/mutex.hpp"
#include "common/thread_annotations.hpp"
#include "db/queue.hpp"

namespace tw::scheduler {

// The paths of the items in flight, each with how many items hold it, and the folders
// they lie in, so that whether a path is one of them, lies inside one, or holds one is a
// few hash look-ups (one per level of the path), whatever the number in flight.
//
// Paths are kept as 64-bit hashes, those of a path's folders computed in one pass over it
// (a path's folder is a prefix of it), so a look-up allocates nothing and reads the path
// once. Two paths with the same hash would only make an item wait for an unrelated one in
// flight, never let one overtake a related one.
class BusyPaths {
 public:
  void add(std::string_view path);
  void remove(std::string_view path);
  // Equal to a busy path, or one inside the other (common/paths.hpp, path_within).
  bool related(std::string_view path) const { return covers(path) || holds(path); }
  // `path` is a busy path or lies inside one.
  bool covers(std::string_view path) const;
  // A busy path lies inside `path` (not equal to it).
  bool holds(std::string_view path) const;
  bool empty() const { return exact_.empty(); }

 private:
  using Counts = std::unordered_map<std::uint64_t, int>;
  static void count(Counts& counts, std::uint64_t key, int by);
  Counts exact_;   // the busy paths
  Counts inside_;  // every folder a busy path lies in (its proper ancestors)
};

class BatchQueue {
 public:
  using Wake = std::function<void()>;
  // `wake` is called (from a consumer's thread, outside the lock) when a pop leaves exactly
  // `low_water` items waiting, time to claim more, and when the queue goes idle. Nothing
  // else wakes the main thread, so a drain costs it no wake-up per item.
  BatchQueue(std::size_t low_water, Wake wake) : low_water_(low_water), wake_(std::move(wake)) {}
  BatchQueue() = default;

  void push(std::vector<db::ClaimedItem> batch) EXCLUDES(mutex_);

  // Blocks until an item is available, `leave` becomes true, or the queue is closed. Returns
  // nothing in the last two cases. A caller that sets `leave` must call wake_all(). Every
  // item popped counts as in flight until the caller calls finished().
  std::optional<db::ClaimedItem> pop(const std::atomic<bool>& leave) EXCLUDES(mutex_);
  void finished(std::int64_t id) EXCLUDES(mutex_);
  // As pop(), without waiting: nothing when no item is free to go now.
  std::optional<db::ClaimedItem> try_pop() EXCLUDES(mutex_);

  // True when no item waits and none is in flight.
  bool idle() const EXCLUDES(mutex_);

  // Removes and returns every waiting item (they were never started).
  std::vector<db::ClaimedItem> take_all() EXCLUDES(mutex_);

  // Wakes every pop() so it re-checks its `leave` flag.
  void wake_all() EXCLUDES(mutex_);
  // After close(), pop() returns nothing once the queue is empty.
  void close() EXCLUDES(mutex_);

  std::size_t size() const EXCLUDES(mutex_);
  std::size_t low_water() const { return low_water_; }
  std::size_t high_water() const EXCLUDES(mutex_);

 private:
  // Index in items_ of the first item free to go, or items_.size() when none is.
  std::size_t first_free() const REQUIRES(mutex_);
  // Forgets what first_free() learnt (a path in flight finished, so any item held back
  // may be free now).
  void forget_held() const REQUIRES(mutex_);
  // Removes item `index`, counts it in flight, and sets `low` when the pop leaves the
  // low-water mark's number of items waiting (the caller wakes the main thread then, once
  // it released the lock).
  db::ClaimedItem take(std::size_t index, bool& low) REQUIRES(mutex_);

  // Constant after construction.
  const std::size_t low_water_ = 0;
  const Wake wake_;

  // Protected by mutex_.
  mutable Mutex mutex_;
  CondVar cv_;  // what pop() waits on: signalled by push, finished, wake_all and close
  std::deque<db::ClaimedItem> items_ GUARDED_BY(mutex_);
  std::size_t high_water_ GUARDED_BY(mutex_) = 0;
  std::unordered_map<std::int64_t, std::vector<std::string>> in_flight_ GUARDED_BY(mutex_);
  BusyPaths busy_ GUARDED_BY(mutex_);  // the paths of in_flight_
  // What the last first_free() found: the first held_count_ items are held back, and
  // held_ holds their paths. Still true after a push (it adds at the back) and a take (of
  // the first free item, and busy_ only grows), so a run of pops looks at each item once;
  // false after a path in flight finished.
  mutable std::size_t held_count_ GUARDED_BY(mutex_) = 0;
  mutable BusyPaths held_ GUARDED_BY(mutex_);
  bool closed_ GUARDED_BY(mutex_) = false;
};

}  // namespace tw::scheduler
