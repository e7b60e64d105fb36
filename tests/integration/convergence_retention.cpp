#include "integration/convergence_retention.hpp"

#include <signal.h>

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <regex>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "archive/retention.hpp"
#include "support/test_support.hpp"

namespace tw::test::convergence {
namespace {

using namespace std::chrono_literals;

constexpr std::int64_t kSecond = 1'000'000'000;

std::string at_flag(std::int64_t ns) {
  return fmt::format("--now=@{}.{:09d}", ns / kSecond, ns % kSecond);
}

std::string local_text(std::int64_t ns) {
  const std::time_t t = ns / kSecond;
  std::tm tm{};
  ::localtime_r(&t, &tm);
  char text[64];
  std::strftime(text, sizeof text, "%a %F %T %Z", &tm);
  return text;
}

archive::RetentionPolicy folder_policy_of(const RetentionSettings& s) {
  archive::RetentionPolicy p;
  p.keep_within_ns = static_cast<std::int64_t>(s.folder_keep_within * 1e9);
  p.keep_hourly = s.folder_keep_hourly;
  p.keep_daily = s.folder_keep_daily;
  p.keep_weekly = 0;
  p.keep_monthly = 0;
  p.keep_yearly = 0;
  return p;
}

archive::RetentionPolicy policy_of(const RetentionSettings& s) {
  archive::RetentionPolicy p;
  p.keep_within_ns = static_cast<std::int64_t>(s.keep_within * 1e9);
  p.keep_hourly = s.keep_hourly;
  p.keep_daily = s.keep_daily;
  p.keep_weekly = s.keep_weekly;
  p.keep_monthly = 0;
  p.keep_yearly = 0;
  return p;
}

}  // namespace

Retention::Retention(RetentionSettings settings, std::string work, std::string archive,
                     EventLog& log, std::uint64_t seed)
    : settings_(std::move(settings)),
      work_(std::move(work)),
      archive_(std::move(archive)),
      log_(log),
      rng_(seed ^ 0x7e7e'0000'c10c'0001ULL),
      launcher_(make_process_launcher()) {
  if (!settings_.on) return;
  // The trial's own arithmetic (must_keep, the boundaries it aims at) and every command it
  // runs read the calendar of this zone.
  if (auto zone = archive::use_time_zone(settings_.timezone); !zone) {
    throw std::runtime_error(zone.fault().message);
  }
  set_offset(settings_.start_ns - wall_ns());
  log_.add("clock", fmt::format("the trial's clock starts at {} ({})", local_text(now()),
                                fmt::join(policy_args(), " ")));
}

Retention::~Retention() {
  if (child_) child_->terminate(std::chrono::seconds(1));
}

std::vector<std::string> Retention::archiver_args() const {
  if (!settings_.on) return {};
  return {"--hook-clock-offset=" + work_ + "/clock-offset"};
}

std::int64_t Retention::now() const { return wall_ns() + offset_ns_; }

void Retention::set_offset(std::int64_t offset_ns) {
  if (offset_ns < offset_ns_ && offset_ns_ != 0) throw std::logic_error("the clock went back");
  offset_ns_ = offset_ns;
  // Written whole, then renamed: an archiver never reads half a number.
  const std::string file = work_ + "/clock-offset";
  std::ofstream(file + ".new") << offset_ns << "\n";
  std::filesystem::rename(file + ".new", file);
}

std::vector<std::string> Retention::policy_args() const {
  std::vector<std::string> args;
  if (!settings_.folder.empty()) {
    args.push_back(fmt::format(
        "--retention-folder={}: keep_within={} keep_hourly={} keep_daily={} keep_weekly=0",
        settings_.folder, settings_.folder_keep_within, settings_.folder_keep_hourly,
        settings_.folder_keep_daily));
  }
  const std::vector<std::string> archive_keys = {
      "--retention-timezone=" + settings_.timezone,
      fmt::format("--keep-within={}", settings_.keep_within),
      fmt::format("--keep-hourly={}", settings_.keep_hourly),
      fmt::format("--keep-daily={}", settings_.keep_daily),
      fmt::format("--keep-weekly={}", settings_.keep_weekly),
      "--keep-monthly=0",
      "--keep-yearly=0"};
  args.insert(args.end(), archive_keys.begin(), archive_keys.end());
  return args;
}

void Retention::start(bool forget) {
  LaunchSpec spec;
  spec.executable = cli_exe();
  spec.args = {"--backup-root=" + archive_};
  spec.args.insert(spec.args.end(), settings_.store_args.begin(), settings_.store_args.end());
  if (forget) {
    const std::int64_t at = now();
    forget_nows_.push_back(at);  // before it starts: a killed one may have thinned too
    spec.args.insert(spec.args.end(), {"forget", "--summary", at_flag(at)});
    const auto policy = policy_args();
    spec.args.insert(spec.args.end(), policy.begin(), policy.end());
    ++forgets_;
  } else {
    spec.args.push_back("gc");
    ++gcs_;
  }
  child_ = launcher_->launch(spec);
  child_is_forget_ = forget;
  log_.add("retention", fmt::format("{} started (pid {}) at {}", forget ? "forget" : "gc",
                                    child_->pid(), local_text(now())));
}

void Retention::reap(bool wait) {
  if (!child_) return;
  std::string line, output;
  const auto deadline = std::chrono::steady_clock::now() + 300s;
  while (true) {
    const auto status = child_->read_line(line, wait ? 1000ms : 0ms);
    if (status == ChildProcess::ReadStatus::Line) {
      output += line + "\n";
      continue;
    }
    if (status == ChildProcess::ReadStatus::Eof) break;
    if (!wait || std::chrono::steady_clock::now() > deadline) {
      if (!wait) return;  // still running; what it printed so far is lost to the summary
      child_->terminate(1s);
      ++failed_;
      last_failure_ = "a forget or gc did not finish within 300 s";
      child_.reset();
      return;
    }
  }
  const int status = child_->wait_exit(60s).value_or(child_->terminate(1s));
  static const std::regex removed("removed ([0-9]+) of");
  if (std::smatch m; std::regex_search(output, m, removed)) removed_ += std::stoull(m[1]);
  log_.add("retention", fmt::format("{} (pid {}) exited {}: {}", child_is_forget_ ? "forget" : "gc",
                                    child_->pid(), status, output.substr(0, 300)));
  if (status != 0) {
    ++failed_;
    last_failure_ =
        fmt::format("{} exited {}: {}", child_is_forget_ ? "forget" : "gc", status, output);
  }
  child_.reset();
}

void Retention::during_burst() {
  if (!settings_.on) return;
  reap(false);
  std::uniform_real_distribution<double> roll(0, 1);
  const double draw = roll(rng_);  // drawn whatever happens, so the stream stays the same
  if (child_) {
    if (settings_.kill && draw < 0.35) kill_child();
    return;
  }
  // Nothing to thin before the first request has made the archive.
  if (!std::filesystem::exists(archive_ + "/FORMAT")) return;
  if (draw < settings_.forget_chance) {
    start(true);
  } else if (draw < settings_.forget_chance + settings_.gc_chance) {
    start(false);
  } else {
    return;
  }
  // A run takes milliseconds: a kill meant to land inside it is dealt now, after a pause
  // drawn from 0 to 40 ms (the workload waits meanwhile).
  const int pause_ms = std::uniform_int_distribution<int>(0, 40)(rng_);
  if (settings_.kill && roll(rng_) < 0.3) {
    std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
    kill_child();
  }
}

void Retention::kill_child() {
  const pid_t pid = child_->pid();
  ::kill(pid, SIGKILL);
  const auto status = child_->wait_exit(10s);
  ++killed_;
  log_.add("fault", fmt::format("SIGKILL {} (pid {}){}", child_is_forget_ ? "forget" : "gc", pid,
                                status == 128 + SIGKILL ? "" : ": it had finished already"));
  child_.reset();
}

// The next instant after `after_ns` of a kind: 0 any instant, 1 a full hour, 2 a midnight,
// 3 a Monday's midnight (local time), a random way ahead.
std::int64_t Retention::next_boundary(std::int64_t after_ns, int kind) {
  const auto ahead = [&](std::int64_t most_s) {
    return after_ns + std::uniform_int_distribution<std::int64_t>(60, most_s)(rng_) * kSecond;
  };
  if (kind == 0) return ahead(6 * 3600);
  std::time_t t = ahead(kind == 1 ? 3 * 3600 : kind == 2 ? 2 * 86400 : 7 * 86400) / kSecond;
  std::tm tm{};
  ::localtime_r(&t, &tm);
  tm.tm_min = 0;
  tm.tm_sec = 0;
  tm.tm_isdst = -1;
  if (kind == 1) {
    tm.tm_hour += 1;
  } else {
    tm.tm_hour = 0;
    tm.tm_mday += 1;
    if (kind == 3) {
      std::tm probe = tm;
      ::mktime(&probe);  // normalises, and tells the day of the week
      tm.tm_mday += (8 - probe.tm_wday) % 7;
    }
  }
  return static_cast<std::int64_t>(::mktime(&tm)) * kSecond;
}

std::int64_t Retention::moment_instant() {
  const int kind = std::uniform_int_distribution<int>(0, 3)(rng_);
  const std::int64_t at = next_boundary(now(), kind);
  set_offset(at - wall_ns() - 2'000'000);
  wait_until([&] { return now() > at; }, 1s, 1ms);
  static const char* const kKinds[] = {"an instant", "a full hour", "a midnight", "a Monday"};
  log_.add("clock", fmt::format("the clock jumps to {}, {}", local_text(at), kKinds[kind]));
  return at;
}

bool Retention::finish(std::string& why) {
  if (!settings_.on) return true;
  reap(true);
  start(true);
  reap(true);
  start(false);
  reap(true);
  if (failed_ > 0)
    why = fmt::format("{} forget or gc runs failed; the last: {}", failed_, last_failure_);
  return failed_ == 0;
}

bool Retention::must_keep(std::int64_t at_ns) const {
  const auto policy = policy_of(settings_);
  for (const auto at : forget_nows_) {
    if (!archive::kept_moments(policy, at).contains(at_ns)) return false;
  }
  return true;
}

bool Retention::must_keep_in_folder(std::int64_t at_ns) const {
  const auto policy = folder_policy_of(settings_);
  for (const auto at : forget_nows_) {
    if (!archive::kept_moments(policy, at).contains(at_ns)) return false;
  }
  return true;
}

std::string Retention::summary() const {
  if (!settings_.on) return "";
  return fmt::format("{} forgets and {} collections ({} killed), {} versions removed", forgets_,
                     gcs_, killed_, removed_);
}

}  // namespace tw::test::convergence
