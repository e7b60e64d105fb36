// Retention and collection on a real archive (FORMAT.md, "Retention" and "Collection"): a
// clock injected into the store moves over days; forget keeps every kept moment exact and
// says which moments it thinned; pins stay; a deleted path's history goes whole; a
// collection frees what no version names, and the race between a collection and a writer
// that deduplicates against a blob it is removing ends in a retried commit, never a version
// that names a missing blob.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "archive/retention.hpp"
#include "archive/store.hpp"
#include "archive/timefmt.hpp"
#include "archive_test_util.hpp"
#include "common/escape.hpp"
#include "common/time.hpp"

namespace tw::archive {
namespace {

using test::ArchiverProcess;
using test::fields;
using test::read_file;
using test::TempDir;
using test::write_file;

constexpr std::int64_t kSec = 1'000'000'000;
constexpr std::int64_t kHour = 3600 * kSec;
constexpr std::int64_t kDay = 24 * kHour;

std::int64_t at(const char* text) {
  auto parsed = parse_time_ns(text);
  EXPECT_TRUE(parsed) << text;
  return parsed ? *parsed : 0;
}

// Content that does not compress, so pack sizes follow what is stored.
std::string noise(std::size_t size, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string out(size, '\0');
  for (auto& c : out) c = static_cast<char>(rng());
  return out;
}

std::uint64_t packs_bytes(const std::string& archive) {
  std::uint64_t total = 0;
  const std::filesystem::path packs = archive + "/packs";
  if (!std::filesystem::exists(packs)) return 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(packs)) {
    if (entry.is_regular_file()) total += entry.file_size();
  }
  return total;
}

class CollectTest : public ::testing::Test {
 protected:
  void SetUp() override { std::filesystem::create_directories(src_); }

  // A store whose archive times are clock_.
  Store open(StoreHooks hooks = {}) {
    hooks.now = [this] { return clock_; };
    auto store = Store::open(archive_, Store::Mode::ReadWrite, std::move(hooks));
    if (!store) throw std::runtime_error(store.error());
    return std::move(store.value());
  }

  void update(Store& store, const std::string& path) {
    const auto result = store.update(path);
    ASSERT_EQ(result.outcome, Outcome::Complete) << result.message;
  }

  // Restores `path` as it was at `at_ns` into a fresh folder; its content ("" when absent).
  std::optional<std::string> restored_at(const Store& store, const std::string& path,
                                         std::int64_t at_ns) {
    RestoreOptions options;
    options.which.at_ns = at_ns;
    options.destination = dir_ / fmt::format("restored-{}", ++restores_);
    auto report = store.restore(path, options);
    if (!report) return std::nullopt;
    return read_file(report->destination);
  }

  void expect_verified(const Store& store) {
    const VerifyReport report = store.verify();
    std::string problems;
    for (const auto& p : report.problems) problems += p + "\n";
    EXPECT_TRUE(report.ok()) << problems;
  }

  // `path` archived holding `content`, then deleted, and its history forgotten days later:
  // its blob is named by no version.
  void archive_and_forget(Store& store, const std::string& path, const std::string& content) {
    write_file(path, content);
    update(store, path);
    ASSERT_EQ(::unlink(path.c_str()), 0);
    update(store, path);
    clock_ += 5 * kDay;
    ASSERT_TRUE(store.forget(daily(1), clock_, {}));
  }

  static RetentionPolicy daily(int days) {
    RetentionPolicy policy;
    policy.keep_within_ns = 0;
    policy.keep_hourly = 0;
    policy.keep_daily = days;
    policy.keep_weekly = 0;
    return policy;
  }

