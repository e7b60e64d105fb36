// Time conversions shared by the components: configuration values in seconds (double) to
// std::chrono durations and back, the wall clock as the database stores it (seconds since
// the epoch, double) and as the archive stores it (nanoseconds since the epoch), and
// struct timespec to and from nanoseconds. Pure functions but for the two clock reads;
// safe from any thread.
#pragma once

#include <time.h>

#include <chrono>
#include <cstdint>

namespace tw {

inline constexpr std::int64_t kNsPerSecond = 1'000'000'000;

// A number of seconds as the configuration holds it, in whole milliseconds (truncated).
inline std::chrono::milliseconds seconds_ms(double seconds) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000.0));
}

// A duration in seconds, fractions kept: for log lines and the database.
template <class Rep, class Period>
double seconds_of(std::chrono::duration<Rep, Period> d) {
  return std::chrono::duration<double>(d).count();
}

// `ts` in nanoseconds (st_mtim, st_ctim, clock_gettime).
inline std::int64_t timespec_ns(const struct timespec& ts) {
  return static_cast<std::int64_t>(ts.tv_sec) * kNsPerSecond + ts.tv_nsec;
}

// `ts` in seconds, as the database's size/mtime columns take it.
inline double timespec_seconds(const struct timespec& ts) {
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// Nanoseconds as a timespec whose tv_nsec lies in [0, 1e9), as futimens and sigtimedwait
// require, for negative values too (-1.5 s is -2 s + 0.5 s: floor division).
inline struct timespec ns_timespec(std::int64_t ns) {
  std::int64_t sec = ns / kNsPerSecond;
  std::int64_t rest = ns % kNsPerSecond;
  if (rest < 0) {
    rest += kNsPerSecond;
    --sec;
  }
  return {static_cast<time_t>(sec), static_cast<long>(rest)};
}

// The wall clock (CLOCK_REALTIME) in nanoseconds since the epoch: archive times.
inline std::int64_t now_ns() {
  struct timespec ts {};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return timespec_ns(ts);
}

// The wall clock in seconds since the epoch: the database's started_at and finished_at.
inline double epoch_seconds() {
  return seconds_of(std::chrono::system_clock::now().time_since_epoch());
}

}  // namespace tw
