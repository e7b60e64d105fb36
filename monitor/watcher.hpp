// Real-time change detection over every source directory, recursively, with inotify
// (through an EventSource). Runs on its own thread (start/stop), so that reading events
// never waits for the database; what it finds goes to the EventBatcher.
//
// Watched: create, write, close-after-write, attribute change, delete, both halves of a move
// (never open or read events, so the archivers' own reads cannot feed the queue). What each
// becomes:
//   - new directory: watched first, then scanned (so `mkdir -p a/b/c && echo x > a/b/c/f`
//     misses nothing); the directory and everything in it that the archive lacks are
//     queued as UPDATE;
//   - new regular file: queued when its writer closes it (close-after-write), so a writer
//     that keeps writing does not leave half-written versions (or when it pauses, below);
//     a new hard link or symlink at once;
//   - close-after-write: UPDATE; attribute change: STAT; delete: DELETE;
//   - a write not followed by a close (truncate(2) on the path, a writer that keeps the file
//     open, a write through a mapping): UPDATE once no write has come for `unclosed_quiet`
//     (the monitor uses twice event_delay, at least 100 ms). While the file stays unclosed
//     that wait doubles each time it is queued so (up to 256 times), so a log held open and
//     appended to for ever is archived when it pauses, not after every line. A writer that
//     pauses that long before it closes leaves a version of what it had written so far;
//     its close queues the whole file;
//   - an entry created, deleted or renamed in a directory D (the root of a source
//     included, the entry excluded or not) changes D's mtime: a STAT of D, one per D for
//     the events read together (and the batcher folds those of one window);
//   - rename with both ends watched (paired by cookie): one MOVE (the history follows the
//     file), plus UPDATE/STAT of what the new name holds that the archive lacks under the
//     old one. A file whose old name was never archived is queued as UPDATE of the new
//     name, unless that old name is where a MOVE queued moments ago took it (`mv a b; mv b
//     c`): then it is a MOVE too, and the batcher makes one MOVE a->c of the two. After a
//     directory is renamed A->B, B is scanned against what is archived beneath A: UPDATE
//     or STAT of what differs or was never archived, and DELETE (under the new name) of
//     what is archived beneath A but no longer beneath B. The archiver's reconciling MOVE
//     already tombstones those; the DELETE keeps the archive right with an archiver that
//     copies histories without looking, and costs nothing otherwise;
//   - moved out of the watched tree (or into an excluded name): DELETE; moved in: UPDATE of
//     everything under it;
//   - queue overflow (IN_Q_OVERFLOW): a rescan of every source directory against the
//     archive; a watch that cannot be added: that directory is scanned now and rescanned
//     every `rescan_unwatched` until its watch succeeds. Running out of watches
//     (fs.inotify.max_user_watches) is logged as an error naming the limit to raise.
//   - every `rescan_interval` (0: never): the periodic rescan, a reconcile of every source
//     directory against the archive that repairs whatever was missed without a restart.
//     It works in slices of at most `rescan_slice` between two reads of events, so live
//     changes are never held up by it for longer than one slice, and its changes carry
//     kRescanPriority (the `priority` strategy claims live changes first).
// Links are never followed; fifos, sockets and devices are not queued; filters apply.
// At start, catch_up() scans every source directory against the archive and queues only
// what changed while the monitor was stopped.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/fd.hpp"
#include "common/filters.hpp"
#include "common/noncopyable.hpp"
#include "monitor/archive_view.hpp"
#include "monitor/event_batcher.hpp"
#include "monitor/event_source.hpp"
#include "monitor/scanner.hpp"

namespace tw::monitor {

// Looks up the queue's waiting work beneath the source directories (so a scan does not
// queue it twice). Nothing when the database cannot tell; called on the watcher's thread.
using PendingLookup =
    std::function<std::optional<PendingSet>(const std::vector<std::string>& roots)>;

struct WatcherStats {
  std::int64_t watches = 0;
  std::int64_t unwatched = 0;  // directories that could not be watched (polled instead)
  std::int64_t events = 0;
  std::int64_t changes = 0;
  std::int64_t rescans = 0;  // overflows, periodic and other full rescans (started)
  bool catchup_done = false;
  bool failed = false;  // watching stopped on an unexpected error (logged)
};

class Watcher : NonCopyable {
 public:
  using Clock = std::chrono::steady_clock;

  struct Options {
    std::chrono::milliseconds rescan_unwatched{30000};
    // How long the first half of a rename waits for its second half.
    std::chrono::milliseconds move_grace{20};
    // The periodic rescan (rescan_interval); 0: never.
    std::chrono::milliseconds rescan_interval{0};
    // The longest one slice of it keeps the watcher's thread from reading events.
    std::chrono::milliseconds rescan_slice{20};
    // How long a file written to and not closed must see no write before it is queued.
    std::chrono::milliseconds unclosed_quiet{200};
  };

