#include "integration/convergence_harness.hpp"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/escape.hpp"
#include "integration/convergence_generator.hpp"
#include "integration/convergence_system.hpp"
#include "objstore/gateway.hpp"
#include "support/test_support.hpp"
#include "support/tree_snapshot.hpp"

namespace tw::test::convergence {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

struct Moment {
  int index = 0;
  std::int64_t at_ns = 0;
  TreeSnapshot tree;
};

std::string at_text(std::int64_t ns) {
  return fmt::format("@{}.{:09d}", ns / 1'000'000'000, ns % 1'000'000'000);
}

std::string make_work_dir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "tw-conv-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  return pattern;
}

// Runs `timewarp` with the archive; stdout and stderr together in `output`.
// `timewarp ARGS` reading the archive `archive` names (its options, after ARGS).
int cli(const std::vector<std::string>& archive, std::vector<std::string> args,
        std::string& output) {
  std::vector<std::string> argv = {"/bin/sh", "-c", "exec \"$0\" \"$@\" 2>&1", cli_exe()};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.insert(argv.end(), archive.begin(), archive.end());
  return run_command(argv, &output);
}

std::string first_lines(const std::string& text, std::size_t max_lines, const std::string& indent) {
  std::istringstream in(text);
  std::string line, out;
  std::size_t n = 0, total = 0;
  while (std::getline(in, line)) {
    if (n < max_lines) {
      out += indent + line + "\n";
      ++n;
    }
    ++total;
  }
  if (total > n) out += fmt::format("{}... ({} more lines)\n", indent, total - n);
  return out;
}

// The warnings and errors of a process log, the last `max_lines` of them.
std::string log_problems(const std::string& file, std::size_t max_lines) {
  std::ifstream in(file);
  std::vector<std::string> hits;
  std::string line;
  while (std::getline(in, line)) {
    if (line.find(" warning: ") != std::string::npos ||
        line.find(" error: ") != std::string::npos ||
        line.find(" critical: ") != std::string::npos) {
      hits.push_back(line);
    }
  }
  std::string out;
  const std::size_t from = hits.size() > max_lines ? hits.size() - max_lines : 0;
  if (from > 0) out += fmt::format("  ... ({} earlier lines)\n", from);
  for (std::size_t i = from; i < hits.size(); ++i) out += "  " + hits[i] + "\n";
  return out.empty() ? "  (none)\n" : out;
}

// Paths (relative) whose entries differ between the two snapshots.
std::vector<std::string> differing_paths(const TreeSnapshot& expected, const TreeSnapshot& actual,
                                         const TreeOptions& options) {
  std::vector<std::string> out;
  for (const auto& [path, e] : expected) {
    auto it = actual.find(path);
    if (it == actual.end() || !diff_trees({{path, e}}, {{path, it->second}}, options).empty()) {
      out.push_back(path);
    }
  }
  for (const auto& [path, a] : actual) {
    if (!expected.count(path)) out.push_back(path);
  }
  return out;
}

bool check_command_exists() {
  std::string help;
  run_command({"/bin/sh", "-c", "exec \"$0\" --help 2>&1", cli_exe()}, &help);
  return help.find("\n  check ") != std::string::npos;
}

class Trial {
 public:
  explicit Trial(const Options& options) : options_(options) {}

  Result run();

 private:
  void operate(FaultInjector& injector, TreeGenerator& generator, std::mt19937_64& rng);
  std::optional<Moment> quiet(System& system, FaultInjector& injector, int index);
  void check_moment(const std::vector<std::string>& archive, const std::string& src,
                    const Moment& m);
  void check_current(const std::vector<std::string>& archive, const std::string& src);
  void fail(const std::string& section) { failures_.push_back(section); }
  // The bucket variant's store, as options of the monitor and of `timewarp` (nothing
  // without it).
  std::vector<std::string> store_args() const;
  // The options of `timewarp` that name the archive the checks read: the backup root, or
  // in the bucket variant the bucket alone (the backup root set aside first).
  std::vector<std::string> archive_to_check();

  std::int64_t clock_now() const { return retention_ ? retention_->now() : wall_ns(); }

  const Options& options_;
  std::unique_ptr<Retention> retention_;
  // Whether the restore at `at_ns` left the folder with a policy of its own out as thinned,
  // and some forget did not keep that moment for it.
  bool folder_thinned(const std::string& output, std::int64_t at_ns) const {
    const std::string& folder = retention_->folder();
    return !folder.empty() && !retention_->must_keep_in_folder(at_ns) &&
           output.find(escape_bytes(folder) + " not restored: its retention policy thinned") !=
               std::string::npos;
  }
  // `tree` without the folder with a policy of its own (keys relative to the sources).
  TreeSnapshot outside_folder(TreeSnapshot tree) const {
    const std::string rel = std::filesystem::path(retention_->folder()).filename().string();
    std::erase_if(tree, [&](const auto& entry) {
      return entry.first == rel || entry.first.starts_with(rel + "/");
    });
    return tree;
  }

