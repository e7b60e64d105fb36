// The thread that makes a group of versions durable while the archiver goes on with the
// next requests (group commit, FORMAT.md "Format 2"): it runs the jobs posted to it one
// after the other, in the order posted, and tells its owner each time one is done, both
// through a descriptor that a poll(2) can wait on and to a thread blocked in wait_until().
// The thread starts with the first job and has every signal blocked. Internal to the
// archive library; post() and the waits belong to one owner thread.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "common/fd.hpp"
#include "common/noncopyable.hpp"

namespace tw::archive {

class SyncWorker : NonCopyable {
 public:
  SyncWorker();
  // Runs what is posted still, then joins the thread.
  ~SyncWorker();

  void post(std::function<void()> job);
  // Blocks until `done()` holds, looking again each time a job has run.
  void wait_until(const std::function<bool()>& done);
  // Blocks until every job posted has run.
  void wait_idle();
  // Whether every job posted has run (none waits or runs).
  bool idle();
  // Readable once a job has run since the last clear_done(): wait on it beside other
  // descriptors.
  int done_fd() const { return done_fd_.get(); }
  void clear_done();

 private:
  void run();
  // idle(), with mutex_ held.
  bool idle_locked() const { return jobs_.empty() && !running_; }

  UniqueFd done_fd_;  // an eventfd
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::function<void()>> jobs_;
  bool running_ = false;  // a job is under way
  bool leaving_ = false;
  std::thread thread_;  // started by the first post()
};

}  // namespace tw::archive
