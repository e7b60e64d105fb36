// Two real archivers given the same path at once serialize its history: no version is
// lost or stored twice.
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "archive/format2/catalog.hpp"
#include "archive/format2/pack.hpp"
#include "archive/format2/slot_locks.hpp"
#include "archive/store.hpp"
#include "archive_test_util.hpp"
#include "common/escape.hpp"

namespace tw::archive {
namespace {

using test::ArchiverProcess;
using test::fields;

TEST(Concurrency, TwoArchiversOnOnePathKeepEveryVersionOnce) {
  test::TempDir dir;
  ArchiverProcess::Options o;
  o.args = {"--backup-root=" + (dir / "archive"), "--log-level=error"};
  ArchiverProcess first(o);
  ArchiverProcess second(o);
  const std::string link = dir / "link";
  const std::string request = "\tUPDATE\t" + escape_bytes(link);
  constexpr int kRounds = 150;
  for (int i = 0; i < kRounds; ++i) {
    // A symlink is replaced atomically, so both archivers see one state per round.
    const std::string temp = dir / "link.new";
    ASSERT_EQ(::symlink(fmt::format("target-{}", i).c_str(), temp.c_str()), 0);
    ASSERT_EQ(::rename(temp.c_str(), link.c_str()), 0);
    ASSERT_TRUE(first.send(std::to_string(2 * i + 1) + request));
    ASSERT_TRUE(second.send(std::to_string(2 * i + 2) + request));
    const auto a = first.read_line();
    const auto b = second.read_line();
    ASSERT_TRUE(a && b);
    ASSERT_EQ(fields(*a)[1], "COMPLETE") << *a;
    ASSERT_EQ(fields(*b)[1], "COMPLETE") << *b;
  }
  first.close_stdin();
  second.close_stdin();
  EXPECT_EQ(first.wait(), 0);
  EXPECT_EQ(second.wait(), 0);
  auto store = Store::open(dir / "archive", Store::Mode::ReadOnly);
  ASSERT_TRUE(store);
  auto versions = store->versions(link);
  ASSERT_TRUE(versions) << versions.error();
  ASSERT_EQ(versions->size(), static_cast<std::size_t>(kRounds));
  for (int i = 0; i < kRounds; ++i) {
    EXPECT_EQ((*versions)[static_cast<std::size_t>(i)].link_target, fmt::format("target-{}", i));
  }
  EXPECT_TRUE(store->verify().ok());
}

// Two archivers storing the same contents at the same moment (two copies of a tree, each
// copy given to one of them) keep each blob once: the second to meet a content waits for
// the first to commit it, then uses it (FORMAT.md, "Format 2", Locks). Every byte of the
// packs belongs to an indexed blob, or to a pack's magic, but for what FORMAT.md ("Digest
// slots") lets through: a copy when the other archiver commits and lets go of the slot
// between this one's look in the catalog and its taking the slot (a system call's time,
// longer on a loaded machine). Two such copies of the small files are allowed; without the
// slots every one of the 300 contents is stored twice.
TEST(Concurrency, TwoArchiversStoringTheSameContentAtOnceKeepOneCopy) {
  test::TempDir dir;
  std::mt19937_64 random(20261126);
  const auto noise = [&random](std::size_t size) {
    std::string bytes(size, '\0');
    for (auto& c : bytes) c = static_cast<char>(random());
    return bytes;
  };
  std::filesystem::create_directories(dir / "a");
  std::filesystem::create_directories(dir / "b");
  constexpr int kFiles = 300;
  for (int i = 0; i < kFiles; ++i) {
    // Incompressible, of one chunk each; the last is a file of several chunks.
    const std::string content = i + 1 < kFiles ? noise(2000 + 10 * i) : noise(6u << 20);
    test::write_file(dir / fmt::format("a/f{}", i), content);
    test::write_file(dir / fmt::format("b/f{}", i), content);
  }
  ArchiverProcess::Options o;
  o.args = {"--backup-root=" + (dir / "archive"), "--log-level=error"};
  ArchiverProcess first(o);
  ArchiverProcess second(o);
  for (int i = 0; i < kFiles; ++i) {
    ASSERT_TRUE(first.send(
        fmt::format("{}\tUPDATE\t{}", 2 * i + 1, escape_bytes(dir / fmt::format("a/f{}", i)))));
    ASSERT_TRUE(second.send(
        fmt::format("{}\tUPDATE\t{}", 2 * i + 2, escape_bytes(dir / fmt::format("b/f{}", i)))));
  }
  for (int i = 0; i < kFiles; ++i) {
    for (auto* archiver : {&first, &second}) {
      const auto answer = archiver->read_line();
      ASSERT_TRUE(answer);
      ASSERT_EQ(fields(*answer)[1], "COMPLETE") << *answer;
    }
  }
  first.close_stdin();
  second.close_stdin();
  EXPECT_EQ(first.wait(), 0);
  EXPECT_EQ(second.wait(), 0);

  auto catalog = Catalog::open(dir / "archive/catalog.db", Store::Mode::ReadOnly);
  ASSERT_TRUE(catalog) << catalog.error();
  auto blobs = catalog->all_blobs();
  ASSERT_TRUE(blobs) << blobs.error();
  std::uint64_t indexed = 0;
  for (const auto& [id, ref] : *blobs) indexed += kBlobHeaderSize + ref.stored;
  std::uint64_t packed = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir / "archive/packs")) {
    if (entry.is_regular_file() && entry.path().extension() == ".pack") {
      packed += entry.file_size() - kPackMagic.size();
    }
  }
  ASSERT_GE(packed, indexed);
  const std::uint64_t largest_small_record = kBlobHeaderSize + 2000 + 10 * (kFiles - 2);
  EXPECT_LE(packed - indexed, 2 * largest_small_record)
      << (packed - indexed) << " bytes of the packs are copies";
  auto store = Store::open(dir / "archive", Store::Mode::ReadOnly);
  ASSERT_TRUE(store) << store.error();
  EXPECT_TRUE(store->verify().ok());
}

