#include "integration/convergence_system.hpp"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "support/processes.hpp"
#include "support/test_support.hpp"

namespace tw::test::convergence {
namespace {

using namespace std::chrono_literals;

std::string cmdline(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/cmdline", pid), std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The command line with its NUL separators shown as spaces.
std::string shown_cmdline(std::string s) {
  for (char& c : s) c = c == '\0' ? ' ' : c;
  return s;
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

std::vector<pid_t> running_children(pid_t parent) {
  std::vector<pid_t> out;
  for (const auto& p : live_children(parent)) out.push_back(p.pid);
  return out;
}

bool running(pid_t pid) {
  for (const auto& p : processes()) {
    if (p.pid == pid) return p.state != 'Z';
  }
  return false;
}

std::string fault_archiver_path() {
  const char* override_path = std::getenv("TIMEWARP_TEST_FAULT_ARCHIVER_EXE");
  return override_path && *override_path ? override_path : TW_FAULT_ARCHIVER_EXE;
}

std::string hooked_archiver_path() {
  const char* override_path = std::getenv("TIMEWARP_TEST_HOOKED_ARCHIVER_EXE");
  return override_path && *override_path ? override_path : TW_HOOKED_ARCHIVER_EXE;
}

System::System(SystemSettings settings, EventLog& log)
    : settings_(std::move(settings)), log_(log), launcher_(make_process_launcher()) {
  std::filesystem::create_directories(src());
  std::filesystem::create_directories(settings_.work + "/proxy-state");
}

System::~System() {
  try {
    stop();
  } catch (const std::exception&) {
  }
}

std::unique_ptr<ChildProcess> System::launch_logged(
    const std::string& exe, const std::vector<std::string>& args, const std::string& log_file,
    std::vector<std::pair<std::string, std::string>> env) {
  // Through sh so the child's stderr goes to its log file; exec keeps the pid.
  LaunchSpec spec{"/bin/sh",
                  {"-c", "log=$0; exe=$1; shift; exec \"$exe\" \"$@\" 2>>\"$log\"", log_file, exe},
                  std::move(env)};
  spec.args.insert(spec.args.end(), args.begin(), args.end());
  return launcher_->launch(spec);
}

std::vector<std::string> System::monitor_args() const {
  std::vector<std::string> args = {
      "--backup-root=" + archive(),
      "--source=" + src(),
      fmt::format("--event-delay={}", settings_.event_delay),
      fmt::format("--archivers={}", settings_.archivers),
      fmt::format("--lease-time={}", settings_.lease_time),
      "--heartbeat-interval=0.2",
      "--flush-interval=0.01",
      "--retry-base-delay=0.05",
      "--retry-max-delay=0.5",
      "--max-attempts=100",
      "--item-timeout=60",
      "--log-level=info",
      "--database=" + settings_.conninfo,
      "--scheduler-exe=" + scheduler_exe(),
      "--timewarp-exe=" + cli_exe(),
  };
  args.insert(args.end(), settings_.store_args.begin(), settings_.store_args.end());
  const bool hooked = !settings_.hooked_archiver_args.empty();
  const std::string archiver = hooked ? hooked_archiver_path() : archiver_exe();
  for (const auto& arg : settings_.hooked_archiver_args) args.push_back("--archiver-arg=" + arg);
  if (hooked) args.push_back("--retention-interval=0");
  if (settings_.proxy) {
    args.push_back("--archiver-exe=" + fault_archiver_path());
    args.push_back("--archiver-arg=--fault-real=" + archiver);
    args.push_back(fmt::format("--archiver-arg=--fault-seed={}", settings_.seed));
    args.push_back(
        fmt::format("--archiver-arg=--fault-retry-permille={}", settings_.retry_permille));
    args.push_back("--archiver-arg=--fault-state=" + settings_.work + "/proxy-state");
    args.push_back("--archiver-arg=--fault-log=" + proxy_log());
  } else {
    args.push_back("--archiver-exe=" + archiver);
  }
  return args;
}

void System::start_monitor() {
  monitor_ = launch_logged(monitor_exe(), monitor_args(), monitor_log());
  ++monitor_starts_;
  log_.add("system",
           fmt::format("monitor started (pid {}, start {})", monitor_->pid(), monitor_starts_));
}

void System::kill_monitor() {
  if (!monitor_) return start_monitor();
  const pid_t pid = monitor_->pid();
  ::kill(pid, SIGKILL);
  monitor_->wait_exit(10s);
  monitor_.reset();
  log_.add("fault", fmt::format("SIGKILL monitor (pid {}); starting it again", pid));
  start_monitor();
}

bool System::supervise() {
  if (!monitor_) return true;
  const auto status = monitor_->wait_exit(0ms);
  if (!status) return true;
  log_.add("system", fmt::format("monitor (pid {}) exited by itself with status {}; starting it "
                                 "again",
                                 monitor_->pid(), *status));
  monitor_.reset();
  start_monitor();
  return false;
}

bool System::kill_scheduler() {
  if (!monitor_) return false;
  const auto schedulers = live_children(monitor_->pid(), "timewarp-schedu");
  if (schedulers.empty()) {
    log_.add("fault", "SIGKILL scheduler: none running now (skipped)");
    return false;
  }
  ::kill(schedulers.front().pid, SIGKILL);
  log_.add("fault", fmt::format("SIGKILL scheduler (pid {})", schedulers.front().pid));
  return true;
}

bool System::kill_archiver(std::mt19937_64& rng) {
  if (!monitor_) return false;
  std::vector<ProcessEntry> archivers;
  for (const auto& scheduler : live_children(monitor_->pid(), "timewarp-schedu")) {
    for (const auto& child : live_children(scheduler.pid)) {
      archivers.push_back(child);
      for (const auto& real : live_children(child.pid)) archivers.push_back(real);
    }
  }
  if (archivers.empty()) {
    log_.add("fault", "SIGKILL archiver: none running now (skipped)");
    return false;
  }
  const auto& victim =
      archivers[std::uniform_int_distribution<std::size_t>(0, archivers.size() - 1)(rng)];
  ::kill(victim.pid, SIGKILL);
  log_.add("fault", fmt::format("SIGKILL archiver (pid {}, {})", victim.pid, victim.comm));
  return true;
}

bool System::restart_database() {
  const char* datadir = std::getenv("TW_PG_DATADIR");
  if (datadir == nullptr || *datadir == '\0') {
    log_.add("fault", "database restart: TW_PG_DATADIR is not set (skipped)");
    return false;
  }
  std::string bindir;
  if (run_command({"/usr/bin/pg_config", "--bindir"}, &bindir) != 0) {
    log_.add("fault", "database restart: pg_config failed (skipped)");
    return false;
  }
  struct stat st {};
  if (::stat(datadir, &st) != 0) {
    log_.add("fault", fmt::format("database restart: no {} (skipped)", datadir));
    return false;
  }
  std::string as_owner;
  if (st.st_uid != ::geteuid()) {
    std::string owner;
    run_command({"/usr/bin/stat", "-c", "%U", datadir}, &owner);
    as_owner = "/usr/sbin/runuser -u '" + trimmed(owner) + "' -- ";
  }
  conn_.reset();
  log_.add("fault", "PostgreSQL restart (pg_ctl restart -m fast)");
  // The new postmaster must not inherit our pipe, or reading it would never end.
  const int rc = run_command(
      {"/bin/sh", "-c", as_owner + "\"$0\" -D \"$1\" restart -m fast -w -t 60 >/dev/null 2>&1",
       trimmed(bindir) + "/pg_ctl", datadir});
  log_.add("fault", fmt::format("PostgreSQL restart finished (exit {})", rc));
  return rc == 0;
}

int System::stop() {
  int status = 0;
  if (second_) {
    ::kill(second_->pid(), SIGKILL);
    second_->wait_exit(10s);
    second_.reset();
    log_.add("system", "second scheduler killed at the end");
  }
  if (monitor_) {
    const pid_t pid = monitor_->pid();
    ::kill(pid, SIGTERM);
    auto exited = monitor_->wait_exit(90s);
    status = exited ? *exited : monitor_->terminate(1s);
    monitor_.reset();
    log_.add("system",
             fmt::format("monitor (pid {}) stopped with SIGTERM: status {}", pid, status));
  }
  end_stragglers();
  conn_.reset();
  return status;
}

void System::end_stragglers() {
  // Schedulers orphaned by a killed monitor stop on EOF; archivers with their scheduler.
  const auto ours = [&] {
    std::vector<pid_t> pids;
    for (const auto& p : processes()) {
      if (p.state == 'Z' || p.pid == ::getpid()) continue;
      if (cmdline(p.pid).find(archive()) != std::string::npos) pids.push_back(p.pid);
    }
    return pids;
  };
  if (wait_until([&] { return ours().empty(); }, 30s, 20ms)) return;
  for (const pid_t pid : ours()) {
    log_.add("system", fmt::format("process {} ({}) still running at the end: SIGKILL", pid,
                                   shown_cmdline(cmdline(pid))));
    ::kill(pid, SIGKILL);
  }
}

}  // namespace tw::test::convergence