  // The roots are filter.roots(). `notify` runs on the watcher's thread when the catch-up
  // is done and when watching fails.
  Watcher(Options options, std::unique_ptr<EventSource> source, const Filter& filter,
          ArchiveView& archive, EventBatcher& batcher, PendingLookup pending,
          std::function<void()> notify = {});
  ~Watcher();

  // Runs catch_up() and then the event loop on a new thread, until stop().
  void start();
  void stop();

  // The steps of the thread, for tests that drive the watcher themselves.
  void catch_up();
  // Waits up to `timeout` for events, handles them and any timer that fell due.
  void run_once(std::chrono::milliseconds timeout);

  WatcherStats stats() const;

 private:
  struct PendingMove {
    std::string path;
    bool is_dir = false;
    Clock::time_point seen;
  };
  // A file written to and not closed since.
  struct Unclosed {
    Clock::time_point last_write;
    Clock::time_point due = Clock::time_point::max();  // max: queued, waiting for a write
    int queued = 0;                                    // times queued while not closed
  };
  // A periodic rescan under way: one walk per source directory, in turn.
  struct RescanPass {
    std::optional<PendingSet> pending;
    std::size_t next_root = 0;
    std::unique_ptr<ScanWalk> walk;
    Clock::time_point started;
    ScanStats totals;
  };

  void run();
  void handle(const RawEvent& event);
  void on_self_event(const std::string& dir, std::uint32_t mask);
  void on_create(const std::string& path, bool is_dir);
  void on_modified(const std::string& path);
  void on_written(const std::string& path);
  void on_attrib(const std::string& path);
  void on_move(const std::string& from, const std::string& to, bool is_dir);
  void on_moved_in(const std::string& path, bool is_dir);
  void on_moved_out(const std::string& path, bool is_dir);
  void resolve_moves(bool all);
  // Scans `dir` against what is archived as `archived_as`, watching every directory it
  // enters (and, when `watched` is given, adding there each one that is watched now), and
  // hands what it finds to the batcher a full window (its max_items) at a time. `whole`:
  // a whole source's scan (ScanRequest::scans).
  ScanStats scan(const std::string& dir, const std::string& archived_as, bool find_deletes,
                 const PendingSet* pending, std::unordered_set<std::string>* watched = nullptr,
                 bool whole = false);
  void rescan_all(const char* why);
  void rescan_some();
  void retry_unwatched();
  void queue_touched_dirs();
  void queue_unclosed();
  void remember_moved_here(const std::string& path);
  bool moved_here_lately(const std::string& path) const;
  bool watch(const std::string& dir);
  void unwatch_within(const std::string& dir);
  void rename_watches(const std::string& from, const std::string& to);
  void emit(Change change);
  void flush();
  void publish();  // the figures stats() reads
  bool is_root(const std::string& path) const;
  std::optional<PendingSet> lookup_pending();
  std::chrono::milliseconds next_timeout(std::chrono::milliseconds limit) const;

  // Constant after construction.
  const Options options_;
  const std::unique_ptr<EventSource> source_;
  const Filter& filter_;
  ArchiveView& archive_;
  EventBatcher& batcher_;
  const PendingLookup pending_;
  const std::function<void()> notify_;
  UniqueFd stop_fd_;

  // Used by the watcher's thread only.
  Scanner scanner_;
  std::unordered_map<int, std::string> wd_path_;
  std::map<std::string, int> path_wd_;
  std::set<std::string> unwatched_;                       // directories whose watch failed
  std::set<std::string> lost_roots_;                      // source directories that are missing
  std::unordered_map<std::uint32_t, PendingMove> moves_;  // first halves of renames, by cookie
  std::vector<Change> out_;                               // changes not yet handed to the batcher
  std::set<std::string> touched_dirs_;  // whose entries changed in the events being handled
  std::map<std::string, Clock::time_point> moved_here_;  // where file MOVEs went lately
  std::unordered_map<std::string, Unclosed> unclosed_;
  std::optional<RescanPass> pass_;
  Clock::time_point next_rescan_ = Clock::time_point::max();
  bool overflowed_ = false;
  Clock::time_point next_retry_{};
  Clock::time_point last_limit_error_{};
  std::int64_t limit_failures_ = 0;

  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<std::int64_t> watches_{0}, unwatched_count_{0}, events_{0}, changes_{0}, rescans_{0};
  std::atomic<bool> catchup_done_{false};
  std::atomic<bool> failed_{false};
};

}  // namespace tw::monitor
