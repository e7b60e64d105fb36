// The watcher on the real inotify, with a wrapper that injects what inotify does rarely: a
// queue overflow (events lost) and a watch that cannot be added.
#include "monitor/watcher.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <mutex>
#include <optional>
#include <set>

#include "archive/store.hpp"
#include "support/test_support.hpp"

namespace tw::monitor {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// Real inotify, plus injected faults.
class FaultySource final : public EventSource {
 public:
  int fd() const override { return real_.fd(); }
  int add_watch(const std::string& path, std::uint32_t mask) override {
    {
      std::lock_guard lock(mutex_);
      for (const auto& [dir, error] : failing_) {
        if (path == dir || path.rfind(dir + "/", 0) == 0) return -error;
      }
    }
    const int wd = real_.add_watch(path, mask);
    std::lock_guard lock(mutex_);
    if (wd < 0 || granted_.count(wd) > 0) return wd;  // a path watched already costs nothing
    if (budget_ && granted_.size() >= *budget_) {
      // As the kernel does at fs.inotify.max_user_watches.
      real_.remove_watch(wd);
      return -ENOSPC;
    }
    granted_.insert(wd);
    return wd;
  }
  void remove_watch(int wd) override {
    {
      std::lock_guard lock(mutex_);
      granted_.erase(wd);
    }
    real_.remove_watch(wd);
  }
  std::vector<RawEvent> read_events() override {
    auto events = real_.read_events();
    if (lose_events_.load() && !events.empty()) {
      // The kernel dropped these and says so.
      lose_events_ = false;
      lost_ += events.size();
      return {RawEvent{-1, IN_Q_OVERFLOW, 0, {}}};
    }
    return events;
  }

  // The next events read are lost, replaced by one IN_Q_OVERFLOW.
  void lose_next_events() { lose_events_ = true; }
  // The events waiting now are lost without a trace (as if a change had slipped through).
  void swallow_waiting_events() { lost_ += real_.read_events().size(); }
  void fail_watches_within(const std::string& dir, int error) {
    std::lock_guard lock(mutex_);
    failing_.emplace_back(dir, error);
  }
  // At most `n` watches at once, as under fs.inotify.max_user_watches.
  void limit_watches(std::size_t n) {
    std::lock_guard lock(mutex_);
    budget_ = n;
  }
  void heal() {
    std::lock_guard lock(mutex_);
    failing_.clear();
    budget_.reset();
  }
  std::size_t lost() const { return lost_; }

