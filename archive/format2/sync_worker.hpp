// The thread that makes a group of versions durable while the archiver goes on with the
// next requests (group commit, FORMAT.md "Format 2"): it runs the jobs posted to it one
// after the other, in the order posted, and tells its owner each time one is done, both
// through a descriptor that a poll(2) can wait on and to a thread blocked in wait_until().
// The thread starts with the first job and has every signal blocked. Internal to the
// archive library; post() and the waits belong to one owner thread.
#pragma once

#include <deque>
#include <functional>
#include <thread>

#include "common/fd.hpp"
#include "common/mutex.hpp"
#include "common/noncopyable.hpp"
#include "common/thread_annotations.hpp"

namespace tw::archive {

// A thread running `body` with every signal blocked: signals go to the process's other
// threads (the archiver's handler wakes its poll, not a worker).
std::thread start_without_signals(std::function<void()> body);

class SyncWorker : NonCopyable {
 public:
  SyncWorker();
  // Runs what is posted still, then joins the thread.
  ~SyncWorker();

  void post(std::function<void()> job) EXCLUDES(mutex_);
  // Blocks until `done()` holds, looking again each time a job has run.
  void wait_until(const std::function<bool()>& done) EXCLUDES(mutex_);
  // Blocks until every job posted has run.
  void wait_idle() EXCLUDES(mutex_);
  // Whether every job posted has run (none waits or runs).
  bool idle() EXCLUDES(mutex_);
  // Readable once a job has run since the last clear_done(): wait on it beside other
  // descriptors.
  int done_fd() const { return done_fd_.get(); }
  void clear_done();

 private:
  void run() EXCLUDES(mutex_);
  // idle(), with mutex_ held.
  bool idle_locked() const REQUIRES(mutex_) { return jobs_.empty() && !running_; }

  // --- constant after construction
  UniqueFd done_fd_;  // an eventfd

  // --- protected by mutex_
  Mutex mutex_;
  CondVar changed_;  // a job was posted or ended, or the owner is leaving
  std::deque<std::function<void()>> jobs_ GUARDED_BY(mutex_);
  bool running_ GUARDED_BY(mutex_) = false;  // a job is under way
  bool leaving_ GUARDED_BY(mutex_) = false;

  // --- the owner's
  std::thread thread_;  // started by the first post()
};

}  // namespace tw::archive
