// One consumer: a thread and the archiver child it owns. It takes items from the batch
// queue one at a time, hands each to its archiver over the line protocol and passes the
// outcome to the reporter. An archiver that dies, answers garbage or exceeds item_timeout
// is killed (SIGTERM, bounded wait, SIGKILL), reaped and restarted with backoff, and the
// item counts one failed attempt; one consumer's trouble never stops the others.
// The public methods are safe to call from any thread.
#pragma once

#include <atomic>
#include <chrono>
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

  void start();
  // Asks the consumer to leave once its current item is done; returns at once.
  void retire();
  void join();

  int index() const { return index_; }
  bool busy() const { return busy_.load(); }
  bool retiring() const { return leave_.load(); }
  bool finished() const { return finished_.load(); }

 private:
  void run();
  bool ensure_archiver();
  void process(const db::ClaimedItem& item);
  void kill_archiver(const char* why);
  void wait_for_pacer();

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

  std::atomic<bool> leave_{false};
  std::atomic<bool> busy_{false};
  std::atomic<bool> finished_{false};
  std::thread thread_;
};

}  // namespace tw::scheduler