  int thinned_ = 0;         // moments refused as thinned (not kept by every forget)
  int folder_thinned_ = 0;  // moments restored without the folder its own policy thinned
  std::string work_;
  std::string bucket_;  // the bucket variant's, on the S3 gateway
  EventLog log_;
  std::vector<Moment> moments_;
  std::vector<std::string> failures_;
  std::vector<std::string> notes_;
};

void Trial::operate(FaultInjector& injector, TreeGenerator& generator, std::mt19937_64& rng) {
  for (int b = 0; b < options_.bursts_per_moment; ++b) {
    const int n = std::uniform_int_distribution<int>(1, options_.max_burst)(rng);
    const int strike = injector.strike_point(n, options_.fault_chance);
    for (int i = 0; i < n; ++i) {
      if (i == strike) injector.fire();
      generator.step();
    }
    injector.tick();
    retention_->during_burst();
    const int pause = std::uniform_int_distribution<int>(0, options_.max_pause_ms)(rng);
    std::this_thread::sleep_for(std::chrono::milliseconds(pause));  // the workload's own rhythm
  }
  // Now and then a fault while the backlog drains.
  if (injector.strike_point(1, options_.fault_chance) == 0) injector.fire();
}

std::optional<Moment> Trial::quiet(System& system, FaultInjector& injector, int index) {
  const auto started = Clock::now();
  const auto window =
      std::chrono::milliseconds(static_cast<int>(options_.event_delay * 2000) + 250);
  std::optional<Clock::time_point> calm_since;
  System::QueueState state;
  const bool calm = wait_until(
      [&] {
        injector.tick();
        state = system.queue_state();
        const auto now = Clock::now();
        const bool drained = state.known && state.open == 0 && state.catchup_done &&
                             !system.second_scheduler_running() && now - started >= window;
        if (!drained) {
          calm_since.reset();
          return false;
        }
        if (!calm_since) calm_since = now;
        return now - *calm_since >= 500ms;  // still drained after a while: nothing was late
      },
      options_.drain_timeout, 20ms);
  if (!calm) {
    fail(fmt::format(
        "== quiet moment {} never came: after {} s the queue still had {} open items (catch-up "
        "finished: {}, second scheduler running: {}, database reachable: {})\n{}",
        index, options_.drain_timeout.count(), state.open, state.catchup_done,
        system.second_scheduler_running(), state.known, system.describe_queue()));
    return std::nullopt;
  }
  const auto last_id = system.last_item_id();
  Moment m;
  m.index = index;
  m.at_ns = retention_->on() ? retention_->moment_instant() : wall_ns();
  wait_until([&] { return clock_now() > m.at_ns + 5'000'000; }, 1s, 1ms);
  m.tree = snapshot_tree(system.src());
  log_.add("moment", fmt::format("quiet moment {} at {} ({} entries; {} items FAILED so far)",
                                 index, at_text(m.at_ns), m.tree.size(), state.failed));
  // Nothing may be queued after a quiet moment until the next change: a late item means the
  // moment was not quiet after all (the monitor was behind), so its differences may be
  // the harness's. Checked for longer than one event window.
  const auto window_ms = static_cast<int>(options_.event_delay * 3000) + 300;
  if (last_id && wait_until([&] { return system.last_item_id().value_or(0) > *last_id; },
                            std::chrono::milliseconds(window_ms), 20ms)) {
    notes_.push_back(
        fmt::format("items queued after quiet moment {} with nothing changing", index));
    fail(
        fmt::format("== items queued after quiet moment {} while nothing changed (the monitor "
                    "was late or queues spurious changes; this moment's differences may not "
                    "be the archive's)\n{}",
                    index, system.describe_items_after(*last_id)));
  }
  return m;
}

