// bench/churn: whether an archive levels off under the default retention policy
// (archive/retention.hpp; FORMAT.md, "Retention" and "Collection"). The archive library
// alone, in this process, with a simulated clock that starts on Monday 2026-01-05 00:00 UTC
// and moves one step (--hours-per-step, default 1 h) at a time for --days (default 60):
//
//   - a "database" file (--db-mib, default 64 MiB, random bytes): 10 random 4 KiB pages
//     rewritten in place every step;
//   - a log: ~64 KiB of text-like lines appended every step, emptied every 7 days;
//   - 200 small text files of 1-20 KiB: every step 5 are edited, 1 deleted, 1 created;
//   - a build folder made again every day at 03:00: the 50 files of the day before deleted,
//     50 of 10-200 KiB written, about half with the same content as the day before;
//   - every day at 04:00, with the archiving Store closed (a pack a writer has open is left
//     alone by collection): forget with the default policy, then a collection.
//
// Printed: the archive's size (every byte under the backup root) at the end of each day,
// with days 1, 7, 30, 60 and the last marked; what forget removed and collection gave back;
// the collections' rate (bytes reclaimed, packs and catalog, per second of wall time).
// Then, on the final archive, archiving throughput beside a collection against alone: a
// fresh set of files (--fresh-mib in 64 files) archived alone; that set deleted and a
// forget far enough ahead that every version but each path's latest goes; another fresh set
// of the same size archived while a collection runs on another thread with its own Store.
//
// Prints figures; asserts nothing. Usage:
//   timewarp-bench-churn [--seed N] [--days N] [--db-mib N] [--hours-per-step N]
//                        [--fresh-mib N] [--work-dir DIR] [--keep]
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "archive/store.hpp"
#include "bench/common/content.hpp"

namespace {

namespace fs = std::filesystem;
using tw::archive::ArchiveResult;
using tw::archive::CollectOptions;
using tw::archive::CollectReport;
using tw::archive::ForgetOptions;
using tw::archive::RetentionPolicy;
using tw::archive::Store;
using tw::bench::Content;
using tw::bench::write_file;
using Clock = std::chrono::steady_clock;

constexpr std::int64_t kHour = 3600LL * 1'000'000'000;
constexpr std::int64_t kDay = 24 * kHour;
constexpr std::uint64_t kKiB = 1024;
constexpr std::uint64_t kMiB = 1024 * kKiB;
constexpr int kFreshFiles = 64;

[[noreturn]] void die(const std::string& message) {
  std::cerr << "bench/churn: " << message << "\n";
  std::exit(1);
}

double mib(std::uint64_t bytes) { return static_cast<double>(bytes) / kMiB; }

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct Options {
  std::uint64_t seed = 1;
  int days = 60;
  std::uint64_t db_mib = 64;
  int hours_per_step = 1;
  std::uint64_t fresh_mib = 128;
  std::string work_dir;
  bool keep = false;
};

// The archive times of every Store here. Each read moves it on by a microsecond, so no two
// versions share an instant (as with a real clock), and set() never moves it back.
class SimClock {
 public:
  std::int64_t now() { return ns_.fetch_add(1000); }
  void set(std::int64_t ns) {
    std::int64_t seen = ns_.load();
    while (seen < ns && !ns_.compare_exchange_weak(seen, ns)) {
    }
  }

 private:
  std::atomic<std::int64_t> ns_{0};
};

Store open_store(const fs::path& root, SimClock& clock) {
  tw::archive::StoreHooks hooks;
  hooks.now = [&clock] { return clock.now(); };
  auto store = Store::open(root.string(), Store::Mode::ReadWrite, std::move(hooks));
  if (!store) die(store.error());
  return std::move(*store);
}

void must_complete(const ArchiveResult& result, const std::string& path) {
  if (result.outcome != tw::Outcome::Complete) die(path + ": " + result.message);
}

// Every byte of every file under `dir`.
std::uint64_t tree_bytes(const fs::path& dir) {
  std::uint64_t total = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    std::error_code ec;
    if (entry.is_regular_file(ec)) total += entry.file_size(ec);
  }
  return total;
}

