// Gathers changes for a short moment (`event_delay`) so they reach the database in one
// round trip, and folds away the changes that a later one makes redundant. Thread-safe:
// the watcher thread adds, the monitor's main thread takes.
//
// Every request reconciles (ARCHITECTURE.md, "Convergence"): the archiver makes the archive's
// latest state of the path equal to what it sees on disk when it looks, whatever the op
// said. So a waiting change may be dropped only when a change that stays reconciles the
// same path with a look taken after the dropped one. Order matters for MOVE alone: the
// history follows the file only while the archive still holds it under the old name.
// The rules, within one window:
//   1. One path, several UPDATE/STAT/DELETE: one change, in the place of the latest (it
//      looks last). Its op is the latest one's, except that a STAT after an UPDATE or a
//      DELETE is an UPDATE (the op only hints at what to read), and an UPDATE or STAT after
//      a SCAN is a SCAN (the SCAN stands for changes of the directory's entries no event
//      told of); the higher priority wins.
//   2. A DELETE of a directory D also drops the waiting UPDATE/STAT/DELETE of the paths
//      beneath D: they were gone when D was, the DELETE reconciles everything archived
//      beneath D, and whatever appears beneath D afterwards comes with changes of its own,
//      placed after the DELETE. A DELETE never drops a waiting MOVE: MOVE a->b then DELETE
//      b are both queued (the archiver finds b gone and tombstones a).
//   3. MOVE a->b drops the waiting UPDATE/STAT/DELETE of a and, for a directory, of the
//      paths beneath a: the MOVE reconciles a, every path archived beneath it and their new
//      names, and the watcher queues, after the MOVE, what the moved tree holds that was
//      never archived. The waiting changes of b and beneath b stay, before the MOVE: what
//      was archived beneath an older b is reconciled by them, not by the MOVE.
//   4. A chain, MOVE a->b waiting and then MOVE b->c, becomes MOVE a->c (the history
//      follows the file to where it is now) followed by a DELETE of b (whatever b held
//      before the first rename is reconciled); a->b->a becomes UPDATE a and DELETE b.
// Changes are taken in the order of their places.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "common/mutex.hpp"
#include "common/thread_annotations.hpp"
#include "monitor/change.hpp"

namespace tw::monitor {

class EventBatcher {
 public:
  using Clock = std::chrono::steady_clock;

  struct Options {
    std::chrono::milliseconds delay{100};  // event_delay
    std::size_t max_items = 10000;         // a window this full is due at once
    // The first window of a burst is due at once with this many (0: max_items); each full
    // window taken doubles it up to max_items, and a window taken before it was full (the
    // burst is over) starts again from here. A burst's first changes are then archived
    // while the rest is being gathered, and a long burst still goes in large round trips.
    std::size_t first_items = 0;
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
  // Everything waiting, folded, in order; opens a new window.
  std::vector<Change> take() EXCLUDES(mutex_);
  // Puts changes that could not be queued back in front of the waiting ones, due again
  // at `retry_at`. Called by the taker, so it does not notify.
  void restore(std::vector<Change> changes, Clock::time_point retry_at) EXCLUDES(mutex_);

  void set_delay(std::chrono::milliseconds delay) EXCLUDES(mutex_);
  std::size_t size() const EXCLUDES(mutex_);
  // How many waiting changes make the open window due at once: from Options::first_items
  // up to Options::max_items. A change counts for its weight (a SCAN, for the changes it
  // stands for).
  std::size_t window_limit() const EXCLUDES(mutex_);

 private:
  // Returns true when the window opened or filled up with this change.
  bool add_locked(Change change) REQUIRES(mutex_);
  void add_move(Change change) REQUIRES(mutex_);
  void add_path_change(Change change) REQUIRES(mutex_);
  void drop(std::size_t index) REQUIRES(mutex_);
  void drop_path(const std::string& path, bool and_beneath) REQUIRES(mutex_);
  std::size_t append(Change change) REQUIRES(mutex_);

  // Constant after construction.
  const std::function<void()> notify_;
  const std::size_t max_items_;
  const std::size_t first_items_;

  // Protected by mutex_.
  mutable Mutex mutex_;
  std::chrono::milliseconds delay_ GUARDED_BY(mutex_);
  // Slots in arrival order; a dropped or merged change leaves an empty slot.
  std::vector<std::optional<Change>> slots_ GUARDED_BY(mutex_);
  std::size_t live_ GUARDED_BY(mutex_) = 0;
  std::size_t weight_ GUARDED_BY(mutex_) = 0;  // the live changes' weights: what fills a window
  std::size_t limit_ GUARDED_BY(mutex_);
  // The slot of each path's waiting UPDATE/STAT/DELETE, and of each MOVE by destination.
  std::map<std::string, std::size_t> by_path_ GUARDED_BY(mutex_);
  std::map<std::string, std::size_t> move_by_dest_ GUARDED_BY(mutex_);
  std::optional<Clock::time_point> window_opened_ GUARDED_BY(mutex_);
  std::optional<Clock::time_point> retry_at_ GUARDED_BY(mutex_);
};

}  // namespace tw::monitor