 private:
  InotifySource real_;
  std::atomic<bool> lose_events_{false};
  std::size_t lost_ = 0;
  std::mutex mutex_;
  std::vector<std::pair<std::string, int>> failing_;
  std::optional<std::size_t> budget_;
  std::set<int> granted_;
};

class WatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    src_ = (dir_ / "src").string();
    outside_ = (dir_ / "outside").string();
    fs::create_directories(src_);
    fs::create_directories(outside_);
    auto store = archive::Store::open(archive_root(), archive::Store::Mode::ReadWrite);
    ASSERT_TRUE(store) << store.error();
    store_.emplace(std::move(store.value()));
    log_ = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(200);
    previous_logger_ = spdlog::default_logger();
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("test", log_));
  }
  void TearDown() override {
    watcher_.reset();
    spdlog::set_default_logger(previous_logger_);
  }

  std::string archive_root() const { return (dir_ / "archive").string(); }
  std::string path(const std::string& name) const { return src_ + "/" + name; }

  void start(std::vector<std::string> exclude = {}, std::uint64_t max_size = 0,
             PendingLookup pending = {}, Watcher::Options options = fast()) {
    start_with(std::make_unique<Filter>(std::vector<std::string>{src_}, std::move(exclude),
                                        std::vector<std::string>{}, max_size),
               std::move(pending), options);
  }
  void start_with(std::unique_ptr<Filter> filter, PendingLookup pending = {},
                  Watcher::Options options = fast()) {
    filter_ = std::move(filter);
    auto source = std::make_unique<FaultySource>();
    source_ = source.get();
    if (watch_budget_) source_->limit_watches(*watch_budget_);
    view_ = std::make_unique<ArchiveView>(archive_root());
    watcher_ = std::make_unique<Watcher>(options, std::move(source), *filter_, *view_, batcher_,
                                         std::move(pending));
    watcher_->catch_up();
    collect();
  }
  static Watcher::Options fast() {
    Watcher::Options options;
    options.rescan_unwatched = 200ms;
    return options;
  }

  // Archives `names` now (what the archivers would have done).
  void archive(const std::vector<std::string>& names) {
    for (const auto& n : names) {
      const auto r = store_->update(n.empty() ? src_ : path(n));
      ASSERT_EQ(r.outcome, Outcome::Complete) << r.message;
    }
  }

  // Takes what the watcher produced, as "OP path[>dest]" lines relative to the source.
  std::vector<std::string> collect() {
    std::vector<std::string> out;
    for (const auto& c : batcher_.take()) {
      std::string line = std::string(to_string(c.op)) + " " + rel(c.path);
      if (c.op == Op::Move) line += ">" + rel(c.dest);
      out.push_back(line);
    }
    return out;
  }
  std::string rel(const std::string& p) const {
    if (p == src_) return ".";
    if (p.rfind(src_ + "/", 0) == 0) return p.substr(src_.size() + 1);
    return p;
  }

  // Runs the watcher until `done` holds for everything it produced so far (bounded).
  std::vector<std::string> pump_until(
      const std::function<bool(const std::vector<std::string>&)>& done,
      std::chrono::milliseconds timeout = 10s) {
    std::vector<std::string> all;
    test::wait_until(
        [&] {
          watcher_->run_once(20ms);
          for (auto& line : collect()) all.push_back(std::move(line));
          return done(all);
        },
        timeout, 0ms);
    return all;
  }
  // Runs the watcher for a while, so late events would show up.
  std::vector<std::string> pump_for(std::chrono::milliseconds how_long) {
    return pump_until([](const auto&) { return false; }, how_long);
  }
  // Sorted, each line once (a directory touched in two reads of events gets two STATs).
  static std::vector<std::string> sorted(std::vector<std::string> lines) {
    std::sort(lines.begin(), lines.end());
    lines.erase(std::unique(lines.begin(), lines.end()), lines.end());
    return lines;
  }
  // True when `line` is among `lines`, or a SCAN stands for it: a whole source's scan
  // queues a directory where many entries differ as one SCAN, which reconciles the
  // directory and each of its entries (an UPDATE or STAT of either is then covered).
  static bool has(const std::vector<std::string>& lines, const std::string& line) {
    const auto in = [&](const std::string& l) {
      return std::find(lines.begin(), lines.end(), l) != lines.end();
    };
    if (in(line)) return true;
    const auto space = line.find(' ');
    const std::string op = line.substr(0, space);
    if (op != "UPDATE" && op != "STAT") return false;
    const std::string rel = line.substr(space + 1);
    const auto slash = rel.rfind('/');
    const std::string parent = rel == "."                   ? ""
                               : slash == std::string::npos ? "."
                                                            : rel.substr(0, slash);
    return in("SCAN " + rel) || (!parent.empty() && in("SCAN " + parent));
  }
  static auto has_all(std::vector<std::string> wanted) {
    return [wanted](const std::vector<std::string>& lines) {
      return std::all_of(wanted.begin(), wanted.end(),
                         [&](const auto& w) { return has(lines, w); });
    };
  }
  // Lets every watch be added again, and runs the watcher until the rescan of the
  // unwatched directories has watched them all (bounded).
  bool heal_until_all_watched() {
    source_->heal();
    return test::wait_until(
        [&] {
          watcher_->run_once(20ms);
          collect();
          return watcher_->stats().unwatched == 0;
        },
        5s);
  }
  bool logged(const std::string& needle) const {
    for (const auto& line : log_->last_formatted()) {
      if (line.find(needle) != std::string::npos) return true;
    }
    return false;
  }

  test::TempDir dir_;
  std::string src_, outside_;
  std::optional<archive::Store> store_;
  std::unique_ptr<Filter> filter_;
  std::unique_ptr<ArchiveView> view_;
  EventBatcher batcher_{{0ms, 100000}};
  FaultySource* source_ = nullptr;
  std::optional<std::size_t> watch_budget_;  // the source's watches, from the start
  std::unique_ptr<Watcher> watcher_;
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> log_;
  std::shared_ptr<spdlog::logger> previous_logger_;
};