// Writes `bytes` over the file at `offset`, leaving the rest as it is.
void overwrite(const std::string& path, std::uint64_t offset, const std::string& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) die("cannot open " + path);
  const auto written = ::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset));
  ::close(fd);
  if (written != static_cast<ssize_t>(bytes.size())) die("cannot write " + path);
}

// The source tree and its churn. Every change is archived through the Store it is given.
class Workload {
 public:
  Workload(const fs::path& src, const Options& options)
      : src_(src),
        db_(src / "db.bin"),
        log_(src / "app.log"),
        db_bytes_(options.db_mib * kMiB),
        random_(options.seed) {
    fs::create_directories(src / "docs");
    fs::create_directories(src / "build");
  }

  // The first state: the database, an empty log and the small files.
  void create(Store& store) {
    write_file(db_.string(), db_bytes_, random_, Content::Random);
    archive(store, db_.string());
    write_file(log_.string(), 0, random_);
    archive(store, log_.string());
    for (int i = 0; i < 200; ++i) add_small(store);
  }

  // One step's changes, the log emptied first when `truncate_log`.
  void step(Store& store, bool truncate_log) {
    std::string page(4 * kKiB, '\0');
    for (int i = 0; i < 10; ++i) {
      tw::bench::fill_random(page, random_);
      overwrite(db_.string(), random_() % (db_bytes_ / page.size()) * page.size(), page);
    }
    archive(store, db_.string());
    if (truncate_log) fs::resize_file(log_, 0);
    write_file(log_.string(), (48 + random_() % 33) * kKiB, random_, Content::Text, true);
    archive(store, log_.string());
    for (int i = 0; i < 5; ++i) edit_small(store);
    const std::size_t gone = random_() % small_.size();
    fs::remove(small_[gone]);
    removed(store, small_[gone]);
    small_[gone] = small_.back();
    small_.pop_back();
    add_small(store);
  }

  // The day's build: the previous one deleted, 50 files written, about half as before.
  void rebuild(Store& store) {
    for (const std::string& path : build_) {
      fs::remove(path);
      removed(store, path);
    }
    const bool first = build_.empty();
    build_.clear();
    build_seeds_.resize(50);
    for (std::size_t i = 0; i < build_seeds_.size(); ++i) {
      if (first || random_() % 2 == 0) build_seeds_[i] = random_();
      std::mt19937_64 content(build_seeds_[i]);
      const std::uint64_t size = (10 + content() % 191) * kKiB;
      build_.push_back((src_ / "build" / fmt::format("obj-{:02}.o", i)).string());
      write_file(build_.back(), size, content);
      archive(store, build_.back());
    }
  }

  std::uint64_t versions() const { return versions_; }
  std::uint64_t bytes_added() const { return bytes_added_; }

 private:
  void archive(Store& store, const std::string& path) {
    const ArchiveResult result = store.update(path);
    must_complete(result, path);
    bytes_added_ += result.bytes_added;
    ++versions_;
  }

  void removed(Store& store, const std::string& path) {
    must_complete(store.remove(path), path);
    ++versions_;
  }

  void add_small(Store& store) {
    small_.push_back((src_ / "docs" / fmt::format("note-{:06}.txt", next_small_++)).string());
    write_file(small_.back(), (1 + random_() % 20) * kKiB, random_);
    archive(store, small_.back());
  }

  // Rewrites a span of 256 B to 2 KiB somewhere in one small file.
  void edit_small(Store& store) {
    const std::string& path = small_[random_() % small_.size()];
    const std::uint64_t size = fs::file_size(path);
    std::string text(std::min<std::uint64_t>(size, 256 + random_() % 1793), '\0');
    tw::bench::fill_text(text, random_);
    overwrite(path, random_() % (size - text.size() + 1), text);
    archive(store, path);
  }

