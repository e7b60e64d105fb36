// The convergence promise under random operations and random faults (ARCHITECTURE.md,
// "Convergence": requests reconcile, they do not replay): a fixed set of seeds, each a
// trial of tests/integration/convergence_harness.hpp against the real monitor, scheduler,
// archivers and PostgreSQL. One seed runs without faults, so a failure there is the
// product's handling of the operations alone; the others deal every fault. Two more run
// with a retention policy over a clock that moves over weeks, forget and gc at random
// moments beside the archivers (convergence_retention.hpp), one without faults and one
// with every fault and the forgets and collections killed now and then. One more ships to
// the S3 gateway every second with every fault and the gateway restarted among them, and
// its checks read the bucket alone (`--from-store`, the backup root set aside). More seeds:
// bench/soak (`timewarp-soak --trials N`).
#include <iostream>

#include <gtest/gtest.h>

#include "integration/convergence_harness.hpp"
#include "objstore/gateway.hpp"
#include "support/test_support.hpp"

namespace tw {
namespace {

struct Case {
  std::uint64_t seed;
  bool faults;
  bool retention = false;  // a policy, a clock over weeks, forget and gc beside the archivers
  bool bucket = false;     // shipped to the S3 gateway, restarted among the faults; the
                           // checks read the bucket alone
};

void PrintTo(const Case& c, std::ostream* out) {
  *out << "seed " << c.seed << (c.faults ? ", all faults" : ", no faults")
       << (c.retention ? ", retention" : "") << (c.bucket ? ", bucket" : "");
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return "Seed" + std::to_string(info.param.seed) + (info.param.faults ? "AllFaults" : "NoFaults") +
         (info.param.retention ? "Retention" : "") + (info.param.bucket ? "Bucket" : "");
}

class Convergence : public ::testing::TestWithParam<Case> {};

TEST_P(Convergence, RestoreAtEveryQuietMomentEqualsTheTreeThen) {
  TW_REQUIRE_DATABASE();
  if (GetParam().bucket && !objstore::store_configured()) {
    GTEST_SKIP() << "TW_S3_ENDPOINT is not set (run scripts/test)";
  }
  test::convergence::Options options;
  options.seed = GetParam().seed;
  if (!GetParam().faults) options.faults = test::convergence::Faults::none();
  options.bucket = GetParam().bucket;
  options.faults.restart_gateway = options.bucket && GetParam().faults;
  options.retention.on = GetParam().retention;
  if (options.retention.on) options.moments = 8;  // enough for the clock to span weeks
  const auto result = test::convergence::run_trial(options);
  std::cout << result.summary << std::endl;
  EXPECT_TRUE(result.passed) << result.report;
}

INSTANTIATE_TEST_SUITE_P(Seeds, Convergence,
                         ::testing::Values(Case{1, false}, Case{2, true}, Case{3, true},
                                           Case{4, true}, Case{5, false, true}, Case{6, true, true},
                                           Case{7, true, false, true}),
                         case_name);

}  // namespace
}  // namespace tw
