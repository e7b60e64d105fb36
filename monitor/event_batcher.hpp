// Gathers changes for a short moment (`event_delay`) so they reach the database in one
// round trip, and coalesces them: repeated changes to one path in that moment become one
// item. Thread-safe: the watcher thread adds, the monitor's main thread takes.
//
// Coalescing rules, per path, within one window:
//   UPDATE + UPDATE/STAT -> UPDATE;  STAT + STAT -> STAT;  STAT + UPDATE -> UPDATE;
//   anything + DELETE -> DELETE (a directory's DELETE also drops the waiting changes of
//   paths beneath it: the archiver's DELETE tombstones them);  DELETE + UPDATE/STAT ->
//   UPDATE (the path exists again).
//   A merged change moves to the end, so the order of the output is the order of each
//   path's latest change.
//   MOVE a->b drops the waiting UPDATE/STAT/DELETE of a and b (and beneath them, for a
//   directory): the move carries the history; the watcher adds an UPDATE of b after the
//   move when b differs from what the archive holds for a. MOVE a->b then MOVE b->c
//   becomes MOVE a->c; MOVE a->b->a disappears.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "common/thread_annotations.hpp"
#include "monitor/change.hpp"

namespace tw::monitor {

class EventBatcher {
 public:
  using Clock = std::chrono::steady_clock;

  struct Options {
    std::chrono::milliseconds delay{100};  // event_delay
    std::size_t max_items = 10000;         // a window this full is due at once
  };

  // `notify` is called (from the adding thread, without the lock held) when a window
  // opens or becomes full: the taker should look at due() again.
  explicit EventBatcher(Options options, std::function<void()> notify = {});
  EventBatcher(const EventBatcher&) = delete;
  EventBatcher& operator=(const EventBatcher&) = delete;

  void add(Change change) EXCLUDES(mutex_);
  void add(std::vector<Change> changes) EXCLUDES(mutex_);

  // When the waiting changes should be taken; nothing when none wait.
  std::optional<Clock::time_point> due() const EXCLUDES(mutex_);
  // Everything waiting, coalesced, in order; opens a new window.
  std::vector<Change> take() EXCLUDES(mutex_);
  // Puts changes that could not be queued back in front of the waiting ones, due again
  // at `retry_at`. Called by the taker, so it does not notify.
  void restore(std::vector<Change> changes, Clock::time_point retry_at) EXCLUDES(mutex_);

  void set_delay(std::chrono::milliseconds delay) EXCLUDES(mutex_);
  std::size_t size() const EXCLUDES(mutex_);

 private:
  // Returns true when the window opened or filled up with this change.
  bool add_locked(Change change) REQUIRES(mutex_);
  void drop(std::size_t index) REQUIRES(mutex_);
  void drop_path(const std::string& path, bool and_beneath) REQUIRES(mutex_);
  std::size_t append(Change change) REQUIRES(mutex_);

  const std::function<void()> notify_;
  const std::size_t max_items_;

  mutable std::mutex mutex_;
  std::chrono::milliseconds delay_ GUARDED_BY(mutex_);
  // Slots in arrival order; a dropped or merged change leaves an empty slot.
  std::vector<std::optional<Change>> slots_ GUARDED_BY(mutex_);
  std::size_t live_ GUARDED_BY(mutex_) = 0;
  // The slot of each path's waiting UPDATE/STAT/DELETE, and of each MOVE by destination.
  std::map<std::string, std::size_t> by_path_ GUARDED_BY(mutex_);
  std::map<std::string, std::size_t> move_by_dest_ GUARDED_BY(mutex_);
  std::optional<Clock::time_point> window_opened_ GUARDED_BY(mutex_);
  std::optional<Clock::time_point> retry_at_ GUARDED_BY(mutex_);
};

}  // namespace tw::monitor