  fs::path src_, db_, log_;
  std::uint64_t db_bytes_;
  std::mt19937_64 random_;
  std::vector<std::string> small_;
  std::uint64_t next_small_ = 0;
  std::vector<std::string> build_;
  std::vector<std::uint64_t> build_seeds_;
  std::uint64_t versions_ = 0;
  std::uint64_t bytes_added_ = 0;
};

struct Collections {
  int runs = 0;
  std::uint64_t forgotten = 0;  // versions forget removed
  std::uint64_t reclaimed = 0;  // pack and catalog bytes given back
  std::uint64_t copied = 0;     // live bytes the pack rewrites copied
  double seconds = 0;           // wall time of the collections alone
};

// Forget at `now_ns` with the default policy, then a collection, with a Store of their own.
// Returns what this day's run removed, reclaimed and took, added to `total` as well.
Collections forget_and_collect(const fs::path& root, SimClock& clock, std::int64_t now_ns,
                               Collections& total) {
  Store store = open_store(root, clock);
  auto forgot = store.forget(RetentionPolicy{}, now_ns, ForgetOptions{});
  if (!forgot) die("forget: " + forgot.error());
  const auto start = Clock::now();
  auto report = store.collect(CollectOptions{});
  if (!report) die("collect: " + report.error());
  Collections day{1, forgot->removed, report->bytes_reclaimed + report->catalog_bytes_reclaimed,
                  report->bytes_copied, seconds_since(start)};
  total.runs += 1;
  total.forgotten += day.forgotten;
  total.reclaimed += day.reclaimed;
  total.copied += day.copied;
  total.seconds += day.seconds;
  return day;
}

struct Month {
  std::vector<std::pair<int, std::uint64_t>> sizes;  // (day, archive bytes) of marked days
  Collections gc;
  double seconds = 0;
};

// Monday 2026-01-05 00:00 UTC, where the simulated clock starts.
std::int64_t first_midnight() {
  std::tm start{};
  start.tm_year = 2026 - 1900;
  start.tm_mday = 5;
  return static_cast<std::int64_t>(::timegm(&start)) * 1'000'000'000;
}

bool marked_day(int day, int days) {
  return day == 1 || day == 7 || day == 30 || day == 60 || day == days;
}

// One simulated day: its steps, the build at 03:00 and forget and collection at 04:00, each
// at the first step that reaches its hour.
void run_day(int day, const Options& options, const fs::path& root, Workload& work, SimClock& clock,
             std::optional<Store>& writer, Month& month) {
  const std::int64_t midnight = first_midnight() + (day - 1) * kDay;
  Collections today;
  for (int hour = 0; hour < 24; hour += options.hours_per_step) {
    clock.set(midnight + hour * kHour);
    if (day == 1 && hour == 0) work.create(*writer);
    work.step(*writer, hour == 0 && day > 1 && (day - 1) % 7 == 0);
    const auto reaches = [&](int at) { return hour <= at && at < hour + options.hours_per_step; };
    if (reaches(3)) {
      clock.set(midnight + 3 * kHour);
      work.rebuild(*writer);
    }
    if (reaches(4)) {
      writer.reset();
      clock.set(midnight + 4 * kHour);
      today = forget_and_collect(root, clock, clock.now(), month.gc);
      writer.emplace(open_store(root, clock));
    }
  }
  const std::uint64_t size = tree_bytes(root);
  if (marked_day(day, options.days)) month.sizes.emplace_back(day, size);
  fmt::print(
      "day {:>3}{} archive {:>8.1f} MiB; forget removed {:>6} versions, gc reclaimed "
      "{:>7.1f} MiB (copied {:.1f}) in {:.2f} s\n",
      day, marked_day(day, options.days) ? "*" : " ", mib(size), today.forgotten,
      mib(today.reclaimed), mib(today.copied), today.seconds);
  std::fflush(stdout);
}