  test::ScopedTimeZone utc_{"UTC"};
  TempDir dir_;
  std::string archive_ = dir_ / "archive";
  std::string src_ = dir_ / "src";
  std::int64_t clock_ = at("2026-03-02T00:00:00Z");
  int restores_ = 0;
};

TEST_F(CollectTest, ForgetKeepsEveryKeptMomentExactAndNamesThinnedOnes) {
  Store store = open();
  const std::string file = src_ + "/a";
  const std::int64_t day0 = clock_;
  // Two versions a day for six days; the state at each midnight is the evening's version
  // of the day before.
  std::map<int, std::string> at_midnight;
  for (int day = 0; day < 6; ++day) {
    for (const int hour : {1, 13}) {
      clock_ = day0 + day * kDay + hour * kHour;
      const std::string content = fmt::format("day {} hour {}", day, hour);
      write_file(file, content);
      update(store, file);
      at_midnight[day + 1] = content;
    }
  }
  clock_ = day0 + 6 * kDay + kHour / 2;
  auto report = store.forget(daily(3), clock_, {});
  ASSERT_TRUE(report) << report.error();
  // Kept: the midnights of days 4, 5 and 6, and the latest version.
  auto history = store.versions(file);
  ASSERT_TRUE(history) << history.error();
  std::vector<std::uint64_t> numbers;
  for (const auto& v : *history) numbers.push_back(v.number);
  EXPECT_EQ(numbers, (std::vector<std::uint64_t>{8, 10, 12})) << "versions at midnights 4, 5, 6";
  EXPECT_EQ(report->removed, 9u);
  for (const int day : {4, 5, 6}) {
    EXPECT_EQ(restored_at(store, file, day0 + day * kDay), at_midnight[day]) << "midnight " << day;
  }
  // A thinned moment is refused, naming the nearest kept ones.
  RestoreOptions options;
  options.which.at_ns = day0 + 2 * kDay;
  options.destination = dir_ / "thinned";
  auto thinned = store.restore(file, options);
  ASSERT_FALSE(thinned);
  EXPECT_NE(thinned.error().find("thinned"), std::string::npos) << thinned.error();
  EXPECT_NE(thinned.error().find(format_time_ns(day0 + 4 * kDay)), std::string::npos)
      << thinned.error();
  // Verify tells the gap retention left from damage.
  const VerifyReport verified = store.verify();
  EXPECT_TRUE(verified.ok());
  EXPECT_EQ(verified.forgotten, 9u);
  // A later run with a longer policy brings nothing back: it keeps what both keep.
  auto again = store.forget(daily(30), clock_, {});
  ASSERT_TRUE(again) << again.error();
  EXPECT_EQ(again->removed, 0u);
  EXPECT_FALSE(again->kept.archive.contains(day0 + 2 * kDay));
  // New versions go on from the last number.
  clock_ += kHour;
  write_file(file, "after");
  update(store, file);
  EXPECT_EQ(store.versions(file)->back().number, 13u);
  expect_verified(store);
}

TEST_F(CollectTest, APinnedVersionOutlivesThePolicy) {
  Store store = open();
  const std::string file = src_ + "/p";
  for (int i = 0; i < 4; ++i) {
    clock_ += kHour;
    write_file(file, fmt::format("version {}", i));
    update(store, file);
  }
  ASSERT_TRUE(store.pin(file, 2, true));
  EXPECT_FALSE(store.pin(file, 9, true)) << "no version 9";
  clock_ += 10 * kDay;
  auto report = store.forget(daily(1), clock_, {});
  ASSERT_TRUE(report) << report.error();
  const auto pinned_history = store.versions(file);
  ASSERT_TRUE(pinned_history) << pinned_history.error();
  std::vector<std::uint64_t> numbers;
  for (const auto& v : *pinned_history) numbers.push_back(v.number);
  EXPECT_EQ(numbers, (std::vector<std::uint64_t>{2, 4}));
  RestoreOptions options;
  options.which.number = 2;
  options.destination = dir_ / "pinned";
  ASSERT_TRUE(store.restore(file, options));
  EXPECT_EQ(read_file(dir_ / "pinned"), "version 1");
  expect_verified(store);
}

TEST_F(CollectTest, ADeletedPathsHistoryGoesWholeAndStartsAgain) {
  Store store = open();
  const std::string file = src_ + "/gone";
  write_file(file, "brief");
  update(store, file);
  clock_ += kHour;
  ASSERT_EQ(::unlink(file.c_str()), 0);
  update(store, file);
  clock_ += 5 * kDay;
  auto report = store.forget(daily(1), clock_, {});
  ASSERT_TRUE(report) << report.error();
  EXPECT_EQ(report->whole_paths, 1u);
  EXPECT_TRUE(store.versions(file)->empty());
  write_file(file, "back");
  update(store, file);
  ASSERT_EQ(store.versions(file)->size(), 1u);
  EXPECT_EQ(store.versions(file)->front().number, 1u);
  expect_verified(store);
}

TEST_F(CollectTest, ACollectionFreesWhatForgetReleased) {
  const std::string file = src_ + "/big";
  {
    // The writer lets go of its pack when it closes: a collection leaves alone a pack that
    // a writer has open.
    Store writer = open();
    for (int i = 0; i < 12; ++i) {
      clock_ += kHour;
      write_file(file, noise(300'000, i));
      update(writer, file);
    }
  }
  Store store = open();
  const std::uint64_t before = packs_bytes(archive_);
  clock_ += 3 * kDay;
  ASSERT_TRUE(store.forget(daily(1), clock_, {}));
  auto collected = store.collect({});
  ASSERT_TRUE(collected) << collected.error();
  EXPECT_EQ(collected->blobs_swept, 11u);
  const std::uint64_t after = packs_bytes(archive_);
  EXPECT_LT(after, before / 5) << "before " << before << ", after " << after;
  EXPECT_EQ(read_file(file), noise(300'000, 11));
  EXPECT_EQ(restored_at(store, file, clock_), noise(300'000, 11));
  const VerifyReport verified = store.verify();
  EXPECT_TRUE(verified.ok());
  EXPECT_EQ(verified.unreferenced_objects, 0u);
  auto last = store.last_collection();
  ASSERT_TRUE(last && *last);
  EXPECT_EQ((*last)->collection, collected->collection);
}

TEST_F(CollectTest, ABlobNamedAgainAfterItWasCondemnedIsTakenBack) {
  Store store = open();
  const std::string first = src_ + "/first";
  const std::string second = src_ + "/second";
  archive_and_forget(store, first, noise(50'000, 7));
  CollectOptions one;
  one.rounds = 1;
  auto condemned = store.collect(one);
  ASSERT_TRUE(condemned) << condemned.error();
  EXPECT_EQ(condemned->blobs_condemned, 1u);
  // The same content again: deduplicated against the condemned blob, which the commit
  // takes back; the next collection keeps it.
  write_file(second, noise(50'000, 7));
  update(store, second);
  auto next = store.collect(one);
  ASSERT_TRUE(next) << next.error();
  EXPECT_EQ(next->blobs_swept, 0u);
  EXPECT_EQ(restored_at(store, second, clock_), noise(50'000, 7));
  expect_verified(store);
}

TEST_F(CollectTest, ABlobRemovedBetweenALookupAndTheCommitFailsTheCommit) {
  const std::string first = src_ + "/first";
  const std::string second = src_ + "/second";
  {
    Store store = open();
    archive_and_forget(store, first, noise(50'000, 9));
    CollectOptions one;
    one.rounds = 1;
    ASSERT_TRUE(store.collect(one));  // condemned
  }
  // A writer finds the blob in the catalog, and before it commits a collection removes it.
  StoreHooks hooks;
  bool collected = false;
  hooks.after_content_read = [&] {
    if (collected) return;
    collected = true;
    Store collector = open();
    CollectOptions one;
    one.rounds = 1;
    auto swept = collector.collect(one);
    ASSERT_TRUE(swept) << swept.error();
    EXPECT_EQ(swept->blobs_swept, 1u);
  };
  Store writer = open(hooks);
  write_file(second, noise(50'000, 9));
  const auto result = writer.update(second);
  EXPECT_EQ(result.outcome, Outcome::FailedRetry) << "committed a version naming a removed blob";
  EXPECT_TRUE(collected);
  // Run again, it stores the content anew.
  update(writer, second);
  EXPECT_EQ(restored_at(writer, second, clock_), noise(50'000, 9));
  expect_verified(writer);
}

TEST_F(CollectTest, TornTailsAndEmptyPacksAreReclaimed) {
  const std::string file = src_ + "/f";
  {
    Store writer = open();
    write_file(file, noise(100'000, 3));
    update(writer, file);
  }
  Store store = open();
  // A pack with a torn record after its last committed one, and an empty pack a full disk
  // left behind.
  std::string pack;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(archive_ + "/packs")) {
    if (entry.is_regular_file()) pack = entry.path();
  }
  ASSERT_FALSE(pack.empty());
  const auto size = std::filesystem::file_size(pack);
  {
    const int fd = ::open(pack.c_str(), O_WRONLY | O_APPEND);
    ASSERT_GE(fd, 0);
    const std::string torn = "TWB3" + noise(4000, 4);
    ASSERT_EQ(::write(fd, torn.data(), torn.size()), static_cast<ssize_t>(torn.size()));
    ::close(fd);
  }
  std::filesystem::create_directories(archive_ + "/packs/00");
  write_file(archive_ + "/packs/00/00000000000000000000000000000000.pack", "");
  // Before the collection, verify counts both as reclaimable, not damage.
  const VerifyReport before = store.verify();
  EXPECT_TRUE(before.ok()) << (before.problems.empty() ? "" : before.problems.front());
  EXPECT_EQ(before.reclaimable_packs, 1u);
  auto collected = store.collect({});
  ASSERT_TRUE(collected) << collected.error();
  EXPECT_EQ(collected->packs_deleted, 1u);
  EXPECT_EQ(collected->packs_truncated, 1u);
  EXPECT_EQ(std::filesystem::file_size(pack), size);
  const VerifyReport verified = store.verify();
  EXPECT_TRUE(verified.ok());
  EXPECT_EQ(verified.unreferenced_objects, 0u);
  EXPECT_EQ(verified.reclaimable_packs, 0u);
  EXPECT_EQ(restored_at(store, file, clock_), noise(100'000, 3));
}

TEST_F(CollectTest, APackAWriterHoldsIsLeftAloneUntilItsBlobsAreCommitted) {
  const std::string first = src_ + "/first";
  const std::string second = src_ + "/second";
  Store writer = open();
  write_file(first, noise(40'000, 11));
  update(writer, first);  // committed: the pack has a row
  // The next version's blob is appended to the same pack and staged in a group, not yet
  // committed: to a collection it looks like a dead tail.
  writer.begin_group();
  write_file(second, noise(40'000, 12));
  update(writer, second);
  {
    Store collector = open();
    auto collected = collector.collect({});
    ASSERT_TRUE(collected) << collected.error();
    EXPECT_EQ(collected->packs_busy, 1u);
    EXPECT_EQ(collected->packs_truncated, 0u);
  }
  ASSERT_TRUE(writer.flush());
  EXPECT_EQ(restored_at(writer, second, clock_), noise(40'000, 12));
  expect_verified(writer);
}

// Two timewarp-archiver processes archive files whose contents come and go from a small
// pool (so new versions deduplicate against blobs a collection is condemning or removing),
// while forget and collections run beside them over and over. Every answer is COMPLETE or
// FAILED RETRY (run again); at the end every file restores as it is on disk and the archive
// verifies.
TEST_F(CollectTest, ArchiversKeepArchivingWhileCollectionsRun) {
  constexpr int kFiles = 12;
  constexpr int kRounds = 60;
  std::vector<std::string> pool;
  for (int i = 0; i < 6; ++i) pool.push_back(noise(20'000 + 1000 * i, 300 + i));
  ArchiverProcess::Options o;
  o.args = {"--backup-root=" + archive_, "--log-level=error"};
  ArchiverProcess first(o);
  ArchiverProcess second(o);
  { Store created = open(); }  // the archive exists before the collector looks at it
  std::atomic<bool> stop{false};
  std::atomic<int> collections{0};
  std::string collector_error;
  std::thread collector([&] {
    auto store = Store::open(archive_, Store::Mode::ReadWrite);
    if (!store) {
      collector_error = store.error();
      return;
    }
    while (!stop.load()) {
      // Ten days on, one midnight kept: every version but each path's latest goes.
      auto forgot = store->forget(daily(1), now_ns() + 10 * kDay, {});
      auto collected = forgot ? store->collect({}) : Expected<CollectReport>(forgot.fault());
      if (!collected) {
        collector_error = collected.error();
        return;
      }
      ++collections;
    }
  });
  std::mt19937 rng(42);
  std::uint64_t id = 0;
  int retried = 0;
  std::map<std::string, std::string> on_disk;
  for (int round = 0; round < kRounds && collector_error.empty(); ++round) {
    for (int k = 0; k < 4; ++k) {
      const std::string path = src_ + fmt::format("/f{}", rng() % kFiles);
      if (rng() % 5 == 0 && on_disk.count(path) > 0) {
        ASSERT_EQ(::unlink(path.c_str()), 0);
        on_disk.erase(path);
      } else {
        on_disk[path] = pool[rng() % pool.size()];
        write_file(path, on_disk[path]);
      }
      ArchiverProcess& archiver = (k % 2 == 0) ? first : second;
      // A commit a collection or a forget overtook answers FAILED RETRY: sent again.
      for (int attempt = 0;; ++attempt) {
        ASSERT_LT(attempt, 20) << path;
        auto answer = archiver.request(fmt::format("{}\tUPDATE\t{}", ++id, escape_bytes(path)));
        ASSERT_TRUE(answer);
        const auto f = fields(*answer);
        if (f[1] == "COMPLETE") break;
        ASSERT_EQ(f[2], "RETRY") << *answer;
        ++retried;
      }
    }
  }
  stop = true;
  collector.join();
  ASSERT_EQ(collector_error, "");
  EXPECT_GT(collections.load(), 0);
  RecordProperty("collections", collections.load());
  RecordProperty("retried", retried);
  std::printf("%d collections beside %llu requests, %d answered FAILED RETRY and sent again\n",
              collections.load(), static_cast<unsigned long long>(id), retried);
  first.close_stdin();
  second.close_stdin();
  EXPECT_EQ(first.wait(), 0);
  EXPECT_EQ(second.wait(), 0);
  Store store = open();
  ASSERT_TRUE(store.collect({}));
  expect_verified(store);
  for (int i = 0; i < kFiles; ++i) {
    const std::string path = src_ + fmt::format("/f{}", i);
    RestoreOptions options;
    options.destination = dir_ / fmt::format("final-{}", i);
    auto restored = store.restore(path, options);
    if (on_disk.count(path) == 0) {
      EXPECT_FALSE(restored) << path << " is deleted on disk";
      continue;
    }
    ASSERT_TRUE(restored) << restored.error();
    EXPECT_EQ(read_file(options.destination), on_disk[path]) << path;
  }
}

// Whether any file under `dir` holds `needle`.
bool any_file_holds(const std::string& dir, const std::string& needle) {
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file() && read_file(entry.path()).find(needle) != std::string::npos) {
      return true;
    }
  }
  return false;
}

TEST_F(CollectTest, APurgedSecretLeavesNoByteInAnyPack) {
  const std::string secret = noise(30'000, 77);  // incompressible: stored as it is
  const std::string keys = src_ + "/keys";
  std::filesystem::create_directories(keys);
  {
    Store writer = open();
    // Most of the pack is other content: the purged blobs alone would not make it worth
    // rewriting (under a fifth of it).
    write_file(src_ + "/before", noise(1'000'000, 78));
    update(writer, src_ + "/before");
    for (int i = 0; i < 3; ++i) {
      clock_ += kHour;
      write_file(keys + "/id", secret + std::to_string(i));
      update(writer, keys + "/id");
    }
    ASSERT_TRUE(writer.pin(keys + "/id", 1, true));
    write_file(src_ + "/after", noise(30'000, 79));
    update(writer, src_ + "/after");
  }
  ASSERT_TRUE(any_file_holds(archive_ + "/packs", secret.substr(1000, 64)));
  Store store = open();
  auto planned = store.purge(keys, true);
  ASSERT_TRUE(planned) << planned.error();
  EXPECT_EQ(planned->versions, 3u);
  EXPECT_EQ(store.versions(keys + "/id")->size(), 3u) << "a dry run removes nothing";
  auto purged = store.purge(keys, false);
  ASSERT_TRUE(purged) << purged.error();
  EXPECT_EQ(purged->versions, 3u);
  EXPECT_EQ(purged->paths, 1u);
  EXPECT_TRUE(store.versions(keys + "/id")->empty());
  CollectOptions one;
  one.rounds = 1;
  auto collected = store.collect(one);
  ASSERT_TRUE(collected) << collected.error();
  EXPECT_EQ(collected->blobs_swept, 3u);
  EXPECT_FALSE(any_file_holds(archive_ + "/packs", secret.substr(1000, 64)));
  EXPECT_EQ(restored_at(store, src_ + "/before", clock_), noise(1'000'000, 78));
  EXPECT_EQ(restored_at(store, src_ + "/after", clock_), noise(30'000, 79));
  expect_verified(store);
}

TEST_F(CollectTest, AKillAtEveryStepOfACollectionLosesNothingKept) {
  const std::string file = src_ + "/k";
  const std::string other = src_ + "/other";
  {
    Store store = open();
    for (int i = 0; i < 6; ++i) {
      clock_ += kHour;
      write_file(file, noise(200'000, 100 + i));
      update(store, file);
      write_file(other, noise(20'000, 200 + i));
      update(store, other);
    }
    clock_ += 3 * kDay;
    ASSERT_TRUE(store.forget(daily(1), clock_, {}));
  }
  // The collection in a child process killed before its Nth step, N = 1, 2, ... until it
  // finishes; after each kill the archive verifies and every kept version restores.
  for (long step = 1; step < 200; ++step) {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      StoreHooks hooks;
      long seen = 0;
      hooks.before_write_step = [&](std::string_view) {
        if (++seen == step) ::kill(::getpid(), SIGKILL);
      };
      auto store = Store::open(archive_, Store::Mode::ReadWrite, hooks);
      if (!store) ::_exit(3);
      CollectOptions options;
      options.rewrite_share = 0.01;
      auto collected = store->collect(options);
      if (!collected) std::fprintf(stderr, "collect failed: %s\n", collected.error().c_str());
      ::_exit(collected ? 0 : 4);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    Store store = open();
    expect_verified(store);
    EXPECT_EQ(restored_at(store, file, clock_), noise(200'000, 105)) << "killed at step " << step;
    EXPECT_EQ(restored_at(store, other, clock_), noise(20'000, 205)) << "killed at step " << step;
    if (WIFEXITED(status)) {
      ASSERT_EQ(WEXITSTATUS(status), 0) << "step " << step;
      EXPECT_GT(step, 3) << "the collection has steps to be killed at";
      break;
    }
    ASSERT_TRUE(WIFSIGNALED(status)) << "step " << step;
  }
  // What the kills left, a last collection frees.
  Store store = open();
  ASSERT_TRUE(store.collect({}));
  const VerifyReport verified = store.verify();
  EXPECT_TRUE(verified.ok());
  EXPECT_EQ(verified.unreferenced_objects, 0u);
}

}  // namespace
}  // namespace tw::archive
