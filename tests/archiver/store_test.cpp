// The archive store through its public API: round trips of awkward names, empty, sparse
// and changing files, symlinks, the four operations, restore selection and safety.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <span>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "archive/expected.hpp"
#include "archive/format2/catalog.hpp"
#include "archive/format2/chunker.hpp"
#include "archive/restore_pool.hpp"
#include "archive/sha256.hpp"
#include "archive/store.hpp"
#include "archive/timefmt.hpp"
#include "archive_test_util.hpp"
#include "common/time.hpp"
#include "format1_writer.hpp"

namespace tw::archive {
namespace {

using test::compare_files;
using test::read_file;
using test::TempDir;
using test::write_file;

// The monitor and the retention runs look at a new archive while the first archiver makes
// it: at every write step of the making, a reader finds no archive (no FORMAT) or one it
// opens, never one whose catalog is not set up yet.
TEST(Creation, AReaderDuringTheMakingOfAnArchiveFindsNoneOrAWholeOne) {
  TempDir dir;
  const std::string root = dir / "archive";
  int steps = 0;
  StoreHooks hooks;
  hooks.before_write_step = [&](std::string_view step) {
    ++steps;
    if (!std::filesystem::exists(root + "/FORMAT")) return;
    auto reader = Store::open(root, Store::Mode::ReadOnly);
    EXPECT_TRUE(reader) << "at step " << steps << " (" << step << "): " << reader.error();
  };
  auto writer = Store::open(root, Store::Mode::ReadWrite, hooks);
  ASSERT_TRUE(writer) << writer.error();
  EXPECT_GT(steps, 3);
  auto reader = Store::open(root, Store::Mode::ReadOnly);
  ASSERT_TRUE(reader) << reader.error();
  auto versions = reader->versions("/nothing");
  ASSERT_TRUE(versions) << versions.error();
  EXPECT_TRUE(versions->empty());
}

TEST(Faults, ASourceGoneMidRequestIsLookedAtAgainNotAnsweredByText) {
  for (const int err : {ENOENT, ENOTDIR}) {
    const Fault fault = errno_fault(err, Side::Source, "reading /src/f");
    EXPECT_EQ(fault.outcome, Outcome::FailedRetry) << err;
    EXPECT_TRUE(fault.changed) << "a new look records the tombstone and completes";
    EXPECT_EQ(fault.message.find("vanished"), std::string::npos) << fault.message;
  }
  EXPECT_EQ(errno_fault(EACCES, Side::Source, "reading /src/f").outcome, Outcome::FailedPermanent);
  EXPECT_FALSE(errno_fault(EIO, Side::Source, "reading /src/f").changed);
}

class StoreTest : public ::testing::Test {
 protected:
  Store open(StoreHooks hooks = {}, CompressionOptions compression = {},
             const std::string& name = "archive") {
    auto store = Store::open(dir_ / name, Store::Mode::ReadWrite, std::move(hooks), compression);
    if (!store) throw std::runtime_error(store.error());
    return std::move(store.value());
  }

  // Text-like content that compresses well at every level, `size` bytes.
  static std::string text(std::size_t size) {
    std::string content;
    for (std::uint32_t i = 0; content.size() < size; ++i) {
      content += fmt::format("{:x} line {}\n", (i % 5000) * 2654435761u, i % 977);
    }
    content.resize(size);
    return content;
  }

  static void expect_complete(const ArchiveResult& r) {
    EXPECT_EQ(r.outcome, Outcome::Complete) << r.message;
  }

  // Archives `path` and restores it to a fresh place; the copy must match it exactly.
  void round_trip(Store& store, const std::string& path) {
    const ArchiveResult r = store.update(path);
    ASSERT_EQ(r.outcome, Outcome::Complete) << r.message;
    RestoreOptions options;
    options.destination = dir_ / fmt::format("restored/{}", ++restores_);
    auto report = store.restore(path, options);
    ASSERT_TRUE(report) << report.error();
    EXPECT_EQ(compare_files(path, options.destination), "") << path;
  }