Month run_month(const Options& options, const fs::path& work_dir, SimClock& clock) {
  const fs::path root = work_dir / "archive";
  Workload work(work_dir / "src", options);
  Month month;
  const auto start = Clock::now();
  std::optional<Store> writer(open_store(root, clock));
  for (int day = 1; day <= options.days; ++day) {
    run_day(day, options, root, work, clock, writer, month);
  }
  month.seconds = seconds_since(start);
  fmt::print(
      "{} days in {:.0f} s: {} versions archived ({:.1f} MiB added), {} forgotten; "
      "{} collections reclaimed {:.1f} MiB (copied {:.1f} MiB) in {:.2f} s\n",
      options.days, month.seconds, work.versions(), mib(work.bytes_added()), month.gc.forgotten,
      month.gc.runs, mib(month.gc.reclaimed), mib(month.gc.copied), month.gc.seconds);
  return month;
}

std::vector<std::string> write_fresh_set(const fs::path& dir, std::uint64_t bytes,
                                         std::mt19937_64& random) {
  fs::create_directories(dir);
  std::vector<std::string> files;
  for (int i = 0; i < kFreshFiles; ++i) {
    files.push_back((dir / fmt::format("fresh-{:02}.dat", i)).string());
    write_file(files.back(), bytes / kFreshFiles, random);
  }
  return files;
}

// Archives `files` in turn; returns when each was done.
std::vector<Clock::time_point> archive_files(Store& store, const std::vector<std::string>& files) {
  std::vector<Clock::time_point> done;
  for (const std::string& path : files) {
    must_complete(store.update(path), path);
    done.push_back(Clock::now());
  }
  return done;
}

struct Beside {
  std::uint64_t set_mib = 0;
  double alone = 0;   // MiB/s
  double beside = 0;  // MiB/s while the collection ran
  double gc_seconds = 0;
  std::uint64_t gc_reclaimed = 0;
  int files_beside = 0;  // files archived while it ran
};

// The rate of the files done while the collection ran (all of them when it outlasted them;
// the first alone when it ended before that one was done).
void rate_beside(Beside& out, Clock::time_point start, const std::vector<Clock::time_point>& done,
                 Clock::time_point gc_end, std::uint64_t file_bytes) {
  int n = 0;
  while (n < static_cast<int>(done.size()) && done[n] <= gc_end) ++n;
  out.files_beside = n;
  const int counted = std::max(n, 1);
  const double seconds = std::chrono::duration<double>(done[counted - 1] - start).count();
  out.beside = mib(file_bytes * counted) / seconds;
}

// Archiving alone, then beside a collection of much garbage (see the top of the file).
Beside archive_beside_gc(const Options& options, const fs::path& work_dir, SimClock& clock) {
  const fs::path root = work_dir / "archive";
  const std::uint64_t bytes = options.fresh_mib * kMiB;
  std::mt19937_64 random(options.seed ^ 0x5eed);
  Beside out;
  out.set_mib = options.fresh_mib;
  std::optional<Store> writer(open_store(root, clock));
  const auto set_a = write_fresh_set(work_dir / "src" / "fresh-a", bytes, random);
  auto start = Clock::now();
  archive_files(*writer, set_a);
  out.alone = mib(bytes) / seconds_since(start);
  for (const std::string& path : set_a) {
    fs::remove(path);
    must_complete(writer->remove(path), path);
  }
  writer.reset();
  // Two years on, no kept moment of the policy (52 Mondays at most) reaches back to the run.
  clock.set(clock.now() + 2 * 366 * kDay);
  Store gc = open_store(root, clock);
  if (auto forgot = gc.forget(RetentionPolicy{}, clock.now(), ForgetOptions{}); !forgot) {
    die("forget: " + forgot.error());
  }
  const auto set_b = write_fresh_set(work_dir / "src" / "fresh-b", bytes, random);
  writer.emplace(open_store(root, clock));
  std::optional<tw::archive::Expected<CollectReport>> report;
  Clock::time_point gc_end;
  start = Clock::now();
  std::thread collector([&] {
    report.emplace(gc.collect(CollectOptions{}));
    gc_end = Clock::now();
  });
  const auto done = archive_files(*writer, set_b);
  collector.join();
  if (!*report) die("collect: " + report->error());
  out.gc_seconds = std::chrono::duration<double>(gc_end - start).count();
  out.gc_reclaimed = (*report)->bytes_reclaimed + (*report)->catalog_bytes_reclaimed;
  rate_beside(out, start, done, gc_end, bytes / kFreshFiles);
  return out;
}