void Trial::check_moment(const std::vector<std::string>& archive, const std::string& src,
                         const Moment& m) {
  const std::string dest = fmt::format("{}/restore-{}", work_, m.index);
  std::string output;
  const int rc = cli(archive, {"restore", src, "--at", at_text(m.at_ns), "--to", dest}, output);
  TreeSnapshot restored;
  if (std::filesystem::is_directory(dest)) restored = snapshot_tree(dest);
  TreeOptions compare;
  compare.directory_mtimes = options_.directory_mtimes;
  const std::string diff = diff_trees(m.tree, restored, compare);
  if (rc == 0 && diff.empty()) return;
  // A moment some forget did not keep may be refused, as thinned, and only so.
  const bool kept = !retention_->on() || retention_->must_keep(m.at_ns);
  if (!kept && rc != 0 && output.find("retention policy thinned") != std::string::npos) {
    ++thinned_;
    return;
  }
  // A moment the folder's own policy did not keep: the restore leaves the folder out and
  // says so (exit 1), and everything else must be exact.
  if (rc != 0 && folder_thinned(output, m.at_ns) &&
      diff_trees(outside_folder(m.tree), outside_folder(restored), compare).empty()) {
    ++folder_thinned_;
    return;
  }
  std::string section = fmt::format(
      "== moment {} ({}{}): restore exit {}, {} paths differ "
      "(missing: on disk then, not restored; extra: restored, not "
      "on disk then; `x != y`: restored x, on disk y)\n",
      m.index, at_text(m.at_ns), kept ? "" : ", not kept by every forget", rc,
      differing_paths(m.tree, restored, compare).size());
  if (rc != 0) section += "  restore said:\n" + first_lines(output, 20, "    ");
  section += first_lines(diff, 60, "  ");
  const auto paths = differing_paths(m.tree, restored, compare);
  for (std::size_t i = 0; i < paths.size() && i < 6; ++i) {
    std::string versions;
    cli(archive, {"versions", paths[i].empty() ? src : src + "/" + paths[i]}, versions);
    section +=
        fmt::format("  versions of {}:\n{}", paths[i].empty() ? "(root)" : escape_bytes(paths[i]),
                    first_lines(versions, 12, "    "));
  }
  fail(section);
}

void Trial::check_current(const std::vector<std::string>& archive, const std::string& src) {
  std::string output;
  if (check_command_exists()) {
    const int rc = cli(archive, {"check", src}, output);
    if (rc != 0) {
      fail(fmt::format("== timewarp check {}: exit {}\n{}", escape_bytes(src), rc,
                       first_lines(output, 60, "  ")));
    }
  } else {
    notes_.push_back("timewarp check: not in this build (skipped)");
  }
  const int rc = cli(archive, {"verify"}, output);
  if (rc != 0)
    fail(fmt::format("== timewarp verify: exit {}\n{}", rc, first_lines(output, 40, "  ")));
}