  TempDir dir_;
  int restores_ = 0;
};

TEST_F(StoreTest, AwkwardNamesRoundTrip) {
  Store store = open();
  const std::vector<std::string> names = {"with space",
                                          "tab\there",
                                          "new\nline",
                                          "per%cent%41",
                                          "\xff\xfe not utf-8",
                                          "-leading-dash",
                                          "--",
                                          "caf\xc3\xa9",
                                          "\x01\x1f\x7f controls",
                                          "trailing space ",
                                          std::string(255, 'n')};
  for (const auto& name : names) {
    const std::string path = dir_ / ("src/" + name);
    write_file(path, "content of " + name, 0640);
    round_trip(store, path);
  }
  // A path far longer than NAME_MAX in total, close to PATH_MAX.
  std::string deep = dir_ / "src";
  while (deep.size() < 3900) deep += "/" + std::string(200, 'd');
  write_file(deep + "/leaf", "deep");
  round_trip(store, deep + "/leaf");
  EXPECT_TRUE(store.verify().ok());
}

TEST_F(StoreTest, EmptyFileRoundTrips) {
  Store store = open();
  const std::string path = dir_ / "src/empty";
  write_file(path, "", 0600);
  round_trip(store, path);
  auto versions = store.versions(path);
  ASSERT_TRUE(versions);
  ASSERT_EQ(versions->size(), 1u);
  EXPECT_EQ(versions->front().size, 0u);
}

TEST_F(StoreTest, SymlinksAreArchivedAsLinksEvenWhenDangling) {
  Store store = open();
  write_file(dir_ / "src/target", "the target");
  const std::string link = dir_ / "src/link";
  const std::string dangling = dir_ / "src/dangling";
  ASSERT_EQ(::symlink("target", link.c_str()), 0);
  ASSERT_EQ(::symlink("/nonexistent/nowhere", dangling.c_str()), 0);
  test::set_mtime(link, 1'700'000'000, 123);
  round_trip(store, link);
  round_trip(store, dangling);
  auto versions = store.versions(link);
  ASSERT_TRUE(versions);
  ASSERT_EQ(versions->size(), 1u);
  EXPECT_TRUE(versions->front().is_symlink());
  EXPECT_EQ(versions->front().link_target, "target");
  EXPECT_TRUE(versions->front().sha256.empty());
}

TEST_F(StoreTest, SparseTwoGibFileIsStoredSmallAndRestoredIdentical) {
  Store store = open();
  const std::string path = dir_ / "src/sparse";
  std::filesystem::create_directories(dir_ / "src");
  {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, off_t{2} << 30), 0);
    ASSERT_EQ(::pwrite(fd, "middle", 6, off_t{1} << 30), 6);
    ASSERT_EQ(::pwrite(fd, "end", 3, (off_t{2} << 30) - 3), 3);
    ::close(fd);
  }
  const ArchiveResult r = store.update(path);
  ASSERT_EQ(r.outcome, Outcome::Complete) << r.message;
  EXPECT_LT(r.bytes_added, 1u << 20) << "a sparse 2 GiB file must compress to almost nothing";
  RestoreOptions options;
  options.destination = dir_ / "restored/sparse";
  auto report = store.restore(path, options);
  ASSERT_TRUE(report) << report.error();
  EXPECT_EQ(compare_files(path, options.destination), "");
  struct stat st {};
  ASSERT_EQ(::stat(options.destination.c_str(), &st), 0);
  EXPECT_LT(st.st_blocks * 512, 64 << 20) << "restore writes holes, not 2 GiB of zeros";
}

// Objects are named by the SHA-256 of the content: the level and the threads change the
// bytes stored, never the name, and every setting restores and verifies.
TEST_F(StoreTest, CompressionSettingsChangeOnlyTheBytesStored) {
  const std::string large = dir_ / "src/large";  // above the size compressed by threads
  const std::string small = dir_ / "src/small";
  write_file(large, text(6 << 20));
  write_file(small, text(100000));
  struct Setting {
    int level;
    int threads;
  };
  const std::vector<Setting> settings = {{-7, 1}, {1, 1}, {1, 2}, {1, 0}, {19, 3}};
  std::string name;
  std::vector<std::uintmax_t> sizes;
  for (const auto& [level, threads] : settings) {
    SCOPED_TRACE(fmt::format("level {}, threads {}", level, threads));
    const std::string root = fmt::format("archive-{}-{}", level, threads);
    Store store = open({}, CompressionOptions{level, threads}, root);
    round_trip(store, large);
    round_trip(store, small);
    auto versions = store.versions(large);
    ASSERT_TRUE(versions);
    ASSERT_EQ(versions->size(), 1u);
    const std::string& sha = versions->front().sha256;
    if (name.empty()) name = sha;
    EXPECT_EQ(sha, name) << "the level or threads changed the object's name";
    // The content's bytes: format 1's objects, or format 2's packs.
    std::uintmax_t stored = 0;
    for (const char* content : {"/objects", "/packs"}) {
      if (!std::filesystem::exists(dir_ / root + content)) continue;
      for (const auto& entry :
           std::filesystem::recursive_directory_iterator(dir_ / root + content)) {
        if (entry.is_regular_file()) stored += entry.file_size();
      }
    }
    ASSERT_GT(stored, 0u);
    sizes.push_back(stored);
    EXPECT_TRUE(store.verify().ok());
  }
  EXPECT_LT(sizes.back(), sizes.front()) << "level 19 stores fewer bytes than level -7";
  EXPECT_LT(sizes[1], sizes.front()) << "level 1 stores fewer bytes than level -7";

  // An archive written at one level takes new versions at another; content already stored
  // is not stored again.
  Store store = open({}, CompressionOptions{3, 2}, "archive-1-1");
  write_file(large, text(6 << 20) + "more");
  round_trip(store, large);
  ASSERT_EQ(store.versions(large)->size(), 2u);
  EXPECT_EQ(store.update(small).bytes_added, 0u);
  EXPECT_TRUE(store.verify().ok());
}

// A file spanning many of zstd's jobs (4 MiB with two workers at level 1, 8 MiB / workers
// with more, zstd's own from level 2 up), with a last job of odd length: one object, one
// name, byte-identical back, whatever the threads and level.
TEST_F(StoreTest, LargeFileSpanningManyCompressionJobsRoundTrips) {
  const std::string large = dir_ / "src/large";
  write_file(large, text((13 << 20) + 12345));
  struct Setting {
    int level;
    int threads;
  };
  const std::vector<Setting> settings = {{1, 2}, {1, 3}, {1, 4}, {-7, 2}, {2, 2}};
  std::string name;
  for (const auto& [level, threads] : settings) {
    SCOPED_TRACE(fmt::format("level {}, threads {}", level, threads));
    Store store =
        open({}, CompressionOptions{level, threads}, fmt::format("archive-{}-{}", level, threads));
    round_trip(store, large);
    auto versions = store.versions(large);
    ASSERT_TRUE(versions);
    ASSERT_EQ(versions->size(), 1u);
    if (name.empty()) name = versions->front().sha256;
    EXPECT_EQ(versions->front().sha256, name);
    EXPECT_TRUE(store.verify().ok());
  }
}

TEST_F(StoreTest, CancelledDuringALargeFileLeavesNoTraceAndRetrySucceeds) {
  const std::string path = dir_ / "src/large";
  write_file(path, text(12 << 20));
  int polls = 0;
  bool cancel = true;
  StoreHooks hooks;
  hooks.cancelled = [&] { return cancel && ++polls > 2; };  // after two of its ~6 chunks
  Store store = open(std::move(hooks), CompressionOptions{1, 2});
  const ArchiveResult r = store.update(path);
  EXPECT_EQ(r.outcome, Outcome::FailedRetry);
  EXPECT_EQ(r.message, "cancelled");
  EXPECT_TRUE(std::filesystem::is_empty(dir_ / "archive/tmp"));
  EXPECT_TRUE(store.versions(path)->empty());
  cancel = false;
  round_trip(store, path);
  EXPECT_TRUE(store.verify().ok());
}

TEST_F(StoreTest, FileChangedWhileBeingReadIsRetriedNeverTorn) {
  const std::string path = dir_ / "src/changing";
  write_file(path, std::string(300000, 'a'));
  bool change = true;
  int appended = 0;
  StoreHooks hooks;
  hooks.after_content_read = [&] {
    if (!change) return;
    const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, "more", 4), 4);
    ::close(fd);
    ++appended;
  };
  Store store = open(std::move(hooks));
  // A file that changes on every read: the request looks again a few times, then gives up.
  const ArchiveResult r = store.update(path);
  EXPECT_EQ(r.outcome, Outcome::FailedRetry);
  EXPECT_NE(r.message.find("changed while being read"), std::string::npos) << r.message;
  EXPECT_GT(appended, 1) << "the request did not look again";
  auto versions = store.versions(path);
  ASSERT_TRUE(versions);
  EXPECT_TRUE(versions->empty()) << "no version of a file that changed under us";

  change = false;
  round_trip(store, path);
  std::string expected(300000, 'a');
  for (int i = 0; i < appended; ++i) expected += "more";
  EXPECT_EQ(read_file(dir_ / "restored/1"), expected);
}

// Puts the mtime of `path` back to `st`'s, as a writer that restores times would.
void set_mtime(const std::string& path, const struct stat& st) {
  const struct timespec times[2] = {st.st_atim, st.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW), 0);
}

void append_file(const std::string& path, const std::string& more) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  ASSERT_GE(fd, 0) << path;
  EXPECT_EQ(::write(fd, more.data(), more.size()), static_cast<ssize_t>(more.size()));
  ::close(fd);
}

struct stat stat_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st;
}

// A read answers the requests whose changes were all queued before it began (their newest
// id at most the horizon of the request that read), and only those: a change queued after
// it is read again, even when size and mtime say nothing changed.
TEST_F(StoreTest, AReadAnswersOnlyTheRequestsQueuedBeforeItBegan) {
  const std::string path = dir_ / "src/f";
  write_file(path, text(200000));
  int reads = 0;
  StoreHooks hooks;
  hooks.after_content_read = [&] { ++reads; };
  Store store = open(std::move(hooks));
  // Whether the request read the file.
  const auto reads_for = [&](const ArchiveResult& r, int before) {
    expect_complete(r);
    return reads > before;
  };
  EXPECT_TRUE(reads_for(store.update(path, QueueOrder{3, 5}), reads));
  auto versions = store.versions(path);
  ASSERT_TRUE(versions && versions->size() == 1u);
  EXPECT_EQ(versions->back().read_after, 5);

  // Queued before that read (newest 4 and 5 <= 5), the file as it left it: nothing to read.
  EXPECT_FALSE(reads_for(store.update(path, QueueOrder{4, 9}), reads));
  EXPECT_FALSE(reads_for(store.remove(path, QueueOrder{5, 9}), reads));
  EXPECT_EQ(store.versions(path)->size(), 1u);

  // Rewritten in place to other bytes of the same size, its mtime put back: only a request
  // queued after the read (newest 6 > 5) may find it, and it reads.
  const struct stat before = stat_of(path);
  std::string other = text(200000);
  other[100] = '#';
  write_file(path, other);
  set_mtime(path, before);
  ASSERT_EQ(stat_of(path).st_ino, before.st_ino);
  EXPECT_FALSE(reads_for(store.update(path, QueueOrder{5, 9}), reads));  // changes before it
  EXPECT_TRUE(reads_for(store.update(path, QueueOrder{6, 9}), reads));
  versions = store.versions(path);
  ASSERT_TRUE(versions && versions->size() == 2u);
  EXPECT_EQ(versions->back().sha256, sha256_hex(other));
  EXPECT_EQ(versions->back().read_after, 9);

  // A request without its place in the queue always reads; a stat that differs too.
  EXPECT_TRUE(reads_for(store.update(path), reads));
  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  EXPECT_TRUE(reads_for(store.update(path, QueueOrder{7, 9}), reads));
  RestoreOptions options;
  options.destination = dir_ / "restored/f";
  ASSERT_TRUE(store.restore(path, options));
  EXPECT_EQ(read_file(options.destination), other);
}

