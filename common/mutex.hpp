// A mutex, its scoped lock and a condition variable that clang's thread-safety analysis
// understands, as leveldb's port::Mutex and util/mutexlock.h. std::mutex and
// std::lock_guard carry no annotations, so a GUARDED_BY naming a std::mutex is never
// checked; one naming a tw::Mutex is, in a clang build with -Wthread-safety
// (TIMEWARP_THREAD_SAFETY_ANALYSIS). Thread-safe, as their std counterparts.
//
//   class Counter {
//    public:
//     void add() EXCLUDES(mutex_) {
//       MutexLock lock(&mutex_);
//       ++count_;
//       changed_.SignalAll();
//     }
//     void wait_for(int n) EXCLUDES(mutex_) {
//       MutexLock lock(&mutex_);
//       while (count_ < n) changed_.Wait(&mutex_);  // the condition is checked too
//     }
//
//    private:
//     Mutex mutex_;
//     CondVar changed_;
//     int count_ GUARDED_BY(mutex_) = 0;
//   };
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "common/thread_annotations.hpp"

namespace tw {

class CondVar;

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  // Tells the analysis the caller holds the mutex where it cannot see so (a callback run
  // under the lock). Nothing is checked at run time.
  void AssertHeld() ASSERT_CAPABILITY(this) {}

  // BasicLockable, for a library that locks through std::lock_guard (spdlog's
  // base_sink<Mutex>, common/logging.cpp). Our own code locks with MutexLock.
  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds a Mutex from construction to the end of the scope.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() RELEASE() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// A condition variable waited on with a Mutex held. Wait in a loop on the condition
// (`while (!ready_) cv_.Wait(&mutex_);`): the loop's test is then checked by the analysis
// like any other access, and a spurious wake-up only tests it once more.
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  // Releases `mu`, waits for a Signal()/SignalAll() (or a spurious wake-up), and holds
  // `mu` again on return.
  void Wait(Mutex* mu) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();  // still held: the caller's MutexLock releases it
  }
  // As Wait(), giving up at `deadline`: false when it passed without a wake-up.
  template <class Clock, class Duration>
  bool WaitUntil(Mutex* mu, const std::chrono::time_point<Clock, Duration>& deadline) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    const bool woken = cv_.wait_until(lock, deadline) == std::cv_status::no_timeout;
    lock.release();
    return woken;
  }

  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace tw
