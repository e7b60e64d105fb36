#include "integration/convergence_faults.hpp"

#include <chrono>
#include <cstdlib>
#include <stdexcept>

#include "objstore/gateway.hpp"

namespace tw::test::convergence {

std::string Faults::describe() const {
  std::string out;
  const auto add = [&out](bool on, const char* name) {
    if (on) out += (out.empty() ? "" : " ") + std::string(name);
  };
  add(retry, "retry");
  add(kill_archiver, "kill-archiver");
  add(kill_scheduler, "kill-scheduler");
  add(kill_monitor, "kill-monitor");
  add(restart_database, "restart-database");
  add(second_scheduler, "second-scheduler");
  add(restart_gateway, "restart-gateway");
  return out.empty() ? "none" : out;
}

FaultInjector::FaultInjector(System& system, std::uint64_t seed, EventLog& log, Faults faults)
    : system_(system), rng_(seed ^ 0x5eed'fa17'0000'0001ULL), log_(log) {
  if (faults.kill_archiver) kinds_.push_back(Kind::KillArchiver);
  if (faults.kill_scheduler) kinds_.push_back(Kind::KillScheduler);
  if (faults.kill_monitor) kinds_.push_back(Kind::KillMonitor);
  if (faults.restart_database) {
    const char* datadir = std::getenv("TW_PG_DATADIR");
    if (datadir != nullptr && *datadir != '\0') {
      kinds_.push_back(Kind::RestartDatabase);
    } else {
      log_.add("fault", "database restarts are off: TW_PG_DATADIR is not set");
    }
  }
  if (faults.second_scheduler) kinds_.push_back(Kind::SecondScheduler);
  if (faults.restart_gateway) kinds_.push_back(Kind::RestartGateway);
}

int FaultInjector::strike_point(int n, double chance) {
  // Both draws are made whatever the outcome, so the stream does not depend on it.
  const double roll = std::uniform_real_distribution<double>(0, 1)(rng_);
  const int at = std::uniform_int_distribution<int>(0, n > 0 ? n - 1 : 0)(rng_);
  return !kinds_.empty() && roll < chance ? at : -1;
}

void FaultInjector::fire() {
  if (kinds_.empty()) return;
  const Kind kind = kinds_[std::uniform_int_distribution<std::size_t>(0, kinds_.size() - 1)(rng_)];
  ++fired_;
  switch (kind) {
    case Kind::KillArchiver:
      system_.kill_archiver(rng_);
      break;
    case Kind::KillScheduler:
      system_.kill_scheduler();
      break;
    case Kind::KillMonitor:
      system_.kill_monitor();
      break;
    case Kind::RestartDatabase:
      system_.restart_database();
      break;
    case Kind::SecondScheduler:
      if (system_.second_scheduler_running()) {
        log_.add("fault", "second scheduler: one is still stopped (skipped)");
      } else {
        system_.start_second_scheduler();
      }
      break;
    case Kind::RestartGateway: {
      log_.add("fault", "restart the S3 gateway (down 0.5 s)");
      const std::string failed = objstore::restart_gateway(std::chrono::milliseconds(500));
      if (!failed.empty()) throw std::runtime_error("restarting the gateway: " + failed);
      log_.add("fault", "the S3 gateway answers again");
      break;
    }
  }
}

void FaultInjector::tick() {
  system_.tick_second_scheduler();
  system_.supervise();
}

}  // namespace tw::test::convergence
