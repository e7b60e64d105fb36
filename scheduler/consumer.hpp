// One consumer: a thread and the archiver child it owns. It takes items from the batch
// queue in order, hands them to its archiver over the line protocol (a window of several
// requests in flight: ARCHITECTURE.md, "The window") and passes each outcome to the
// reporter. An archiver that dies, answers garbage or exceeds item_timeout
// is killed (SIGTERM, bounded wait, SIGKILL), reaped and restarted with backoff, and the
// item counts one failed attempt; one consumer's trouble never stops the others.
// The public methods are safe to call from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <thread>

#include "common/noncopyable.hpp"
#include "common/process.hpp"
#include "db/queue.hpp"
#include "scheduler/batch_queue.hpp"
#include "scheduler/pacer.hpp"
#include "scheduler/reporter.hpp"

namespace tw::scheduler {

// How many consumers hold an item now, and the most that ever did. Consumers update it
// themselves, so counting costs no wake-up of the main thread.
class BusyGauge {
 public:
  void enter() {
    const int now = busy_.fetch_add(1) + 1;
    int high = high_water_.load();
    while (now > high && !high_water_.compare_exchange_weak(high, now)) {
    }
  }
  void leave() { busy_.fetch_sub(1); }
  int high_water() const { return high_water_.load(); }

 private:
  std::atomic<int> busy_{0};
  std::atomic<int> high_water_{0};
};

class Consumer : NonCopyable {
 public:
  struct Options {
    LaunchSpec archiver;
    std::chrono::milliseconds item_timeout{300000};
    std::chrono::milliseconds stop_grace{5000};
    std::shared_ptr<Pacer> pacer;  // null: no resource limits
    BusyGauge* busy_gauge = nullptr;
  };
  // Called (from the consumer's thread) when the consumer has left (finished() is true).
  using Notify = std::function<void()>;

  Consumer(int index, Options options, std::shared_ptr<Launcher> launcher, BatchQueue& queue,
           Reporter& reporter, Notify notify);
  ~Consumer();

  // Gives the consumer an archiver started for it beforehand (before start()).
  void adopt(std::unique_ptr<ChildProcess> archiver);
  void start();
  // Up to this many requests are written to the archiver before the oldest is answered,
  // so an archiver can make several versions durable with one sync (group commit);
  // responses come back in request order.
  static constexpr std::size_t kWindow = 128;
  // ... and no more is taken while the files in flight hold this many bytes, so that a few
  // large files spread over the archivers instead of queueing behind one; but a second
  // request is always sent (kWindowMinimum): an answer waits for its group's pack and
  // journal syncs, and the archiver works on the next request meanwhile instead of idling
  // through them (a first backup of a tree with many folders of more than 4 MiB idled so).
  static constexpr std::uint64_t kWindowBytes = 4 << 20;
  static constexpr std::size_t kWindowMinimum = 2;

  // Asks the consumer to leave once the items it has sent are done; returns at once.
  void retire();
  void join();

  int index() const { return index_; }
  bool busy() const { return busy_.load(); }
  bool retiring() const { return leave_.load(); }
  bool finished() const { return finished_.load(); }

 private:
  struct Sent {
    db::ClaimedItem item;
    double started = 0;  // epoch seconds, when the request was written
  };

  void run();
  bool ensure_archiver();
  // Writes the request of `item` to the archiver; on failure every item in flight fails.
  void send(db::ClaimedItem item);
  // Reads one response, for the oldest item in flight, and reports it.
  void receive();
  // Reports the outcome of `sent` (and of the changes coalesced into it) and lets it go.
  void complete(const Sent& sent, std::uint64_t bytes, std::uint64_t cpu);
  void fail(const Sent& sent, bool permanent, const std::string& message);
  // The archiver is gone or not to be trusted. With one item in flight, that item fails
  // (RETRY) with `message`. With several, which one caused it is unknown: none is charged
  // an attempt; they are sent again one at a time (suspects_), so a fault among them is
  // charged to the one that causes it.
  void archiver_failed(const std::string& message);
  // How many requests may be in flight now: one while suspects wait or a pacer limits
  // (it needs each answer's figures before the next dispatch), else kWindow.
  std::size_t window() const;
  void kill_archiver(const char* why);
  void wait_for_pacer();
  bool pacer_allows() const;
  void set_busy(bool busy);

  // Constant after construction.
  const int index_;
  const Options options_;
  const std::shared_ptr<Launcher> launcher_;
  BatchQueue& queue_;
  Reporter& reporter_;
  const Notify notify_;

  // Only the consumer thread touches these.
  Pacer* const pacer_;
  std::unique_ptr<ChildProcess> archiver_;
  std::chrono::milliseconds restart_backoff_{0};
  std::deque<Sent> in_flight_;            // written to the archiver, oldest first, not yet answered
  std::uint64_t in_flight_bytes_ = 0;     // the sizes of the items in in_flight_
  std::deque<db::ClaimedItem> suspects_;  // in flight when an archiver failed: sent again

  std::atomic<bool> leave_{false};
  std::atomic<bool> busy_{false};
  std::atomic<bool> finished_{false};
  std::thread thread_;
};

}  // namespace tw::scheduler