fs::path make_work_dir(const Options& options) {
  if (!options.work_dir.empty()) {
    fs::create_directories(options.work_dir);
    return options.work_dir;
  }
  std::string pattern = (fs::temp_directory_path() / "timewarp-bench-churn.XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) die("mkdtemp failed");
  return pattern;
}

void print_summary(const Month& month, const Beside& beside, double archive_mib) {
  fmt::print(
      "final archive {:.1f} MiB; {} MiB archived alone at {:.1f} MiB/s, beside a "
      "collection at {:.1f} MiB/s ({} files while it ran); that collection took {:.2f} s "
      "and reclaimed {:.1f} MiB\n",
      archive_mib, beside.set_mib, beside.alone, beside.beside, beside.files_beside,
      beside.gc_seconds, mib(beside.gc_reclaimed));
  const double gc_rate =
      month.gc.seconds > 0 ? static_cast<double>(month.gc.reclaimed) / (1 << 30) / month.gc.seconds
                           : 0;
  std::string days;
  for (const auto& [day, size] : month.sizes) {
    days += fmt::format("{}day {} {:.1f} MiB", days.empty() ? "" : ", ", day, mib(size));
  }
  if (month.sizes.size() >= 2) {
    const auto& last = month.sizes.back();
    const auto& before = month.sizes[month.sizes.size() - 2];
    fmt::print("day {} / day {} = {:.2f}\n", last.first, before.first,
               static_cast<double>(last.second) / static_cast<double>(before.second));
  }
  fmt::print("churn: {}; gc {:.2f} GiB/s; archiving beside gc {:.2f}x\n", days, gc_rate,
             beside.beside / beside.alone);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "timewarp-bench-churn: an archive under the default retention policy, day after "
      "day of simulated churn"};
  Options options;
  app.add_option("--seed", options.seed, "seed of the workload and its content");
  app.add_option("--days", options.days, "simulated days")->check(CLI::Range(1, 3650));
  app.add_option("--db-mib", options.db_mib, "size of the database file")
      ->check(CLI::Range(1, 65536));
  app.add_option("--hours-per-step", options.hours_per_step, "simulated hours per step")
      ->check(CLI::IsMember(std::set<int>{1, 2, 3, 4, 6, 8, 12, 24}));
  app.add_option("--fresh-mib", options.fresh_mib, "MiB in each fresh set archived at the end")
      ->check(CLI::Range(1, 65536));
  app.add_option("--work-dir", options.work_dir, "where to work (default: a fresh temp dir)");
  app.add_flag("--keep", options.keep, "keep the work directory");
  CLI11_PARSE(app, argc, argv);
  // The retention calendar (midnights, Mondays) is the local zone's: make it UTC.
  ::setenv("TZ", "UTC", 1);
  ::tzset();
  const fs::path work_dir = make_work_dir(options);
  fmt::print("bench/churn in {}: seed {}, {} days, {} MiB database, {} h per step\n",
             work_dir.string(), options.seed, options.days, options.db_mib, options.hours_per_step);
  SimClock clock;
  const auto start = Clock::now();
  const Month month = run_month(options, work_dir, clock);
  const Beside beside = archive_beside_gc(options, work_dir, clock);
  fmt::print("wall time {:.0f} s\n", seconds_since(start));
  print_summary(month, beside, mib(tree_bytes(work_dir / "archive")));
  if (!options.keep) fs::remove_all(work_dir);
  return 0;
}
