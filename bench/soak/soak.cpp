// timewarp-bench-soak: runs N seeds of the randomized convergence trial
// (tests/integration/convergence_harness.hpp) and prints one line per trial, then
// "N passed, N failed". A failed trial's report (seed, differences, the run's log) is
// printed after its line unless --quiet; --keep DIR keeps its directory (archive, logs).
// Exit status 0 when every trial passed, 1 otherwise, 2 for bad arguments or no database.
#include <cstdio>
#include <iostream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "integration/convergence_generator.hpp"
#include "integration/convergence_harness.hpp"
#include "objstore/gateway.hpp"
#include "support/test_support.hpp"

int main(int argc, char** argv) {
  namespace conv = tw::test::convergence;
  CLI::App app{"Runs many seeds of the convergence trial; prints one line each, then the tally."};
  app.name("timewarp-bench-soak");
  int trials = 10;
  std::uint64_t seed = 1000;
  bool no_faults = false, quiet = false;
  conv::Options options;
  conv::Faults& f = options.faults;
  bool no_retry = false, no_archiver = false, no_scheduler = false, no_monitor = false,
       no_database = false, no_second = false;
  app.add_option("--trials", trials, "how many seeds")->check(CLI::Range(1, 1000000));
  app.add_option("--seed", seed, "the first seed (then seed+1, ...)");
  app.add_flag("--no-faults", no_faults, "no fault at all");
  app.add_flag("--no-retry", no_retry, "no FAILED RETRY from the archiver proxy");
  app.add_flag("--no-kill-archiver", no_archiver, "no SIGKILL of archivers");
  app.add_flag("--no-kill-scheduler", no_scheduler, "no SIGKILL of the scheduler");
  app.add_flag("--no-kill-monitor", no_monitor, "no SIGKILL of the monitor");
  app.add_flag("--no-restart-database", no_database, "no PostgreSQL restart");
  app.add_flag("--no-second-scheduler", no_second, "no second scheduler");
  app.add_option("--moments", options.moments, "quiet moments per trial")
      ->check(CLI::Range(1, 1000));
  app.add_option("--bursts", options.bursts_per_moment, "bursts of operations per moment")
      ->check(CLI::Range(1, 1000));
  app.add_option("--max-burst", options.max_burst, "operations per burst at most")
      ->check(CLI::Range(1, 10000));
  app.add_option("--fault-chance", options.fault_chance, "chance of a fault per burst")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--retry-permille", options.retry_permille,
                 "items the proxy fails once, per mille")
      ->check(CLI::Range(0, 1000));
  app.add_option("--archivers", options.archivers, "archivers")->check(CLI::Range(1, 64));
  bool no_large = false;
  app.add_flag("--no-large-files", no_large, "no files over 64 KiB");
  std::vector<std::string> ops;
  app.add_option("--ops", ops,
                 "only these operations (comma-separated): " +
                     fmt::format("{}", fmt::join(conv::TreeGenerator::names(), ",")))
      ->delimiter(',')
      ->check(CLI::IsMember(conv::TreeGenerator::names()));
  bool no_dir_mtimes = false;
  app.add_flag("--no-directory-mtimes", no_dir_mtimes, "do not compare directories' mtimes");
  app.add_flag("--retention", options.retention.on,
               "a retention policy, a clock over weeks, forget and gc beside the archivers");
  app.add_option("--forget-chance", options.retention.forget_chance,
                 "with --retention: chance a forget starts in a burst")
      ->check(CLI::Range(0.0, 1.0));
  app.add_flag("--bucket", options.bucket,
               "ship to the S3 gateway TW_S3_* names every second, restart it among the "
               "faults, and check the bucket alone");
  app.add_option("--keep", options.keep_dir, "keep each failed trial's directory under DIR");
  app.add_flag("--quiet", quiet, "no report after a failed trial's line");
  bool show_log = false;
  app.add_flag("--log", show_log, "print every trial's log of operations and faults");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (!tw::test::TestDatabase::available()) {
    std::cerr << "timewarp-bench-soak: TIMEWARP_TEST_DATABASE is not set (a libpq connection "
                 "string of a server where databases may be created)\n";
    return 2;
  }
  options.large_files = !no_large;
  options.operations = {ops.begin(), ops.end()};
  options.directory_mtimes = !no_dir_mtimes;
  spdlog::set_level(spdlog::level::warn);  // the per-trial database's migration lines
  if (no_faults) f = conv::Faults::none();
  if (no_retry) f.retry = false;
  if (no_archiver) f.kill_archiver = false;
  if (no_scheduler) f.kill_scheduler = false;
  if (no_monitor) f.kill_monitor = false;
  if (no_database) f.restart_database = false;
  if (no_second) f.second_scheduler = false;
  if (options.bucket && !tw::objstore::store_configured()) {
    std::cerr << "timewarp-bench-soak: --bucket needs TW_S3_ENDPOINT, TW_S3_ACCESS_KEY, "
                 "TW_S3_SECRET_KEY and TW_S3_REGION (scripts/lib/ceph.sh starts a gateway)\n";
    return 2;
  }
  f.restart_gateway = options.bucket && !no_faults;

  int passed = 0, failed = 0;
  for (int i = 0; i < trials; ++i) {
    options.seed = seed + static_cast<std::uint64_t>(i);
    conv::Result result;
    try {
      result = conv::run_trial(options);
    } catch (const std::exception& e) {
      result.summary = fmt::format("seed {}: FAILED to start: {}", options.seed, e.what());
    }
    (result.passed ? passed : failed) += 1;
    std::cout << result.summary << std::endl;
    if (!result.passed && !quiet && !result.report.empty()) {
      std::cout << result.report << std::endl;
    } else if (show_log) {
      std::cout << result.log << std::endl;
    }
  }
  std::cout << fmt::format("{} passed, {} failed", passed, failed) << std::endl;
  return failed == 0 ? 0 : 1;
}