Result Trial::run() {
  const auto t0 = Clock::now();
  TestDatabase db;
  work_ = make_work_dir();
  int operations = 0, faults = 0;
  {
    SystemSettings settings;
    settings.work = work_;
    settings.conninfo = db.conninfo();
    settings.archivers = options_.archivers;
    settings.event_delay = options_.event_delay;
    settings.proxy = options_.faults.retry;
    settings.seed = options_.seed;
    settings.retry_permille = options_.retry_permille;
    RetentionSettings retention = options_.retention;
    if (options_.bucket) {
      bucket_ = objstore::fresh_bucket().config().bucket;
      settings.store_args = store_args();
      // Every pack shipped is given back: the collections read them from the bucket.
      settings.store_args.insert(settings.store_args.end(),
                                 {"--ship-interval=1", "--local-packs-size=1"});
      retention.store_args = store_args();
      retention.store_args.push_back("--cache-dir=" + work_ + "/retention-cache");
    }
    retention.kill = retention.kill || options_.faults.any_process_fault();
    // One folder of the sources, made before the first operation, keeps fewer moments than
    // the rest (its own policy): the generator moves paths in and out of it like any other.
    if (retention.on) retention.folder = work_ + "/src/thin";
    retention_ =
        std::make_unique<Retention>(retention, work_, work_ + "/archive", log_, options_.seed);
    settings.hooked_archiver_args = retention_->archiver_args();
    System system(settings, log_);
    FaultInjector injector(system, options_.seed, log_, options_.faults);
    std::mt19937_64 rng(options_.seed);
    TreeGenerator::Options generator_options;
    generator_options.large_files = options_.large_files;
    generator_options.only = options_.operations;
    TreeGenerator generator(system.src(), rng, log_, generator_options);
    if (retention_->on()) std::filesystem::create_directories(retention_->folder());
    log_.add("system", fmt::format("seed {}, faults: {}, work directory {}", options_.seed,
                                   options_.faults.describe(), work_));
    try {
      for (int i = 0; i < options_.initial_operations; ++i) generator.step();
      system.start_monitor();
      // The first operations wait for the first catch-up: a start racing with changes is
      // the kill-monitor fault's business.
      const bool started =
          wait_until([&] { return system.queue_state().catchup_done; }, options_.drain_timeout);
      if (!started) fail("== the monitor's first catch-up did not finish\n");
      for (int m = 1; started && m <= options_.moments; ++m) {
        operate(injector, generator, rng);
        auto moment = quiet(system, injector, m);
        if (!moment) break;
        moments_.push_back(std::move(*moment));
      }
      if (std::string why; !moments_.empty() && !retention_->finish(why)) {
        fail(fmt::format("== retention: {}\n", why));
      }
      const auto state = system.queue_state();
      if (state.failed > 0) {
        fail(fmt::format("== {} items ended FAILED\n{}", state.failed, system.describe_queue()));
      }
    } catch (const std::exception& e) {
      fail(fmt::format("== the trial stopped: {}\n", e.what()));
    }
    operations = generator.operations();
    faults = injector.fired();
    const int status = system.stop();
    if (status != 0) notes_.push_back(fmt::format("monitor exit status {} at the end", status));
  }
  const std::string src = work_ + "/src";
  try {
    const std::vector<std::string> archive = archive_to_check();
    for (const auto& m : moments_) check_moment(archive, src, m);
    if (!moments_.empty()) check_current(archive, src);
  } catch (const std::exception& e) {
    fail(fmt::format("== the checks stopped: {}\n", e.what()));
  }
  log_.merge_file(work_ + "/proxy.log");

  Result result;
  result.log = log_.render();
  result.passed = failures_.empty();
  result.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (retention_->on()) {
    notes_.push_back(
        fmt::format("retention: {}; {} of {} moments thinned, {} more restored without "
                    "the folder its own policy thinned",
                    retention_->summary(), thinned_, moments_.size(), folder_thinned_));
  }
  result.summary = fmt::format(
      "seed {}: {} ({} quiet moments, {} operations, {} faults dealt, faults: {}; {:.1f} s){}{}",
      options_.seed, result.passed ? "passed" : "FAILED", moments_.size(), operations, faults,
      options_.faults.describe(), result.seconds, notes_.empty() ? "" : "; ",
      fmt::join(notes_, "; "));
  if (!result.passed) {
    result.report = fmt::format("convergence trial {}\n", result.summary);
    for (const auto& f : failures_) result.report += f;
    result.report += "== monitor, scheduler and archiver warnings and errors\n" +
                     log_problems(work_ + "/monitor.log", 40);
    if (std::filesystem::exists(work_ + "/second-scheduler.log")) {
      result.report += "== second scheduler warnings and errors\n" +
                       log_problems(work_ + "/second-scheduler.log", 20);
    }
    result.report += fmt::format("== the run (seed {}), {} lines\n", options_.seed, log_.size());
    result.report += result.log;
  }
  std::error_code ec;
  if (!result.passed && !options_.keep_dir.empty()) {
    std::filesystem::create_directories(options_.keep_dir, ec);
    const auto kept =
        std::filesystem::path(options_.keep_dir) / fmt::format("seed-{}", options_.seed);
    std::filesystem::remove_all(kept, ec);
    std::filesystem::rename(work_, kept, ec);
    const std::string where = ec ? work_ : kept.string();
    std::ofstream(where + "/report.txt") << result.report;
    result.report += fmt::format("== kept: {}\n", where);
  } else {
    std::filesystem::remove_all(work_, ec);
  }
  return result;
}

}  // namespace

std::vector<std::string> Trial::store_args() const {
  if (bucket_.empty()) return {};
  const objstore::BucketConfig store = objstore::gateway(bucket_);
  return {"--store-endpoint=" + store.endpoint,
          "--store-bucket=" + store.bucket,
          "--store-prefix=convergence",
          "--store-region=" + store.region,
          "--store-access-key=" + store.access_key,
          "--store-secret-key=" + store.secret_key};
}

std::vector<std::string> Trial::archive_to_check() {
  if (bucket_.empty()) return {"--backup-root=" + work_ + "/archive"};
  std::filesystem::rename(work_ + "/archive", work_ + "/archive-set-aside");
  log_.add("system", "backup root set aside: the checks read the bucket alone");
  auto args = store_args();
  args.insert(args.begin(), "--from-store");
  args.push_back("--cache-dir=" + work_ + "/cache");
  args.push_back("--cache-size=67108864");
  return args;
}

Result run_trial(const Options& options) { return Trial(options).run(); }

}  // namespace tw::test::convergence