// Two new blobs whose ids share their first 20 bits have digest slots of their own: one
// writer storing either does not make another wait for it (with a slot per 20 bits, a
// group holding 4,096 slots made one new blob in 256 wait for a blob it did not share).
TEST(Concurrency, BlobsSharingTheirFirst20BitsHaveDigestSlotsOfTheirOwn) {
  test::TempDir dir;
  DiskWriter disk(dir.path(), {});
  auto holder = SlotLocks::open(disk, dir.path());
  ASSERT_TRUE(holder) << holder.error();
  auto other = SlotLocks::open(disk, dir.path());
  ASSERT_TRUE(other) << other.error();
  const std::string held = "abcde0" + std::string(58, '1');
  const std::string wanted = "abcde7" + std::string(58, '1');
  const auto held_slot = SlotLocks::digest_slot(held);
  const auto wanted_slot = SlotLocks::digest_slot(wanted);
  ASSERT_TRUE(held_slot && wanted_slot);
  EXPECT_NE(*held_slot, *wanted_slot);
  ASSERT_EQ(holder->lock(*held_slot, true, {}), 0);
  EXPECT_EQ(other->lock(*wanted_slot, true, {}), 0) << "waits for another blob's commit";
  EXPECT_EQ(other->lock(*held_slot, true, {}), EAGAIN) << "the same blob's slot is held";
}

// Several archivers started at once on a root that is not an archive yet: every one opens
// the archive it makes together with the others, and answers.
TEST(Concurrency, ArchiversStartingTogetherOnANewRootAllWork) {
  for (int round = 0; round < 5; ++round) {
    test::TempDir dir;
    test::write_file(dir / "file", "content");
    ArchiverProcess::Options o;
    o.args = {"--backup-root=" + (dir / "archive"), "--log-level=error"};
    std::vector<std::unique_ptr<ArchiverProcess>> archivers;
    for (int i = 0; i < 6; ++i) archivers.push_back(std::make_unique<ArchiverProcess>(o));
    for (std::size_t i = 0; i < archivers.size(); ++i) {
      ASSERT_TRUE(
          archivers[i]->send(std::to_string(i + 1) + "\tUPDATE\t" + escape_bytes(dir / "file")));
    }
    for (auto& archiver : archivers) {
      const auto answer = archiver->read_line();
      ASSERT_TRUE(answer) << "round " << round;
      EXPECT_EQ(fields(*answer)[1], "COMPLETE") << *answer;
      archiver->close_stdin();
      EXPECT_EQ(archiver->wait(), 0);
    }
    auto store = Store::open(dir / "archive", Store::Mode::ReadOnly);
    ASSERT_TRUE(store) << store.error();
    EXPECT_EQ(store->versions(dir / "file")->size(), 1u);
  }
}

