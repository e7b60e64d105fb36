#include "scheduler/pacer.hpp"

#include <algorithm>

namespace tw::scheduler {

Pacer::Clock::duration Pacer::delay(Clock::time_point now) const {
  MutexLock lock(&mutex_);
  return next_allowed_ > now ? next_allowed_ - now : Clock::duration::zero();
}

void Pacer::charge(std::uint64_t cpu_us, std::uint64_t bytes, Clock::time_point now) {
  double seconds = 0;
  if (cpu_fraction_ > 0)
    seconds = std::max(seconds, static_cast<double>(cpu_us) / 1e6 / cpu_fraction_);
  if (bandwidth_ > 0) seconds = std::max(seconds, static_cast<double>(bytes) / bandwidth_);
  if (seconds <= 0) return;
  MutexLock lock(&mutex_);
  // Idle time earns at most kBurstCredit of credit.
  const auto base =
      std::max(next_allowed_, now - std::chrono::duration_cast<Clock::duration>(kBurstCredit));
  next_allowed_ =
      base + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

}  // namespace tw::scheduler