// The folder rename after an append: the MOVE reads the appended file at its new name, and
// the UPDATE queued for it with the rename is answered by that read.
TEST_F(StoreTest, AnUpdateQueuedWithAFolderRenameIsAnsweredByTheMovesRead) {
  const std::string from = dir_ / "src/d", to = dir_ / "src/d.renamed";
  write_file(from + "/log", text(300000));
  write_file(from + "/other", "other");
  int reads = 0;
  StoreHooks hooks;
  hooks.after_content_read = [&] { ++reads; };
  Store store = open(std::move(hooks));
  expect_complete(store.update(from, QueueOrder{1, 3}));
  expect_complete(store.update(from + "/log", QueueOrder{2, 3}));
  expect_complete(store.update(from + "/other", QueueOrder{3, 3}));
  EXPECT_EQ(reads, 2);
  append_file(from + "/log", "appended\n");
  std::filesystem::rename(from, to);
  expect_complete(store.move(from, to, QueueOrder{5, 6}));
  EXPECT_EQ(reads, 3) << "the appended file is read at its new name, the other followed";
  expect_complete(store.update(to + "/log", QueueOrder{6, 6}));
  EXPECT_EQ(reads, 3);
  auto versions = store.versions(to + "/log");
  ASSERT_TRUE(versions && versions->size() == 1u);
  EXPECT_EQ(versions->back().sha256, sha256_hex(text(300000) + "appended\n"));
}

// A file that grows stores what was appended, not its last chunk again: under its own
// name, and when its folder was renamed too (the MOVE reads it at the new name, cut where
// the old name's version was). Every version restores as it was.
TEST_F(StoreTest, AGrowingFileStoresWhatWasAppendedUnderItsNameAndAfterARename) {
  std::mt19937_64 rng(12);
  const auto random = [&rng](std::size_t n) {
    std::string out(n, '\0');
    for (auto& c : out) c = static_cast<char>(rng());
    return out;
  };
  const std::string from = dir_ / "src/d", to = dir_ / "src/d.renamed";
  std::vector<std::string> contents{random(6 << 20)};  // cut on the archiver's threads
  // Cut by content, its last chunk is over the smallest size, so it is kept as it is; the
  // appended bytes, each under the smallest size, are cut again with the next append.
  const Chunker chunker;
  std::span<const std::uint8_t> rest(reinterpret_cast<const std::uint8_t*>(contents[0].data()),
                                     contents[0].size());
  std::size_t last = 0;
  while (!rest.empty()) rest = rest.subspan(last = chunker.cut(rest));
  ASSERT_GE(last, chunker.sizes().min);
  write_file(from + "/log", contents.back());
  Store store = open();
  expect_complete(store.update(from));
  const ArchiveResult first = store.update(from + "/log");
  expect_complete(first);
  ASSERT_GT(first.bytes_added, contents.back().size());  // random: stored as it is
  constexpr std::size_t kAppend = 10000;
  for (std::size_t i = 1; i <= 3; ++i) {
    contents.push_back(contents.back() + random(kAppend));
    append_file(from + "/log", contents.back().substr(contents.back().size() - kAppend));
    const ArchiveResult r = store.update(from + "/log");
    expect_complete(r);
    // The bytes appended since the last chunk kept, a blob header and the version's row.
    EXPECT_LT(r.bytes_added, i * kAppend + 4096) << i;
  }
  contents.push_back(contents.back() + random(kAppend));
  append_file(from + "/log", contents.back().substr(contents.back().size() - kAppend));
  std::filesystem::rename(from, to);
  const ArchiveResult moved = store.move(from, to);
  expect_complete(moved);
  EXPECT_LT(moved.bytes_added, 4 * kAppend + 8192);
  for (std::size_t n = 1; n <= 4; ++n) {
    RestoreOptions options;
    options.which.number = n;
    options.destination = dir_ / fmt::format("restored/log.{}", n);
    ASSERT_TRUE(store.restore(from + "/log", options)) << n;
    EXPECT_EQ(read_file(options.destination), contents[n - 1]) << n;
  }
  RestoreOptions latest;
  latest.destination = dir_ / "restored/log.renamed";
  ASSERT_TRUE(store.restore(to + "/log", latest));
  EXPECT_EQ(read_file(latest.destination), contents.back());
}

TEST_F(StoreTest, FileChangedOnceWhileRehashingAKnownVersionIsLookedAtAgain) {
  const std::string path = dir_ / "src/known";
  write_file(path, "stable");
  int calls = 0;
  StoreHooks hooks;
  hooks.after_content_read = [&] {
    if (++calls == 2) write_file(path, "changed and longer");
  };
  Store store = open(std::move(hooks));
  expect_complete(store.update(path));
  // The second read is spoilt by a change; the request looks again and stores what the
  // file holds now, whole.
  expect_complete(store.update(path));
  EXPECT_EQ(calls, 3);
  ASSERT_EQ(store.versions(path)->size(), 2u);
  round_trip(store, path);
  EXPECT_EQ(read_file(dir_ / "restored/1"), "changed and longer");
}

TEST_F(StoreTest, IdenticalUpdateStoresNothingNewButMetadataChangesDo) {
  Store store = open();
  const std::string path = dir_ / "src/file";
  write_file(path, "same");
  const ArchiveResult first = store.update(path);
  expect_complete(first);
  EXPECT_GT(first.bytes_added, 0u);
  const ArchiveResult again = store.update(path);
  expect_complete(again);
  EXPECT_EQ(again.bytes_added, 0u);
  EXPECT_EQ(store.versions(path)->size(), 1u);

  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  expect_complete(store.stat(path));
  auto versions = store.versions(path);
  ASSERT_EQ(versions->size(), 2u);
  EXPECT_EQ(versions->back().op, Op::Stat);
  EXPECT_EQ(versions->back().sha256, versions->front().sha256);
  EXPECT_EQ(versions->back().mode & 07777, 0600u);
  expect_complete(store.stat(path));
  EXPECT_EQ(store.versions(path)->size(), 2u) << "an identical STAT stores nothing";

  // Same content in another file: the object is shared, only metadata is written.
  write_file(dir_ / "src/copy", "same");
  const ArchiveResult copy = store.update(dir_ / "src/copy");
  expect_complete(copy);
  EXPECT_LT(copy.bytes_added, first.bytes_added + 600);
}

TEST_F(StoreTest, StatOfANeverArchivedFileStoresItsContent) {
  Store store = open();
  const std::string path = dir_ / "src/new";
  write_file(path, "fresh");
  expect_complete(store.stat(path));
  auto versions = store.versions(path);
  ASSERT_EQ(versions->size(), 1u);
  EXPECT_EQ(versions->front().op, Op::Update);
  EXPECT_FALSE(versions->front().sha256.empty());
}

TEST_F(StoreTest, RestorePicksVersionByTimeOrNumber) {
  Store store = open();
  const std::string path = dir_ / "src/evolving";
  std::vector<std::int64_t> after;
  for (int i = 1; i <= 3; ++i) {
    write_file(path, fmt::format("version {}", i));
    test::set_mtime(path, 1'700'000'000 + i, 0);
    expect_complete(store.update(path));
    after.push_back(now_ns());
  }
  for (int i = 1; i <= 3; ++i) {
    RestoreOptions by_time;
    by_time.which.at_ns = after[static_cast<std::size_t>(i - 1)];
    by_time.destination = dir_ / fmt::format("at/{}", i);
    ASSERT_TRUE(store.restore(path, by_time));
    EXPECT_EQ(read_file(by_time.destination), fmt::format("version {}", i));

    RestoreOptions by_number;
    by_number.which.number = static_cast<std::uint64_t>(i);
    by_number.destination = dir_ / fmt::format("number/{}", i);
    ASSERT_TRUE(store.restore(path, by_number));
    EXPECT_EQ(read_file(by_number.destination), fmt::format("version {}", i));
  }
  RestoreOptions too_early;
  too_early.which.at_ns = 1'000'000'000;
  too_early.destination = dir_ / "early";
  auto early = store.restore(path, too_early);
  ASSERT_FALSE(early);
  EXPECT_NE(early.error().find("did not exist"), std::string::npos) << early.error();
  RestoreOptions missing;
  missing.which.number = 9;
  EXPECT_FALSE(store.restore(path, missing));
}

TEST_F(StoreTest, RestoreRefusesToOverwriteUnlessForced) {
  Store store = open();
  const std::string path = dir_ / "src/file";
  write_file(path, "archived");
  expect_complete(store.update(path));
  write_file(path, "changed since");
  auto refused = store.restore(path, {});
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("--force"), std::string::npos) << refused.error();
  EXPECT_EQ(read_file(path), "changed since");
  RestoreOptions force;
  force.overwrite = true;
  ASSERT_TRUE(store.restore(path, force));
  EXPECT_EQ(read_file(path), "archived");
  // Into an existing directory: the file keeps its name.
  std::filesystem::create_directories(dir_ / "into");
  RestoreOptions into;
  into.destination = dir_ / "into";
  auto report = store.restore(path, into);
  ASSERT_TRUE(report) << report.error();
  EXPECT_EQ(read_file(dir_ / "into/file"), "archived");
}

