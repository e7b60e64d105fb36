// Paces dispatch so the archivers' reported CPU time and archive bytes stay within
// max_cpu_percent and max_bandwidth on average: each finished item pushes the earliest
// time the next may start by the time its cost takes at the allowed rate (a leaky bucket,
// with up to one second of credit for bursts). Time is passed in, so tests need no clock.
// Thread-safe: all consumers share one Pacer.
#pragma once

#include <chrono>
#include <cstdint>

#include "common/mutex.hpp"
#include "common/thread_annotations.hpp"

namespace tw::scheduler {

class Pacer {
 public:
  using Clock = std::chrono::steady_clock;

  // 0 means no limit for that resource.
  Pacer(double max_cpu_percent, std::uint64_t max_bandwidth)
      : cpu_fraction_(max_cpu_percent / 100.0), bandwidth_(static_cast<double>(max_bandwidth)) {}

  bool limited() const { return cpu_fraction_ > 0 || bandwidth_ > 0; }

  // How long a consumer must wait at `now` before dispatching its next item.
  Clock::duration delay(Clock::time_point now) const EXCLUDES(mutex_);

  // Records what one item cost.
  void charge(std::uint64_t cpu_us, std::uint64_t bytes, Clock::time_point now) EXCLUDES(mutex_);

 private:
  static constexpr auto kBurstCredit = std::chrono::seconds(1);

  // Constant after construction.
  const double cpu_fraction_;  // of one core
  const double bandwidth_;     // bytes per second

  // Protected by mutex_.
  mutable Mutex mutex_;
  Clock::time_point next_allowed_ GUARDED_BY(mutex_){};
};

}  // namespace tw::scheduler
