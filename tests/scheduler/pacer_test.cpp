#include "scheduler/pacer.hpp"

#include <gtest/gtest.h>

namespace tw::scheduler {
namespace {

using namespace std::chrono_literals;

TEST(Pacer, UnlimitedNeverWaits) {
  Pacer pacer(0, 0);
  EXPECT_FALSE(pacer.limited());
  const auto t = Pacer::Clock::now();
  pacer.charge(10'000'000, 1 << 30, t);
  EXPECT_EQ(pacer.delay(t), Pacer::Clock::duration::zero());
}

TEST(Pacer, BandwidthLimitSpacesDispatchByCost) {
  Pacer pacer(0, 1'000'000);  // 1 MB/s
  const auto t0 = Pacer::Clock::now();
  // Ten items of 500 kB, each charged when it finishes, dispatched as soon as allowed.
  auto t = t0;
  for (int i = 0; i < 10; ++i) {
    t += pacer.delay(t);
    pacer.charge(0, 500'000, t);
  }
  t += pacer.delay(t);
  // 5 MB at 1 MB/s takes 5 s, less the one second of burst credit.
  EXPECT_GE(t - t0, 3900ms);
  EXPECT_LE(t - t0, 5100ms);
}

TEST(Pacer, CpuLimitUsesTheMostExpensiveResource) {
  Pacer pacer(50, 1'000'000'000);  // half a core; bandwidth effectively unlimited
  const auto t0 = Pacer::Clock::now() + 10s;
  pacer.charge(500'000, 1, t0);  // 0.5 s of CPU at 50 % costs 1 s of wall time
  pacer.charge(500'000, 1, t0);
  const auto wait = pacer.delay(t0);  // 2 s of cost less 1 s of burst credit
  EXPECT_GE(wait, 900ms);
  EXPECT_LE(wait, 1100ms);
}

TEST(Pacer, IdleTimeEarnsOnlyLimitedCredit) {
  Pacer pacer(0, 1000);
  const auto t0 = Pacer::Clock::now();
  const auto later = t0 + 1h;  // a long idle stretch
  pacer.charge(0, 3000, later);  // 3 s of cost
  EXPECT_GE(pacer.delay(later), 1900ms);  // only 1 s of credit was earned
}

}  // namespace
}  // namespace tw::scheduler