TEST_F(StoreTest, DeleteOfAGoneDirectoryTombstonesItsWholeSubtree) {
  Store store = open();
  write_file(dir_ / "src/d/a", "a");
  write_file(dir_ / "src/d/sub/b", "b");
  expect_complete(store.update(dir_ / "src/d/a"));
  expect_complete(store.update(dir_ / "src/d/sub/b"));
  const std::int64_t before = now_ns();
  std::filesystem::remove_all(dir_ / "src/d");
  expect_complete(store.remove(dir_ / "src/d"));
  EXPECT_EQ(store.versions(dir_ / "src/d/sub/b")->back().op, Op::Delete);
  const ArchiveResult again = store.remove(dir_ / "src/d");
  expect_complete(again);
  EXPECT_EQ(again.bytes_added, 0u);
  EXPECT_EQ(store.versions(dir_ / "src/d/a")->size(), 2u);

  RestoreOptions latest;
  latest.destination = dir_ / "out-latest";
  auto none = store.restore(dir_ / "src/d/a", latest);
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().find("no longer exists"), std::string::npos) << none.error();
  RestoreOptions earlier;
  earlier.which.at_ns = before;
  earlier.destination = dir_ / "out-earlier";
  auto report = store.restore(dir_ / "src/d", earlier);
  ASSERT_TRUE(report) << report.error();
  EXPECT_EQ(read_file(dir_ / "out-earlier/a"), "a");
  EXPECT_EQ(read_file(dir_ / "out-earlier/sub/b"), "b");
}

TEST_F(StoreTest, DeleteOfAPathThatExistsArchivesIt) {
  Store store = open();
  const std::string path = dir_ / "src/still-here";
  write_file(path, "one");
  expect_complete(store.update(path));
  write_file(path, "two, and longer");
  // A late DELETE (the file was deleted and written again before the request ran).
  expect_complete(store.remove(path));
  auto versions = store.versions(path);
  ASSERT_EQ(versions->size(), 2u);
  EXPECT_TRUE(versions->back().exists());
  round_trip(store, path);
  EXPECT_EQ(read_file(dir_ / "restored/1"), "two, and longer");
}

TEST_F(StoreTest, AFileInPlaceOfADirectoryTombstonesWhatTheDirectoryHeld) {
  Store store = open();
  write_file(dir_ / "src/f/inner/x", "x");
  expect_complete(store.update(dir_ / "src/f"));
  expect_complete(store.update(dir_ / "src/f/inner"));
  expect_complete(store.update(dir_ / "src/f/inner/x"));
  std::filesystem::remove_all(dir_ / "src/f");
  write_file(dir_ / "src/f", "now a file");
  expect_complete(store.update(dir_ / "src/f"));
  EXPECT_FALSE(store.versions(dir_ / "src/f/inner")->back().exists());
  EXPECT_FALSE(store.versions(dir_ / "src/f/inner/x")->back().exists());
  RestoreOptions options;
  options.destination = dir_ / "out";
  auto report = store.restore(dir_ / "src", options);
  ASSERT_TRUE(report) << report.error();
  EXPECT_TRUE(report->problems.empty());
  EXPECT_EQ(read_file(dir_ / "out/f"), "now a file");
}

TEST_F(StoreTest, ADirectoryTombstonesTheChildrenItNoLongerHolds) {
  Store store = open();
  write_file(dir_ / "src/d/old", "old");
  write_file(dir_ / "src/d/sub/deep", "deep");
  for (const char* p : {"src/d", "src/d/old", "src/d/sub", "src/d/sub/deep"}) {
    expect_complete(store.update(dir_ / p));
  }
  // rm -r d; mkdir d; echo x > d/new
  std::filesystem::remove_all(dir_ / "src/d");
  write_file(dir_ / "src/d/new", "x");
  expect_complete(store.update(dir_ / "src/d"));
  expect_complete(store.update(dir_ / "src/d/new"));
  EXPECT_FALSE(store.versions(dir_ / "src/d/old")->back().exists());
  EXPECT_FALSE(store.versions(dir_ / "src/d/sub")->back().exists());
  EXPECT_FALSE(store.versions(dir_ / "src/d/sub/deep")->back().exists());
  EXPECT_TRUE(store.versions(dir_ / "src/d/new")->back().exists());
}

TEST_F(StoreTest, APathBeneathASymlinkIsAbsent) {
  Store store = open();
  write_file(dir_ / "src/docs/x", "mine");
  expect_complete(store.update(dir_ / "src/docs/x"));
  write_file(dir_ / "secret/x", "not mine");
  std::filesystem::remove_all(dir_ / "src/docs");
  std::filesystem::create_directory_symlink(dir_ / "secret", dir_ / "src/docs");
  // The request for docs/x must not read through the link: docs/x is gone from the tree.
  expect_complete(store.update(dir_ / "src/docs/x"));
  auto versions = store.versions(dir_ / "src/docs/x");
  ASSERT_EQ(versions->size(), 2u);
  EXPECT_FALSE(versions->back().exists());
}

TEST_F(StoreTest, MoveFollowsTheFileOnlyWhereTheDiskConfirmsIt) {
  Store store = open();
  const std::string a = dir_ / "src/a";
  write_file(a, "one");
  expect_complete(store.update(a));
  write_file(a, "two!");
  expect_complete(store.update(a));
  const std::string b = dir_ / "src/b";
  ASSERT_EQ(::rename(a.c_str(), b.c_str()), 0);
  const std::int64_t before_move = now_ns();
  expect_complete(store.move(a, b));
  // The new name begins at the rename; where it came from is recorded.
  auto moved = store.versions(b);
  ASSERT_TRUE(moved);
  ASSERT_EQ(moved->size(), 1u);
  EXPECT_EQ(moved->back().op, Op::Move);
  EXPECT_EQ(moved->back().moved_from, a);
  EXPECT_GE(moved->back().archived_at_ns, before_move);
  EXPECT_EQ(store.versions(a)->size(), 3u);
  EXPECT_EQ(store.versions(a)->back().moved_to, b);
  RestoreOptions first;
  first.which.number = 1;
  first.destination = dir_ / "b1";
  ASSERT_TRUE(store.restore(b, first));
  EXPECT_EQ(read_file(dir_ / "b1"), "two!");
  RestoreOptions earlier;
  earlier.which.at_ns = before_move - 1;
  earlier.destination = dir_ / "b-earlier";
  auto not_yet = store.restore(b, earlier);
  ASSERT_FALSE(not_yet);
  EXPECT_NE(not_yet.error().find("did not exist"), std::string::npos) << not_yet.error();
  const ArchiveResult again = store.move(a, b);  // at-least-once delivery
  expect_complete(again);
  EXPECT_EQ(store.versions(b)->size(), 1u);
  EXPECT_EQ(store.versions(a)->size(), 3u);

  // A directory: every archived path beneath it follows.
  write_file(dir_ / "src/tree/x", "x");
  write_file(dir_ / "src/tree/deep/y", "y");
  expect_complete(store.update(dir_ / "src/tree/x"));
  expect_complete(store.update(dir_ / "src/tree/deep/y"));
  expect_complete(store.update(dir_ / "src/tree/deep"));
  std::filesystem::rename(dir_ / "src/tree", dir_ / "src/renamed");
  expect_complete(store.move(dir_ / "src/tree", dir_ / "src/renamed"));
  EXPECT_FALSE(store.versions(dir_ / "src/tree/deep/y")->back().exists());
  EXPECT_EQ(store.versions(dir_ / "src/renamed/deep/y")->size(), 1u);
  EXPECT_EQ(store.versions(dir_ / "src/renamed/deep/y")->back().moved_from,
            dir_ / "src/tree/deep/y");
  RestoreOptions tree;
  tree.destination = dir_ / "tree-out";
  auto report = store.restore(dir_ / "src/renamed", tree);
  ASSERT_TRUE(report) << report.error();
  EXPECT_EQ(read_file(dir_ / "tree-out/x"), "x");
  EXPECT_EQ(read_file(dir_ / "tree-out/deep/y"), "y");
  EXPECT_TRUE(store.verify().ok());
}