TEST_F(WatcherTest, CreateModifyChmodDelete) {
  start();
  test::write_file(path("f"), "1");  // a new entry: the source directory's mtime changes
  EXPECT_EQ(sorted(pump_until(has_all({"UPDATE f", "STAT ."}))),
            (std::vector<std::string>{"STAT .", "UPDATE f"}));
  test::write_file(path("f"), "22");
  EXPECT_EQ(pump_until(has_all({"UPDATE f"})), std::vector<std::string>{"UPDATE f"});
  ASSERT_EQ(::chmod(path("f").c_str(), 0600), 0);
  EXPECT_EQ(pump_until(has_all({"STAT f"})), std::vector<std::string>{"STAT f"});
  fs::remove(path("f"));
  EXPECT_EQ(sorted(pump_until(has_all({"DELETE f", "STAT ."}))),
            (std::vector<std::string>{"DELETE f", "STAT ."}));
}

TEST_F(WatcherTest, ATruncateOnThePathIsQueuedWhenTheWritesStop) {
  test::write_file(path("f"), "some content");
  archive({"", "f"});
  start();
  ASSERT_EQ(::truncate(path("f").c_str(), 4), 0);  // no open, no close: only a write event
  EXPECT_EQ(pump_until(has_all({"UPDATE f"}), 5s), std::vector<std::string>{"UPDATE f"});
  EXPECT_EQ(pump_for(300ms), std::vector<std::string>{});
}

// A writer that keeps its file open (a log) is queued when it pauses, and less often the
// longer it stays open; its close queues it once more.
TEST_F(WatcherTest, AFileKeptOpenIsQueuedWhenItsWriterPauses) {
  test::write_file(path("log"), "");
  archive({"", "log"});
  start();
  const int fd = ::open(path("log").c_str(), O_WRONLY | O_APPEND);
  ASSERT_GE(fd, 0);
  // Writes 50 ms apart: no pause of 200 ms, so nothing until they stop.
  std::vector<std::string> during;
  for (int i = 0; i < 8; ++i) {
    ASSERT_EQ(::write(fd, "line\n", 5), 5);
    for (auto& line : pump_for(50ms)) during.push_back(line);
  }
  EXPECT_EQ(during, std::vector<std::string>{});
  EXPECT_EQ(pump_until(has_all({"UPDATE log"}), 5s), std::vector<std::string>{"UPDATE log"});
  // Queued once already and still open: now a pause must last 400 ms. Writes 150 ms apart
  // queue nothing until they stop.
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(::write(fd, "line\n", 5), 5);
    for (auto& line : pump_for(150ms)) during.push_back(line);
  }
  EXPECT_EQ(during, std::vector<std::string>{});
  EXPECT_EQ(pump_until(has_all({"UPDATE log"}), 5s), std::vector<std::string>{"UPDATE log"});
  ::close(fd);
  EXPECT_EQ(pump_until(has_all({"UPDATE log"}), 5s), std::vector<std::string>{"UPDATE log"});
  EXPECT_EQ(pump_for(600ms), std::vector<std::string>{}) << "the close ended the waiting";
}

TEST_F(WatcherTest, ReadingFilesQueuesNothing) {
  test::write_file(path("f"), "content");
  start();
  for (int i = 0; i < 10; ++i) EXPECT_EQ(test::read_file(path("f")), "content");
  const int fd = ::open(path("f").c_str(), O_RDONLY | O_NOATIME);
  ASSERT_GE(fd, 0);
  ::close(fd);
  EXPECT_EQ(pump_for(300ms), std::vector<std::string>{});
}