TEST(Concurrency, SecondWriterWaitsForTheFirstOnesHistoryWrite) {
  using namespace std::chrono_literals;
  test::TempDir dir;
  const std::string root = dir / "archive";
  const std::string link = dir / "link";
  ASSERT_EQ(::symlink("state-0", link.c_str()), 0);
  std::atomic<bool> armed{false};
  std::atomic<bool> second_wrote{false};
  std::thread second_thread;
  ArchiveResult second_result;

  StoreHooks second_hooks;
  second_hooks.before_write_step = [&](std::string_view) { second_wrote = true; };
  auto second = Store::open(root, Store::Mode::ReadWrite, second_hooks);
  ASSERT_TRUE(second);
  StoreHooks first_hooks;
  first_hooks.before_write_step = [&](std::string_view step) {
    // Format 1 writes the history through a temporary file, format 2 commits the catalog.
    if ((step != "create-temp" && step != "catalog-commit") || !armed.exchange(false)) return;
    // The first writer holds the path's lock and is about to write the history. Change the
    // file and let the second writer archive the new state meanwhile.
    ::unlink(link.c_str());
    ASSERT_EQ(::symlink("state-2", link.c_str()), 0);
    second_wrote = false;
    second_thread = std::thread([&] { second_result = second->update(link); });
    // It must not get to write anything before we are done.
    EXPECT_FALSE(test::wait_until([&] { return second_wrote.load(); }, 300ms))
        << "the second writer changed the history while the first held the lock";
  };
  auto first = Store::open(root, Store::Mode::ReadWrite, first_hooks);
  ASSERT_TRUE(first);
  ASSERT_EQ(first->update(link).outcome, Outcome::Complete);  // creates the node
  ::unlink(link.c_str());
  ASSERT_EQ(::symlink("state-1", link.c_str()), 0);
  armed = true;
  ASSERT_EQ(first->update(link).outcome, Outcome::Complete);
  ASSERT_TRUE(second_thread.joinable());
  second_thread.join();
  ASSERT_EQ(second_result.outcome, Outcome::Complete) << second_result.message;
  auto versions = first->versions(link);
  ASSERT_TRUE(versions);
  ASSERT_EQ(versions->size(), 3u);
  EXPECT_EQ((*versions)[1].link_target, "state-1");
  EXPECT_EQ((*versions)[2].link_target, "state-2");
}

// Two requests for one path never interleave their look and their commit: while one has
// read the file and not yet recorded it, the other cannot look. Otherwise the slower one
// could record an older state over the newer one.
TEST(Concurrency, ARequestCannotLookWhileAnotherHoldsAnUncommittedLook) {
  test::TempDir dir;
  const std::string path = dir / "src/file";
  test::write_file(path, "first state");
  std::atomic<bool> second_done{false};
  std::atomic<bool> second_done_early{false};
  std::thread second;
  StoreHooks hooks;
  bool started = false;
  hooks.after_content_read = [&] {
    if (started) return;
    started = true;
    second = std::thread([&] {
      auto other = Store::open(dir / "archive", Store::Mode::ReadWrite);
      ASSERT_TRUE(other);
      EXPECT_EQ(other->update(path).outcome, Outcome::Complete);
      second_done = true;
    });
    // Bounded: the second request must still be waiting when this one goes on.
    second_done_early =
        test::wait_until([&] { return second_done.load(); }, std::chrono::milliseconds(500));
  };
  auto first = Store::open(dir / "archive", Store::Mode::ReadWrite, std::move(hooks));
  ASSERT_TRUE(first);
  EXPECT_EQ(first->update(path).outcome, Outcome::Complete);
  second.join();
  EXPECT_FALSE(second_done_early) << "the second request looked and committed in between";
  EXPECT_TRUE(second_done);
  EXPECT_EQ(first->versions(path)->size(), 1u);
}

}  // namespace
}  // namespace tw::archive