TEST_F(StoreTest, StaleMoveReconcilesBothNamesInsteadOfReplaying) {
  Store store = open();
  const std::string a = dir_ / "src/a";
  const std::string b = dir_ / "src/b";
  const std::string c = dir_ / "src/c";
  write_file(a, "old a");
  expect_complete(store.update(a));
  // mv a b; mv b c; echo new > a -- then the first MOVE arrives late.
  ASSERT_EQ(::rename(a.c_str(), b.c_str()), 0);
  ASSERT_EQ(::rename(b.c_str(), c.c_str()), 0);
  write_file(a, "new a");
  expect_complete(store.move(a, b));
  EXPECT_TRUE(store.versions(b)->empty()) << "b does not exist: nothing is archived there";
  ASSERT_EQ(store.versions(a)->size(), 2u);
  round_trip(store, a);
  EXPECT_EQ(read_file(dir_ / "restored/1"), "new a");
  // The file moved on without the monitor seeing where: its new name is archived new.
  expect_complete(store.move(b, c));
  ASSERT_EQ(store.versions(c)->size(), 1u);
  EXPECT_TRUE(store.versions(c)->back().moved_from.empty());
}

TEST_F(StoreTest, MoveOfAnUnknownPathArchivesTheNewName) {
  Store store = open();
  write_file(dir_ / "src/new-name", "arrived");
  expect_complete(store.move(dir_ / "src/old-name", dir_ / "src/new-name"));
  ASSERT_EQ(store.versions(dir_ / "src/new-name")->size(), 1u);
  // A rename no filesystem allows: both names are reconciled, nothing moves.
  write_file(dir_ / "src/a/inside", "in");
  expect_complete(store.move(dir_ / "src/a", dir_ / "src/a/inside"));
  EXPECT_TRUE(store.versions(dir_ / "src/a")->back().is_directory());
  EXPECT_TRUE(store.versions(dir_ / "src/a/inside")->back().is_file());
}

