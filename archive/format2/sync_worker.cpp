#include "archive/format2/sync_worker.hpp"

#include <signal.h>
#include <sys/eventfd.h>

#include <cstdint>
#include <stdexcept>

namespace tw::archive {

std::thread start_without_signals(std::function<void()> body) {
  sigset_t all, before;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &before);
  std::thread started(std::move(body));
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
  return started;
}

SyncWorker::SyncWorker() : done_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (!done_fd_) throw std::runtime_error("eventfd failed");
}

SyncWorker::~SyncWorker() {
  {
    MutexLock lock(&mutex_);
    leaving_ = true;
  }
  changed_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

void SyncWorker::post(std::function<void()> job) {
  {
    MutexLock lock(&mutex_);
    jobs_.push_back(std::move(job));
  }
  changed_.SignalAll();
  if (!thread_.joinable()) thread_ = start_without_signals([this] { run(); });
}

void SyncWorker::run() {
  MutexLock lock(&mutex_);
  while (true) {
    while (!leaving_ && jobs_.empty()) changed_.Wait(&mutex_);
    if (jobs_.empty()) return;  // leaving, with nothing left to run
    auto job = std::move(jobs_.front());
    jobs_.pop_front();
    running_ = true;
    mutex_.Unlock();
    job();
    mutex_.Lock();
    running_ = false;
    changed_.SignalAll();
    // Signalled once the job's end is recorded: an owner woken by it finds idle() true
    // when no other job waits.
    const std::uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(done_fd_.get(), &one, sizeof one);
  }
}

void SyncWorker::wait_until(const std::function<bool()>& done) {
  MutexLock lock(&mutex_);
  while (!done()) changed_.Wait(&mutex_);
}

void SyncWorker::wait_idle() {
  MutexLock lock(&mutex_);
  while (!idle_locked()) changed_.Wait(&mutex_);
}

bool SyncWorker::idle() {
  MutexLock lock(&mutex_);
  return idle_locked();
}

void SyncWorker::clear_done() {
  std::uint64_t count = 0;
  [[maybe_unused]] const ssize_t n = ::read(done_fd_.get(), &count, sizeof count);
}

}  // namespace tw::archive