TEST_F(WatcherTest, MkdirPWithImmediateWritesMissesNothing) {
  start();
  std::vector<std::string> wanted;
  for (int i = 0; i < 20; ++i) {
    const std::string d = "a" + std::to_string(i) + "/b/c";
    fs::create_directories(path(d));
    test::write_file(path(d + "/f"), "x");
    for (const auto& p : {"a" + std::to_string(i), "a" + std::to_string(i) + "/b", d, d + "/f"}) {
      wanted.push_back("UPDATE " + p);
    }
  }
  const auto got = pump_until(has_all(wanted));
  for (const auto& w : wanted) EXPECT_TRUE(has(got, w)) << w;
  // Later writes deep inside are seen through the new watches.
  test::write_file(path("a7/b/c/g"), "y");
  EXPECT_TRUE(has(pump_until(has_all({"UPDATE a7/b/c/g"})), "UPDATE a7/b/c/g"));
}

TEST_F(WatcherTest, NewFileIsQueuedWhenClosedHardLinksAndSymlinksAtOnce) {
  start();
  const int fd = ::open(path("slow").c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  std::vector<std::string> during;
  for (int i = 0; i < 6; ++i) {  // still being written (no pause as long as unclosed_quiet)
    ASSERT_EQ(::write(fd, "part", 4), 4);
    for (auto& line : pump_for(50ms)) during.push_back(line);
  }
  EXPECT_EQ(during, std::vector<std::string>{"STAT ."});
  ::close(fd);
  EXPECT_EQ(pump_until(has_all({"UPDATE slow"})), std::vector<std::string>{"UPDATE slow"});
  ASSERT_EQ(::link(path("slow").c_str(), path("hard").c_str()), 0);
  ASSERT_EQ(::symlink("slow", path("soft").c_str()), 0);
  const auto got = pump_until(has_all({"UPDATE hard", "UPDATE soft"}));
  EXPECT_TRUE(has(got, "UPDATE hard"));
  EXPECT_TRUE(has(got, "UPDATE soft"));
}

TEST_F(WatcherTest, RenameOfAnArchivedFileIsOneMove) {
  test::write_file(path("a"), "1");
  archive({"", "a"});
  start();
  EXPECT_EQ(collect(), std::vector<std::string>{});
  fs::rename(path("a"), path("b"));
  EXPECT_EQ(sorted(pump_until(has_all({"MOVE a>b", "STAT ."}))),
            (std::vector<std::string>{"MOVE a>b", "STAT ."}));
  EXPECT_EQ(pump_for(100ms), std::vector<std::string>{});
}

// mv a b; mv b c, handled together: one MOVE a->c, and b is reconciled (it may have held an
// archived file that the first rename replaced).
TEST_F(WatcherTest, ARenameChainIsOneMove) {
  test::write_file(path("a"), "1");
  archive({"", "a"});
  start();
  fs::rename(path("a"), path("b"));
  fs::rename(path("b"), path("c"));
  EXPECT_EQ(sorted(pump_until(has_all({"MOVE a>c", "STAT ."}))),
            (std::vector<std::string>{"DELETE b", "MOVE a>c", "STAT ."}));
}

TEST_F(WatcherTest, RenameRightAfterAWriteAlsoQueuesTheNewContent) {
  test::write_file(path("a"), "1");
  archive({"", "a"});
  start();
  test::write_file(path("a"), "changed");
  fs::rename(path("a"), path("b"));
  EXPECT_EQ(sorted(pump_until(has_all({"MOVE a>b", "UPDATE b", "STAT ."}))),
            (std::vector<std::string>{"MOVE a>b", "STAT .", "UPDATE b"}));
}

TEST_F(WatcherTest, RenameOfANeverArchivedFileIsAnUpdateOfTheNewName) {
  start();
  test::write_file(path("tmp"), "1");
  fs::rename(path("tmp"), path("final"));
  EXPECT_EQ(sorted(pump_until(has_all({"UPDATE final", "STAT ."}))),
            (std::vector<std::string>{"STAT .", "UPDATE final"}));
}

TEST_F(WatcherTest, RenamedDirectoryIsOneMoveAndItsWatchesFollow) {
  test::write_file(path("d/x"), "1");
  test::write_file(path("d/e/y"), "2");
  archive({"", "d", "d/x", "d/e", "d/e/y"});
  start();
  fs::rename(path("d"), path("n"));
  EXPECT_EQ(sorted(pump_until(has_all({"MOVE d>n", "STAT ."}))),
            (std::vector<std::string>{"MOVE d>n", "STAT ."}));
  test::write_file(path("n/e/z"), "3");
  EXPECT_EQ(sorted(pump_until(has_all({"UPDATE n/e/z", "STAT n/e"}))),
            (std::vector<std::string>{"STAT n/e", "UPDATE n/e/z"}));
}

TEST_F(WatcherTest, MovedOutIsADeleteMovedInIsAnUpdateOfEverything) {
  test::write_file(path("d/x"), "1");
  test::write_file(path("f"), "1");
  archive({"", "d", "d/x", "f"});
  test::write_file(outside_ + "/in/deep/y", "2");
  test::write_file(outside_ + "/g", "3");
  start();
  fs::rename(path("d"), outside_ + "/d");
  fs::rename(path("f"), outside_ + "/f");
  fs::rename(outside_ + "/in", path("in"));
  fs::rename(outside_ + "/g", path("g"));
  const auto got = pump_until(has_all({"DELETE d", "DELETE f", "UPDATE in", "UPDATE in/deep",
                                       "UPDATE in/deep/y", "UPDATE g", "STAT ."}));
  EXPECT_EQ(got.size(), 7u) << testing::PrintToString(got);
  // The moved-out directory is no longer watched.
  test::write_file(outside_ + "/d/later", "4");
  EXPECT_EQ(pump_for(200ms), std::vector<std::string>{});
}

TEST_F(WatcherTest, SymlinksAreNotFollowed) {
  test::write_file(outside_ + "/target/t", "1");
  start();
  fs::create_directory_symlink(outside_ + "/target", path("link"));
  EXPECT_EQ(sorted(pump_until(has_all({"UPDATE link", "STAT ."}))),
            (std::vector<std::string>{"STAT .", "UPDATE link"}));
  test::write_file(outside_ + "/target/u", "2");
  test::write_file(path("link/v"), "3");  // written through the link: lands outside
  EXPECT_EQ(pump_for(200ms), std::vector<std::string>{});
}

TEST_F(WatcherTest, FiltersApply) {
  start({"*.tmp", "cache"}, 10);
  fs::create_directories(path("cache"));
  test::write_file(path("cache/x"), "1");
  test::write_file(path("a.tmp"), "1");
  test::write_file(path("big"), std::string(11, 'x'));
  test::write_file(path("small"), "1");
  EXPECT_EQ(sorted(pump_until(has_all({"UPDATE small", "STAT ."}))),
            (std::vector<std::string>{"STAT .", "UPDATE small"}));
  EXPECT_EQ(pump_for(100ms), std::vector<std::string>{});
}

TEST_F(WatcherTest, OverflowLeadsToARescanThatMissesNothing) {
  for (int i = 0; i < 50; ++i) test::write_file(path("old" + std::to_string(i)), "1");
  test::write_file(path("d/kept"), "1");
  std::vector<std::string> names{"", "d", "d/kept"};
  for (int i = 0; i < 50; ++i) names.push_back("old" + std::to_string(i));
  archive(names);
  start();
  EXPECT_EQ(collect(), std::vector<std::string>{});
  source_->lose_next_events();
  std::vector<std::string> wanted;
  for (int i = 0; i < 200; ++i) {
    test::write_file(path("new/n" + std::to_string(i)), "x");
    wanted.push_back("UPDATE new/n" + std::to_string(i));
  }
  for (int i = 0; i < 10; ++i) {
    test::write_file(path("old" + std::to_string(i)), "changed");
    wanted.push_back("UPDATE old" + std::to_string(i));
  }
  for (int i = 10; i < 15; ++i) {
    fs::remove(path("old" + std::to_string(i)));
    wanted.push_back("DELETE old" + std::to_string(i));
  }
  ASSERT_EQ(::chmod(path("old20").c_str(), 0600), 0);
  wanted.push_back("STAT old20");
  fs::rename(path("d"), path("e"));
  wanted.push_back("DELETE d");
  wanted.push_back("UPDATE e/kept");
  const auto got = pump_until(has_all(wanted));
  for (const auto& w : wanted) EXPECT_TRUE(has(got, w)) << w;
  EXPECT_GT(source_->lost(), 0u);
  EXPECT_EQ(watcher_->stats().rescans, 1);
  EXPECT_TRUE(logged("overflowed"));
  // The new directories are watched after the rescan.
  test::write_file(path("new/later"), "y");
  test::write_file(path("e/later"), "y");
  EXPECT_TRUE(has_all({"UPDATE new/later", "UPDATE e/later"})(
      pump_until(has_all({"UPDATE new/later", "UPDATE e/later"}))));
}

TEST_F(WatcherTest, RunningOutOfWatchesIsLoudAndTheDirectoryIsPolled) {
  start();
  source_->fail_watches_within(path("sub"), ENOSPC);
  fs::create_directories(path("sub"));
  test::write_file(path("sub/a"), "1");
  const auto first = pump_until(has_all({"UPDATE sub", "UPDATE sub/a"}));
  EXPECT_TRUE(has(first, "UPDATE sub/a"));
  EXPECT_TRUE(logged("fs.inotify.max_user_watches")) << "the error names the limit to raise";
  EXPECT_EQ(watcher_->stats().unwatched, 1);
  // No watch, no event: the periodic rescan finds it.
  test::write_file(path("sub/b"), "2");
  EXPECT_TRUE(has(pump_until(has_all({"UPDATE sub/b"})), "UPDATE sub/b"));
  ASSERT_TRUE(heal_until_all_watched());
  test::write_file(path("sub/c"), "3");
  EXPECT_TRUE(has(pump_until(has_all({"UPDATE sub/c"})), "UPDATE sub/c"));
}

// The watch limit reached in the middle of the catch-up: every directory is either watched
// or counted as unwatched (and rescanned), so a change anywhere is found; once watches are
// to be had again, every directory gets one and changes are seen by their events.
TEST_F(WatcherTest, ReachingTheWatchLimitInTheCatchUpLeavesNoDirectorySilentlyUnwatched) {
  std::vector<std::string> dirs{"."};
  for (int a = 0; a < 3; ++a) {
    dirs.push_back(fmt::format("a{}", a));
    for (int b = 0; b < 3; ++b) dirs.push_back(fmt::format("a{}/b{}", a, b));
  }
  std::vector<std::string> archived{""};
  for (const auto& d : dirs) {
    const std::string f = d == "." ? "f" : d + "/f";
    test::write_file(path(f), "1");
    if (d != ".") archived.push_back(d);
    archived.push_back(f);
  }
  archive(archived);
  watch_budget_ = 5;
  start();
  EXPECT_EQ(watcher_->stats().watches, 5);
  EXPECT_EQ(watcher_->stats().unwatched, 8) << "13 directories: watched or counted";
  EXPECT_TRUE(logged("fs.inotify.max_user_watches"));
  const auto change_everywhere = [&](const std::string& name) {
    std::vector<std::string> wanted;
    for (const auto& d : dirs) {
      const std::string f = d == "." ? name : d + "/" + name;
      test::write_file(path(f), "2");
      wanted.push_back("UPDATE " + f);
    }
    const auto got = pump_until(has_all(wanted));
    for (const auto& w : wanted) EXPECT_TRUE(has(got, w)) << w;
  };
  change_everywhere("g");
  ASSERT_TRUE(heal_until_all_watched());
  EXPECT_EQ(watcher_->stats().watches, 13);
  // Watched now: found by their events, with no rescan left to find them.
  change_everywhere("h");
}

TEST_F(WatcherTest, CatchUpSkipsWorkAlreadyQueued) {
  test::write_file(path("a"), "1");
  test::write_file(path("b"), "1");
  archive({""});
  PendingLookup pending = [this](const std::vector<std::string>& roots) {
    EXPECT_EQ(roots, std::vector<std::string>{src_});
    PendingSet set;
    set.paths[path("a")] = PendingSet::kUpdate;
    return std::optional<PendingSet>(set);
  };
  start({}, 0, pending);
  // (start() collected the catch-up's output already; run it again to look at it.)
  watcher_->catch_up();
  EXPECT_EQ(collect(), std::vector<std::string>{"UPDATE b"});
  EXPECT_TRUE(watcher_->stats().catchup_done);
  EXPECT_EQ(watcher_->stats().watches, 1);
}

TEST_F(WatcherTest, ADeletedSourceDirectoryIsWatchedAgainWhenItComesBack) {
  test::write_file(path("a"), "1");
  archive({"", "a"});
  start();
  fs::remove_all(src_);
  // One DELETE of the whole tree (it covers a).
  EXPECT_EQ(pump_until(has_all({"DELETE ."})), std::vector<std::string>{"DELETE ."});
  ASSERT_TRUE(test::wait_until(
      [&] {
        watcher_->run_once(20ms);
        collect();
        return logged("was deleted");
      },
      5s));
  test::write_file(path("b"), "2");
  EXPECT_TRUE(has(pump_until(has_all({"UPDATE b"})), "UPDATE b"));
  test::write_file(path("c"), "3");
  EXPECT_TRUE(has(pump_until(has_all({"UPDATE c"})), "UPDATE c"));
}

TEST_F(WatcherTest, EntriesCreatedRemovedOrRenamedQueueAStatOfTheirDirectory) {
  test::write_file(path("d/gone"), "1");
  test::write_file(path("d/renamed"), "1");
  test::write_file(path("d/leaves"), "1");
  fs::create_directories(path("e"));
  archive({"", "d", "d/gone", "d/renamed", "d/leaves", "e"});
  start({"*.tmp"});
  test::write_file(path("d/added"), "1");
  EXPECT_EQ(sorted(pump_until(has_all({"UPDATE d/added", "STAT d"}))),
            (std::vector<std::string>{"STAT d", "UPDATE d/added"}));
  fs::remove(path("d/gone"));
  EXPECT_EQ(sorted(pump_until(has_all({"DELETE d/gone", "STAT d"}))),
            (std::vector<std::string>{"DELETE d/gone", "STAT d"}));
  fs::rename(path("d/renamed"), path("d/renamed.new"));
  EXPECT_EQ(sorted(pump_until(has_all({"MOVE d/renamed>d/renamed.new", "STAT d"}))),
            (std::vector<std::string>{"MOVE d/renamed>d/renamed.new", "STAT d"}));
  fs::rename(path("d/leaves"), path("e/arrived"));
  EXPECT_EQ(sorted(pump_until(has_all({"MOVE d/leaves>e/arrived", "STAT d", "STAT e"}))),
            (std::vector<std::string>{"MOVE d/leaves>e/arrived", "STAT d", "STAT e"}));
  // An excluded entry is not queued, but its directory's mtime changed all the same.
  test::write_file(path("e/scratch.tmp"), "1");
  EXPECT_EQ(pump_until(has_all({"STAT e"})), std::vector<std::string>{"STAT e"});
  // A directory made and removed at once: its DELETE covers it, no STAT of it.
  fs::create_directories(path("brief"));
  fs::remove(path("brief"));
  EXPECT_EQ(sorted(pump_until(has_all({"DELETE brief", "STAT ."}))),
            (std::vector<std::string>{"DELETE brief", "STAT ."}));
}

// rm C/f1; mv C E, handled together: the DELETE of C/f1 is folded into the MOVE, and the
// scan of E against what is archived beneath C queues f1's DELETE under its new name.
TEST_F(WatcherTest, TheScanAfterADirectoryRenameDeletesWhatLeftItUnderTheNewName) {
  test::write_file(path("C/f1"), "1");
  test::write_file(path("C/f2"), "2");
  test::write_file(path("C/sub/x"), "3");
  archive({"", "C", "C/f1", "C/f2", "C/sub", "C/sub/x"});
  start();
  fs::remove(path("C/f1"));
  fs::remove_all(path("C/sub"));
  fs::rename(path("C"), path("E"));
  EXPECT_EQ(
      sorted(pump_until(has_all({"MOVE C>E", "DELETE E/f1", "DELETE E/sub"}))),
      (std::vector<std::string>{"DELETE E/f1", "DELETE E/sub", "MOVE C>E", "STAT .", "STAT E"}));
}

TEST_F(WatcherTest, APeriodicRescanRepairsWhatTheArchiveMissedAtLowPriority) {
  test::write_file(path("a"), "1");
  test::write_file(path("d/b"), "2");
  archive({"", "a", "d", "d/b"});
  Watcher::Options options = fast();
  options.rescan_interval = 300ms;
  start({}, 0, {}, options);
  // Changes whose events are lost without a trace.
  test::write_file(path("a"), "changed");
  fs::remove(path("d/b"));
  source_->swallow_waiting_events();
  ASSERT_GT(source_->lost(), 0u);
  std::vector<Change> found;
  ASSERT_TRUE(test::wait_until(
      [&] {
        watcher_->run_once(20ms);
        for (auto& c : batcher_.take()) found.push_back(std::move(c));
        return found.size() >= 3;
      },
      10s, 0ms));
  std::vector<std::string> lines;
  for (const auto& c : found) {
    lines.push_back(std::string(to_string(c.op)) + " " + rel(c.path));
    EXPECT_EQ(c.priority, kRescanPriority) << lines.back();
  }
  EXPECT_EQ(sorted(lines), (std::vector<std::string>{"DELETE d/b", "STAT d", "UPDATE a"}));
  EXPECT_EQ(watcher_->stats().rescans, 1);
  EXPECT_TRUE(logged("periodic rescan"));
  // Live changes keep their priority.
  test::write_file(path("a"), "22");
  ASSERT_TRUE(test::wait_until(
      [&] {
        watcher_->run_once(20ms);
        for (const auto& c : batcher_.take()) {
          if (c.path == path("a")) return c.priority == kLivePriority;
        }
        return false;
      },
      10s, 0ms));
}

TEST_F(WatcherTest, APeriodicRescanWorksInSlicesBetweenLiveEvents) {
  for (int i = 0; i < 3000; ++i) test::write_file(path(fmt::format("d{}/f{}", i % 10, i)), "x");
  Watcher::Options options = fast();
  options.rescan_interval = 100ms;
  options.rescan_slice = 1ms;
  start({}, 0, {}, options);  // (nothing is archived: the rescan finds all of it again)
  std::size_t rescanned = 0, slices = 0;
  bool live_seen_during_rescan = false;
  auto longest = std::chrono::steady_clock::duration::zero();
  ASSERT_TRUE(test::wait_until(
      [&] {
        const auto before = std::chrono::steady_clock::now();
        watcher_->run_once(20ms);
        longest = std::max(longest, std::chrono::steady_clock::now() - before);
        std::size_t now_rescanned = 0;
        for (const auto& c : batcher_.take()) {
          if (c.priority == kRescanPriority) ++now_rescanned;
          if (c.path == path("live") && c.op == Op::Update) {
            live_seen_during_rescan = rescanned + now_rescanned < 3000;
          }
        }
        if (now_rescanned > 0 && ++slices == 2) test::write_file(path("live"), "y");
        rescanned += now_rescanned;
        return rescanned >= 3000 + 10 + 1;  // the files, their directories, the root
      },
      30s, 0ms));
  EXPECT_GT(slices, 2u);
  EXPECT_TRUE(live_seen_during_rescan) << "the live change waited for the whole rescan";
  EXPECT_LT(longest, 1s) << "a slice held the events up";
}

TEST_F(WatcherTest, ASourceDirectoryGivenAsALinkIsWatchedUnderItsResolvedName) {
  const std::string link = (dir_ / "src-link").string();
  fs::create_directory_symlink(src_, link);
  Config config;
  config.source_dirs = {link};
  config.backup_root = archive_root();
  start_with(std::make_unique<Filter>(Filter::from_config(config)));
  ASSERT_EQ(filter_->roots(), std::vector<std::string>{fs::canonical(src_).string()});
  test::write_file(link + "/f", "1");
  const auto got = pump_until(has_all({"UPDATE f"}));
  EXPECT_TRUE(has(got, "UPDATE f")) << testing::PrintToString(got);
  for (const auto& c : got) EXPECT_EQ(c.find("src-link"), std::string::npos) << c;
}

}  // namespace
}  // namespace tw::monitor