TEST_F(StoreTest, DirectoryRestoreKeepsMetadataAndNeverWritesOutsideTheDestination) {
  Store store = open();
  const std::string src = dir_ / "src";
  write_file(src + "/top/file", "file", 0751);
  test::set_mtime(src + "/top/file", 1'600'000'000, 42);
  ASSERT_EQ(::symlink("file", (src + "/top/link").c_str()), 0);
  std::filesystem::create_directories(src + "/top/empty");
  ::chmod((src + "/top/empty").c_str(), 0700);
  test::set_mtime(src + "/top/empty", 1'600'000'001, 0);
  // top/sneaky was first a directory holding a file...
  write_file(src + "/top/sneaky/payload", "payload");
  for (const char* p : {"/top/file", "/top/link", "/top/empty", "/top/sneaky/payload"}) {
    expect_complete(store.update(src + p));
  }
  // ...then became a symlink pointing outside; archiving the link tombstones the child.
  std::filesystem::remove_all(src + "/top/sneaky");
  const std::string outside = dir_ / "outside";
  std::filesystem::create_directories(outside);
  ASSERT_EQ(::symlink(outside.c_str(), (src + "/top/sneaky").c_str()), 0);
  expect_complete(store.update(src + "/top/sneaky"));
  test::set_mtime(src + "/top", 1'600'000'002, 0);
  expect_complete(store.update(src + "/top"));

  RestoreOptions options;
  options.destination = dir_ / "restored";
  auto report = store.restore(src + "/top", options);
  ASSERT_TRUE(report) << report.error();
  EXPECT_FALSE(std::filesystem::exists(outside + "/payload")) << "wrote through a symlink";
  EXPECT_TRUE(report->problems.empty());
  EXPECT_FALSE(store.versions(src + "/top/sneaky/payload")->back().exists());
  const std::string restored = options.destination;
  EXPECT_EQ(compare_files(src + "/top/file", restored + "/file"), "");
  EXPECT_EQ(compare_files(src + "/top/link", restored + "/link"), "");
  EXPECT_EQ(compare_files(src + "/top/empty", restored + "/empty"), "");
  EXPECT_EQ(compare_files(src + "/top", restored), "");
}

// A tree restore places files on several workers: hundreds of files in one folder, beside
// folders of their own, large and small, each comes back exact, and no temporary is left.
TEST_F(StoreTest, ATreeRestoredOnSeveralWorkersIsExactAndLeavesNoTemporary) {
  Store store = open();
  const std::string src = dir_ / "src";
  std::vector<std::string> files;
  for (int i = 0; i < 300; ++i) files.push_back(fmt::format("{}/flat/f{}", src, i));
  for (int d = 0; d < 20; ++d) {
    for (int i = 0; i < 5; ++i) files.push_back(fmt::format("{}/deep/d{}/e/f{}", src, d, i));
  }
  for (std::size_t i = 0; i < files.size(); ++i) {
    // Every tenth file spans several chunks, so that workers extract large and small at once.
    write_file(files[i], i % 10 == 0 ? text(1'500'000 + i) : fmt::format("file {}", i),
               0600 + (i % 2) * 040);
    expect_complete(store.update(files[i]));
  }
  // Either way of making it durable.
  for (const auto durability : {Durability::EachFile, Durability::WholeFilesystem}) {
    SCOPED_TRACE(durability == Durability::EachFile ? "each file" : "whole filesystem");
    RestoreOptions options;
    options.destination = dir_ / fmt::format("restored-{}", static_cast<int>(durability));
    options.durability = durability;
    auto report = store.restore(src, options);
    ASSERT_TRUE(report) << report.error();
    EXPECT_TRUE(report->problems.empty()) << report->problems.front();
    EXPECT_EQ(report->files, files.size());
    for (const auto& f : files) {
      EXPECT_EQ(compare_files(f, options.destination + f.substr(src.size())), "") << f;
    }
    std::size_t entries = 0;
    for (const auto& e : std::filesystem::recursive_directory_iterator(options.destination)) {
      EXPECT_EQ(e.path().filename().string().find(".tw-restore-"), std::string::npos) << e.path();
      entries += e.is_regular_file() ? 1 : 0;
    }
    EXPECT_EQ(entries, files.size());
  }
}

// A restore syncs the whole filesystem only when little else is waiting to be written, and
// each file otherwise, or when it cannot tell; an explicit choice stands.
TEST(RestoreDurability, ChosenByThePendingWritesAsTheRestoreBegins) {
  const std::string quiet = "MemTotal: 100 kB\nDirty:     1200 kB\nWriteback:   0 kB\n";
  const std::string busy = "MemTotal: 100 kB\nDirty:  1500000 kB\nWriteback:   0 kB\n";
  const std::string writing = "MemTotal: 100 kB\nDirty:  0 kB\nWriteback:  90000 kB\n";
  EXPECT_EQ(choose_durability(Durability::Auto, quiet, 10), Durability::WholeFilesystem);
  EXPECT_EQ(choose_durability(Durability::Auto, busy, 5572), Durability::EachFile);
  EXPECT_EQ(choose_durability(Durability::Auto, writing, 1), Durability::EachFile);
  // Many files: a flush each would cost more than waiting for the others' writes.
  EXPECT_EQ(choose_durability(Durability::Auto, busy, 61500), Durability::WholeFilesystem);
  EXPECT_EQ(choose_durability(Durability::Auto, writing, 800), Durability::WholeFilesystem);
  EXPECT_EQ(choose_durability(Durability::Auto, "", 100000), Durability::EachFile);
  EXPECT_EQ(choose_durability(Durability::Auto, "MemTotal: 1 kB\nDirty: x kB\n", 100000),
            Durability::EachFile);
  EXPECT_EQ(choose_durability(Durability::EachFile, quiet, 100000), Durability::EachFile);
  EXPECT_EQ(choose_durability(Durability::WholeFilesystem, busy, 1), Durability::WholeFilesystem);
}

// A store whose group is open holds versions no other view of the archive can read yet: a
// restore from it reads them on its own view, and gets them back.
TEST_F(StoreTest, ARestoreFromAStoreWithAnOpenGroupGetsItsStagedVersions) {
  Store store = open();
  const std::string src = dir_ / "src";
  write_file(src + "/old", "committed before the group");
  expect_complete(store.update(src + "/old"));
  store.begin_group();
  for (int i = 0; i < 20; ++i) {
    write_file(fmt::format("{}/new/f{}", src, i), fmt::format("staged {}", i));
    expect_complete(store.update(fmt::format("{}/new/f{}", src, i)));
  }
  ASSERT_GT(store.staged_versions(), 0u);
  RestoreOptions options;
  options.destination = dir_ / "restored";
  auto report = store.restore(src, options);
  ASSERT_TRUE(report) << report.error();
  EXPECT_TRUE(report->problems.empty()) << report->problems.front();
  EXPECT_EQ(report->files, 21u);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(read_file(fmt::format("{}/new/f{}", options.destination, i)),
              fmt::format("staged {}", i));
  }
  ASSERT_TRUE(store.flush());
}

// Whether a thread of this process waits for a lock (a "->" line of /proc/locks).
bool waiting_for_a_lock() {
  std::ifstream locks("/proc/locks");
  const std::string pid = " " + std::to_string(::getpid()) + " ";
  for (std::string line; std::getline(locks, line);) {
    if (line.find("->") != std::string::npos && line.find(pid) != std::string::npos) return true;
  }
  return false;
}

// A reader that opens a new archive while its first writer sets the catalog up (the monitor's
// first looks, and its first retention run, beside the archivers making it) waits for the
// setup and reads the archive; it does not fail.
TEST_F(StoreTest, AReaderWaitsForACatalogBeingSetUp) {
  const std::string root = dir_ / "archive";
  { Store made = open(); }
  for (const char* f : {"/catalog.db", "/catalog.db-wal", "/catalog.db-shm"}) {
    std::filesystem::remove(root + f);
  }
  // What a writer holds between making catalog.db and setting it up.
  const UniqueFd setup(::open((root + "/locks").c_str(), O_RDWR | O_CLOEXEC));
  ASSERT_TRUE(setup);
  ASSERT_EQ(::flock(setup.get(), LOCK_EX), 0);
  { std::ofstream created(root + "/catalog.db"); }
  std::optional<Expected<Store>> read;
  std::thread reader([&] { read.emplace(Store::open(root, Store::Mode::ReadOnly)); });
  const bool waited = test::wait_until(waiting_for_a_lock, std::chrono::seconds(10));
  auto catalog = Catalog::open(root + "/catalog.db", OpenMode::ReadWrite);
  ASSERT_TRUE(catalog) << catalog.error();
  ::flock(setup.get(), LOCK_UN);
  reader.join();
  EXPECT_TRUE(waited) << "the reader did not wait for the setup";
  ASSERT_TRUE(*read) << read->error();
  EXPECT_TRUE((*read)->verify().ok());
}

// A writer killed between a new archive's FORMAT and its catalog file leaves a root that a
// reader calls not set up yet (what it says of a catalog file without tables), not a
// failure to open a database; the next writer finishes it. A catalog gone from an archive
// whose packs hold data is refused to readers and writers alike: a new catalog would
// leave every pack unreferenced, for a collection to remove.
TEST_F(StoreTest, AnArchiveWithoutItsCatalogIsNewOnlyWhileItsPacksAreEmpty) {
  const std::string root = dir_ / "archive";
  const auto remove_catalog = [&] {
    for (const char* f : {"/catalog.db", "/catalog.db-wal", "/catalog.db-shm"}) {
      std::filesystem::remove(root + f);
    }
  };
  { Store made = open(); }
  remove_catalog();
  auto early = Store::open(root, Store::Mode::ReadOnly);
  ASSERT_FALSE(early);
  EXPECT_NE(early.error().find("not set up yet"), std::string::npos) << early.error();
  {
    Store store = open();
    write_file(dir_ / "src/file", "kept in a pack");
    expect_complete(store.update(dir_ / "src/file"));
  }
  remove_catalog();
  for (const auto mode : {Store::Mode::ReadOnly, Store::Mode::ReadWrite}) {
    auto lost = Store::open(root, mode);
    ASSERT_FALSE(lost);
    EXPECT_NE(lost.error().find("packs holds data"), std::string::npos) << lost.error();
  }
  EXPECT_FALSE(std::filesystem::exists(root + "/catalog.db")) << "a writer made a new catalog";
}

TEST_F(StoreTest, MtimesBefore1970WithAFractionRestoreExactly) {
  Store store = open();
  const std::string file = dir_ / "src/old/file";
  write_file(file, "from 1969");
  test::set_mtime(file, -2, 500'000'000);  // 1969-12-31T23:59:58.5Z
  test::set_mtime(dir_ / "src/old", -86'400 * 365, 999'999'999);
  expect_complete(store.update(file));
  expect_complete(store.update(dir_ / "src/old"));
  EXPECT_EQ(store.versions(file)->back().mtime_ns, -1'500'000'000);
  RestoreOptions options;
  options.destination = dir_ / "out";
  auto report = store.restore(dir_ / "src/old", options);
  ASSERT_TRUE(report) << report.error();
  EXPECT_TRUE(report->problems.empty()) << report->problems.front();
  EXPECT_EQ(compare_files(file, dir_ / "out/file"), "");
  EXPECT_EQ(compare_files(dir_ / "src/old", dir_ / "out"), "");
}

TEST_F(StoreTest, RefusesRelativeAndDotDotPathsAndSpecialFiles) {
  Store store = open();
  EXPECT_EQ(store.update("relative/path").outcome, Outcome::FailedPermanent);
  EXPECT_EQ(store.update("/a/../b").outcome, Outcome::FailedPermanent);
  const std::string fifo = dir_ / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  const ArchiveResult r = store.update(fifo);
  EXPECT_EQ(r.outcome, Outcome::FailedPermanent);
  EXPECT_NE(r.message.find("fifo"), std::string::npos) << r.message;
  // A path that does not exist: nothing to archive, and nothing to fail either.
  expect_complete(store.update(dir_ / "does-not-exist"));
  expect_complete(store.stat(dir_ / "no/such/dir"));
  EXPECT_TRUE(store.versions(dir_ / "does-not-exist")->empty());
}

TEST_F(StoreTest, ReadOnlyOpenRefusesSomethingThatIsNotAnArchive) {
  EXPECT_FALSE(Store::open(dir_ / "nothing-here", Store::Mode::ReadOnly));
  write_file(dir_ / "busy/some-file", "x");
  EXPECT_FALSE(Store::open(dir_ / "busy", Store::Mode::ReadWrite))
      << "must not litter a directory that is not an archive";
}

// The slot files (format 2's path and blob locks) are reached without following a link: a
// `slots` folder or slot file replaced by a symlink makes the open fail, naming it, and
// nothing is created where the link points.
TEST_F(StoreTest, SlotFilesAreNeverReachedThroughASymlink) {
  { Store made = open(); }
  const std::string slots = dir_ / "archive/slots";
  ASSERT_TRUE(std::filesystem::is_regular_file(slots + "/00"));
  ASSERT_TRUE(std::filesystem::is_regular_file(slots + "/3f"));
  { Store reopened = open(); }  // the files are there: opened as they are

  std::filesystem::rename(slots + "/3f", dir_ / "elsewhere-file");
  ASSERT_EQ(::symlink((dir_ / "elsewhere-file").c_str(), (slots + "/3f").c_str()), 0);
  auto refused = Store::open(dir_ / "archive", Store::Mode::ReadWrite);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("slots/3f"), std::string::npos) << refused.error();
  ASSERT_EQ(::unlink((slots + "/3f").c_str()), 0);

  std::filesystem::rename(slots, dir_ / "elsewhere");
  ASSERT_EQ(::symlink((dir_ / "elsewhere").c_str(), slots.c_str()), 0);
  refused = Store::open(dir_ / "archive", Store::Mode::ReadWrite);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("slots"), std::string::npos) << refused.error();
  EXPECT_FALSE(std::filesystem::exists(dir_ / "elsewhere/3f"))
      << "a slot file was made through the link";
}

// Group commit (format 2): versions staged in a group are seen by their own store, by no
// other before the flush, and by every one after it; a request later in the group
// reconciles with what is staged (a directory deleted after a new file inside it was
// archived tombstones that file too).
TEST_F(StoreTest, AGroupIsSeenByItsStoreAloneUntilItsFlush) {
  Store store = open();
  Store other = open();
  ASSERT_EQ(store.format(), ArchiveFormat::V2);
  write_file(dir_ / "src/d/new", "staged");
  write_file(dir_ / "src/e/other", "also");
  expect_complete(store.update(dir_ / "src/e/other"));  // committed before the group
  store.begin_group();
  expect_complete(store.update(dir_ / "src/d/new"));
  expect_complete(store.update(dir_ / "src/d"));
  EXPECT_EQ(store.staged_versions(), 2u);
  EXPECT_GT(store.staged_bytes(), 0u);
  EXPECT_EQ(store.versions(dir_ / "src/d/new")->size(), 1u);
  EXPECT_TRUE(other.versions(dir_ / "src/d/new")->empty());
  auto within = store.paths_within(dir_ / "src/d");
  ASSERT_TRUE(within);
  EXPECT_EQ(*within, (std::vector<std::string>{dir_ / "src/d", dir_ / "src/d/new"}));
  // The directories go: every child, staged or committed, gets its tombstone in the group.
  std::filesystem::remove_all(dir_ / "src/d");
  std::filesystem::remove_all(dir_ / "src/e");
  expect_complete(store.remove(dir_ / "src/d"));
  expect_complete(store.remove(dir_ / "src/e"));
  ASSERT_TRUE(store.flush());
  EXPECT_EQ(store.staged_versions(), 0u);
  auto history = other.versions(dir_ / "src/d/new");
  ASSERT_TRUE(history);
  ASSERT_EQ(history->size(), 2u);
  EXPECT_FALSE(history->back().exists());
  EXPECT_FALSE(other.versions(dir_ / "src/e/other")->back().exists());
  EXPECT_TRUE(other.verify().ok());
}

// Two stores each holding the lock of a staged path and wanting the other's: neither waits
// while it holds its group's locks (it flushes first), so both finish.
TEST_F(StoreTest, TwoGroupsWantingEachOthersPathsDoNotDeadlock) {
  write_file(dir_ / "src/x", "x");
  write_file(dir_ / "src/y", "y");
  Store a = open();
  Store b = open();
  a.begin_group();
  b.begin_group();
  expect_complete(a.update(dir_ / "src/x"));
  expect_complete(b.update(dir_ / "src/y"));
  write_file(dir_ / "src/x", "x2");
  write_file(dir_ / "src/y", "y2");
  // Each closes its group once its request is done, as an archiver does when no further
  // request waits (a group left open for ever would hold its slots for ever).
  ArchiveResult from_a;
  Done flushed_a = Ok{};
  std::thread t([&] {
    from_a = a.update(dir_ / "src/y");
    flushed_a = a.flush();
  });
  expect_complete(b.update(dir_ / "src/x"));
  ASSERT_TRUE(b.flush());
  t.join();
  expect_complete(from_a);
  ASSERT_TRUE(flushed_a);
  Store reader = open();
  EXPECT_EQ(reader.versions(dir_ / "src/x")->size(), 2u);
  EXPECT_EQ(reader.versions(dir_ / "src/y")->size(), 2u);
  EXPECT_TRUE(reader.verify().ok());
}

// Pipelined group commit: a closed group is synced while the next one runs, and the next
// one reads its versions before they are committed (a second version of the same path
// numbers after the first); groups are committed and answered in the order closed.
TEST_F(StoreTest, ClosedGroupsCommitInOrderWhileTheNextGroupReadsThem) {
  Store store = open();
  Store other = open();
  store.begin_group();
  std::mutex mutex;
  std::vector<int> answered;
  const auto answer = [&](int group) {
    return [&, group](const Done& durable) {
      EXPECT_TRUE(durable) << durable.error();
      std::lock_guard lock(mutex);
      answered.push_back(group);
    };
  };
  write_file(dir_ / "src/f", "one");
  expect_complete(store.update(dir_ / "src/f"));
  store.close_group(answer(1));
  write_file(dir_ / "src/f", "two, longer");
  expect_complete(store.update(dir_ / "src/f"));
  EXPECT_EQ(store.versions(dir_ / "src/f")->size(), 2u);
  store.close_group(answer(2));
  write_file(dir_ / "src/g", "three");
  expect_complete(store.update(dir_ / "src/g"));
  store.advance();
  store.close_group(answer(3));
  ASSERT_TRUE(store.flush());
  EXPECT_EQ(store.staged_versions(), 0u);
  {
    std::lock_guard lock(mutex);
    EXPECT_EQ(answered, (std::vector<int>{1, 2, 3}));
  }
  auto history = other.versions(dir_ / "src/f");
  ASSERT_TRUE(history);
  ASSERT_EQ(history->size(), 2u);
  EXPECT_EQ(history->at(0).number, 1u);
  EXPECT_EQ(history->at(1).number, 2u);
  EXPECT_EQ(history->at(1).size, 11u);
  EXPECT_EQ(other.versions(dir_ / "src/g")->size(), 1u);
  EXPECT_TRUE(other.verify().ok());
}

// A group whose pack sync fails is lost with every group after it not yet committed, and
// nothing of theirs is read by the groups after that: a request in a later group must not
// name a blob only a lost group staged (the archive would name a blob it lacks). Groups
// before the failure stay; the lost requests, run again, archive their files.
TEST_F(StoreTest, AFailedGroupLosesTheGroupsAfterItAndNothingOfThemIsUsedLater) {
  // The next pack sync fails once `failing` is set, the one after it waits for `released`.
  std::atomic<bool> fail_next{false};
  std::atomic<bool> hold_next{false};
  std::atomic<bool> failing{false};
  std::atomic<bool> released{false};
  const auto wait_for = [](const std::atomic<bool>& flag) {
    for (int i = 0; i < 10000 && !flag.load(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  };
  StoreHooks hooks;
  hooks.fail_write_step = [&](std::string_view step) {
    if (step != "pack-sync") return false;
    if (fail_next.exchange(false)) {
      wait_for(failing);
      return true;
    }
    if (hold_next.exchange(false)) wait_for(released);
    return false;
  };
  Store store = open(std::move(hooks));
  store.begin_group();
  std::mutex mutex;
  std::map<int, bool> answered;  // group -> durable
  const auto answer = [&](int group) {
    return [&, group](const Done& durable) {
      std::lock_guard lock(mutex);
      answered[group] = static_cast<bool>(durable);
    };
  };
  // One request in a group of its own: `name` written with `content`, then archived.
  const auto group_of_one = [&](const char* name, const char* content, int group) {
    write_file(dir_ / name, content);
    expect_complete(store.update(dir_ / name));
    store.close_group(answer(group));
  };
  group_of_one("src/kept", "before the failure", 1);
  ASSERT_TRUE(store.flush());
  // Group 2's pack sync fails; group 3's is held back, so it stays ahead of the next ones.
  fail_next = true;
  hold_next = true;
  group_of_one("src/lost", "its pack sync fails", 2);
  group_of_one("src/after", "closed after it", 3);
  failing = true;
  // The failure is seen: what groups 2 and 3 staged is gone.
  for (int i = 0; i < 5000 && store.staged_versions() > 0; ++i) {
    store.advance();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(store.staged_versions(), 0u);
  // The open group went with them; it is closed behind group 3, still syncing. The group
  // after it finds the same content new: its own to store.
  group_of_one("src/shared-1", "the same content in two files", 4);
  group_of_one("src/shared-2", "the same content in two files", 5);
  released = true;
  ASSERT_TRUE(store.flush());
  {
    std::lock_guard lock(mutex);
    EXPECT_EQ(answered,
              (std::map<int, bool>{{1, true}, {2, false}, {3, false}, {4, false}, {5, true}}));
  }
  Store reader = open();
  EXPECT_EQ(reader.versions(dir_ / "src/kept")->size(), 1u);
  EXPECT_TRUE(reader.versions(dir_ / "src/lost")->empty());
  EXPECT_TRUE(reader.versions(dir_ / "src/after")->empty());
  EXPECT_TRUE(reader.versions(dir_ / "src/shared-1")->empty());
  EXPECT_EQ(reader.versions(dir_ / "src/shared-2")->size(), 1u);
  const VerifyReport report = reader.verify();
  std::string problems;
  for (const auto& p : report.problems) problems += p + "\n";
  EXPECT_TRUE(report.ok()) << problems;
  // Run again, the lost requests archive their files.
  for (const char* name : {"src/lost", "src/after", "src/shared-1"}) {
    expect_complete(store.update(dir_ / name));
  }
  ASSERT_TRUE(store.flush());
  for (const char* name : {"src/lost", "src/after", "src/shared-1"}) {
    EXPECT_EQ(reader.versions(dir_ / name)->size(), 1u) << name;
  }
  EXPECT_TRUE(reader.verify().ok());
}

// A format-1 archive is read, never written: a writer is refused with a message that says
// what to do, and leaves it as it was; a reader lists, restores and verifies it.
TEST_F(StoreTest, AFormat1ArchiveIsReadButNeverWritten) {
  write_file(dir_ / "src/f", "one");
  test::Format1Writer(dir_ / "old").update(dir_ / "src/f");
  auto writer = Store::open(dir_ / "old", Store::Mode::ReadWrite);
  ASSERT_FALSE(writer);
  EXPECT_NE(writer.error().find("format-1 archive"), std::string::npos) << writer.error();
  EXPECT_NE(writer.error().find("backup_root"), std::string::npos) << writer.error();
  EXPECT_EQ(test::read_file(dir_ / "old/FORMAT"), "timewarp-archive 1\n");
  EXPECT_FALSE(std::filesystem::exists(dir_ / "old/catalog.db"));
  auto store = Store::open(dir_ / "old", Store::Mode::ReadOnly);
  ASSERT_TRUE(store) << store.error();
  EXPECT_EQ(store->format(), ArchiveFormat::V1);
  EXPECT_EQ(store->versions(dir_ / "src/f")->size(), 1u);
  EXPECT_EQ(store->update(dir_ / "src/f").outcome, Outcome::FailedPermanent);
  RestoreOptions options;
  options.destination = dir_ / "restored";
  ASSERT_TRUE(store->restore(dir_ / "src/f", options));
  EXPECT_EQ(test::read_file(dir_ / "restored"), "one");
  EXPECT_TRUE(store->verify().ok());
}

// Chunk sizes belong to the archive: a new one names its own in FORMAT, and one whose FORMAT
// names none (made by the first releases of format 2) keeps cutting at theirs, so that a
// file changed after an upgrade deduplicates against the chunks it had. A FORMAT naming
// sizes that cannot work is refused, with the file named.
TEST_F(StoreTest, AnArchiveCutsFilesAtTheChunkSizesItWasMadeWith) {
  std::mt19937 rng(11);
  std::string content(12 << 20, '\0');
  for (auto& c : content) c = static_cast<char>(rng());
  const std::string path = dir_ / "src/large";
  write_file(path, content);
  const auto chunks_cut_by = [&](const ChunkSizes& sizes) {
    const Chunker chunker(sizes);
    std::size_t count = 0;
    for (std::size_t at = 0; at < content.size(); ++count) {
      const auto* data = reinterpret_cast<const std::uint8_t*>(content.data()) + at;
      at += chunker.cut(std::span(data, content.size() - at));
    }
    return count;
  };
  const auto chunks_stored_by = [&](const std::string& name) -> std::size_t {
    Store store = open({}, {}, name);
    expect_complete(store.update(path));
    auto versions = store.versions(path);
    return versions && versions->size() == 1 ? versions->front().chunks.size() : 0;
  };
  ASSERT_NE(chunks_cut_by(ChunkSizes{}), chunks_cut_by(kFirstChunkSizes));

  EXPECT_EQ(chunks_stored_by("new"), chunks_cut_by(ChunkSizes{}));
  EXPECT_EQ(test::read_file(dir_ / "new/FORMAT"),
            "timewarp-archive 2\nchunks 524288 2097152 8388608\n");

  write_file(dir_ / "first/FORMAT", "timewarp-archive 2\n");
  EXPECT_EQ(chunks_stored_by("first"), chunks_cut_by(kFirstChunkSizes));
  EXPECT_EQ(test::read_file(dir_ / "first/FORMAT"), "timewarp-archive 2\n") << "left as it was";

  write_file(dir_ / "odd/FORMAT", "timewarp-archive 2\nchunks 4096 3000 65536\n");
  for (const auto mode : {Store::Mode::ReadOnly, Store::Mode::ReadWrite}) {
    auto refused = Store::open(dir_ / "odd", mode);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().find("FORMAT"), std::string::npos) << refused.error();
    EXPECT_NE(refused.error().find("4096/3000/65536"), std::string::npos) << refused.error();
  }
}

}  // namespace
}  // namespace tw::archive

namespace tw::archive {
namespace {

// The archive is private whatever the umask: run by hand as root (umask 022), the archiver
// once made the root 0755 and every pack and catalog.db 0644, so any local user could read
// every archived file. Nothing under a new archive is readable by others now, and verify
// warns about one that is.
TEST(ArchivePrivacy, NothingIsReadableByOthersUnderUmask022) {
  test::TempDir dir;
  const mode_t saved = ::umask(022);
  {
    auto store = Store::open(dir / "archive", Store::Mode::ReadWrite);
    ASSERT_TRUE(store) << store.error();
    test::write_file(dir / "src/secret", "0600 at the source", 0600);
    ASSERT_EQ(store->update(dir / "src/secret").outcome, Outcome::Complete);
    ASSERT_TRUE(store->flush());
    EXPECT_TRUE(store->verify().warnings.empty());
  }
  ::umask(saved);
  std::vector<std::string> exposed;
  const auto check = [&exposed](const std::filesystem::path& path) {
    struct stat st {};
    ASSERT_EQ(::lstat(path.c_str(), &st), 0) << path;
    if ((st.st_mode & 0007) != 0) exposed.push_back(path.string());
  };
  check(dir / "archive");
  std::size_t files = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir / "archive")) {
    check(entry.path());
    files += entry.is_regular_file() ? 1 : 0;
  }
  EXPECT_GT(files, 3u) << "FORMAT, catalog.db, a pack, slot files";
  EXPECT_TRUE(exposed.empty()) << exposed.front();
  // An archive made readable by others is named by verify, as a warning.
  std::filesystem::permissions(
      dir / "archive", std::filesystem::perms::others_read | std::filesystem::perms::others_exec,
      std::filesystem::perm_options::add);
  auto reader = Store::open(dir / "archive", Store::Mode::ReadOnly);
  ASSERT_TRUE(reader) << reader.error();
  const VerifyReport report = reader->verify();
  EXPECT_TRUE(report.ok());
  ASSERT_EQ(report.warnings.size(), 1u);
  EXPECT_NE(report.warnings.front().find("readable by others"), std::string::npos);
}

}  // namespace
}  // namespace tw::archive
