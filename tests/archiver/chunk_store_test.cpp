// Format 2's file contents (archiver/chunk_store.hpp): files of every size restore byte
// for byte, identical chunks are stored once, an append stores only what it touched, and
// damage or a missing blob is named.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <random>
#include <string>

#include "archive/format2/chunk_store.hpp"
#include "archive/sha256.hpp"
#include "archive_test_util.hpp"
#include "common/fd.hpp"

namespace tw::archive {
namespace {

constexpr ChunkSizes kSmall{.min = 2 << 10, .avg = 8 << 10, .max = 32 << 10};

std::string random_bytes(std::size_t n, std::uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::string out(n, '\0');
  for (auto& c : out) c = static_cast<char>(rng());
  return out;
}

// A chunk store in a folder of its own (packs and catalog), at zstd level 1 and kSmall sizes
// unless told others.
struct Chunks {
  explicit Chunks(int threads = 1, ChunkSizes sizes = kSmall) : disk(dir.path(), nullptr) {
    EXPECT_TRUE(disk.make_dir(dir / "packs"));
    auto opened = Catalog::open(dir / "catalog.db", OpenMode::ReadWrite);
    EXPECT_TRUE(opened) << opened.error();
    catalog.emplace(std::move(*opened));
    store.emplace(disk, dir / "packs", *catalog, 1, sizes, std::function<bool()>{}, threads);
  }
  test::TempDir dir;
  DiskWriter disk;
  std::optional<Catalog> catalog;
  std::optional<ChunkStore> store;
};

class ChunkStoreTest : public ::testing::Test {
 protected:
  // Stores `content` as a file (cut as `prior` was, when given) and commits it; returns
  // what was stored.
  ChunkedContent put(const std::string& content, const ChunkedContent* prior = nullptr) {
    return put_with(*store_, *catalog_, dir_ / "source", content, prior);
  }
  static ChunkedContent put_with(ChunkStore& store, Catalog& catalog, const std::string& file,
                                 const std::string& content, const ChunkedContent* prior) {
    test::write_file(file, content);
    UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
    CatalogBatch batch;
    std::optional<PriorContent> cut_as;
    if (prior != nullptr) cut_as.emplace(PriorContent{prior->chunks, prior->size});
    auto stored =
        store.store(fd.get(), content.size(), "source", batch, cut_as ? &*cut_as : nullptr);
    EXPECT_TRUE(stored) << stored.fault().message;
    EXPECT_TRUE(store.sync());
    EXPECT_TRUE(catalog.commit(batch));
    return *stored;
  }
  // The sizes of the blobs `content` is made of, in order.
  std::vector<std::uint64_t> chunk_sizes(const ChunkedContent& content) {
    std::vector<std::uint64_t> sizes;
    for (const auto& id : content.chunks) {
      auto ref = catalog_->blob(id);
      EXPECT_TRUE(ref && *ref) << id;
      sizes.push_back(ref && *ref ? (*ref)->raw : 0);
    }
    return sizes;
  }

  std::string get(const ChunkedContent& content, bool sparse = false) {
    const std::string file = dir_ / "restored";
    ::unlink(file.c_str());
    UniqueFd fd(::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    auto n = store_->extract(content.chunks, content.sha256, fd.get(), sparse);
    EXPECT_TRUE(n) << n.error();
    return test::read_file(file);
  }

  Chunks chunks_;
  test::TempDir& dir_ = chunks_.dir;
  std::optional<Catalog>& catalog_ = chunks_.catalog;
  std::optional<ChunkStore>& store_ = chunks_.store;
};

TEST_F(ChunkStoreTest, FilesOfEverySizeRestoreByteForByte) {
  for (const std::size_t size : {std::size_t{0}, std::size_t{1}, std::size_t{2047},
                                 std::size_t{2048}, std::size_t{100000}, std::size_t{1 << 20}}) {
    const std::string content = random_bytes(size, static_cast<std::uint32_t>(size));
    const ChunkedContent stored = put(content);
    EXPECT_EQ(stored.size, size);
    EXPECT_EQ(stored.sha256, sha256_hex(content));
    EXPECT_EQ(stored.chunks.empty(), size == 0) << size;
    EXPECT_EQ(get(stored), content) << size;
  }
}

// A file smaller than the smallest chunk is compressed at kSmallFileLevel at least, the
// chunks of larger files at the store's own level (1 here).
TEST_F(ChunkStoreTest, AFileUnderTheSmallestChunkIsCompressedAtLevelThreeAtLeast) {
  std::mt19937 rng(5);
  std::string text;
  while (text.size() < kSmall.min - 1) {
    text += "word" + std::to_string(rng() % 300) + (rng() % 7 == 0 ? ".\n" : " ");
  }
  text.resize(kSmall.min - 1);
  const auto frame_size = [&](int level) {
    BlobCompressor compressor(level);
    auto frame = compressor.compress(std::span(text.data(), text.size()));
    EXPECT_TRUE(frame && frame->compressed);
    return frame ? frame->bytes.size() : 0;
  };
  ASSERT_NE(frame_size(kSmallFileLevel), frame_size(1)) << "the levels must differ on this text";
  EXPECT_EQ(put(text).bytes_added, kBlobHeaderSize + frame_size(kSmallFileLevel));
  const std::string larger = text + text.substr(0, 100);  // at the smallest chunk: level 1
  EXPECT_EQ(
      put(larger).bytes_added, kBlobHeaderSize + [&] {
        BlobCompressor compressor(1);
        return compressor.compress(std::span(larger.data(), larger.size()))->bytes.size();
      }());
}

TEST_F(ChunkStoreTest, ALargeFileOnSeveralThreadsIsStoredAsOnOne) {
  // 6 MiB of which one 512 KiB block comes back four times, and a run of zeros (identical
  // chunks of the largest size, one after another): identical chunks in one window and
  // across windows, new chunks beside known ones.
  const std::string block = random_bytes(512 << 10, 7);
  std::string content = random_bytes(1 << 20, 8) + std::string(1 << 20, '\0');
  for (int i = 0; i < 4; ++i) content += block + random_bytes(256 << 10, 9 + i);
  content += random_bytes((6 << 20) - content.size(), 20);
  ASSERT_EQ(content.size(), std::size_t{6} << 20);
  const ChunkedContent one = put(content);

  for (const int threads : {2, 3}) {
    Chunks threaded(threads);
    ChunkStore& store = *threaded.store;
    Catalog& catalog = *threaded.catalog;
    const std::string file = threaded.dir / "source";
    test::write_file(file, content);
    UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
    CatalogBatch batch;
    auto stored = store.store(fd.get(), content.size(), "source", batch);
    ASSERT_TRUE(stored) << stored.fault().message;
    EXPECT_EQ(stored->chunks, one.chunks) << threads;
    EXPECT_EQ(stored->sha256, one.sha256);
    EXPECT_EQ(stored->bytes_added, one.bytes_added) << "each chunk stored once";
    ASSERT_TRUE(store.sync());
    ASSERT_TRUE(catalog.commit(batch));
    const std::string restored = threaded.dir / "restored";
    UniqueFd out(::open(restored.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    auto n = store.extract(stored->chunks, stored->sha256, out.get(), false);
    ASSERT_TRUE(n) << n.error();
    EXPECT_EQ(test::read_file(restored), content);
    // Stored again: every chunk is known, nothing is added.
    UniqueFd again(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
    CatalogBatch second;
    auto repeat = store.store(again.get(), content.size(), "source", second);
    ASSERT_TRUE(repeat) << repeat.fault().message;
    EXPECT_EQ(repeat->bytes_added, 0u);
    EXPECT_EQ(repeat->chunks, one.chunks);
  }
}

// Whatever the file's size and the threads, a file cut as one chunk is its own blob: the
// blob's id is the content's digest. So it is also when a prior version's one piece is tried
// there and misses: the file is then cut by content, as without the prior version.
TEST_F(ChunkStoreTest, AFileOfOneChunkIsItsOwnBlobOnOneThreadAndOnSeveral) {
  const ChunkSizes defaults;
  // Zeros are never cut before the largest size: a large file (kLargeFile or more) of one
  // chunk, which several threads work on.
  const std::string zeros(kLargeFile + 1000, '\0');
  ASSERT_LE(zeros.size(), defaults.max);
  std::string prior = zeros;
  prior.back() = '\1';  // one chunk too: the byte moves no cut before the end
  for (const int threads : {1, 2}) {
    Chunks store(threads, defaults);
    for (const std::string& content : {random_bytes(1000, 91), zeros}) {
      const ChunkedContent stored =
          put_with(*store.store, *store.catalog, store.dir / "source", content, nullptr);
      EXPECT_EQ(stored.sha256, sha256_hex(content)) << threads;
      EXPECT_EQ(stored.chunks, std::vector<std::string>{stored.sha256}) << threads;
    }
    const ChunkedContent before =
        put_with(*store.store, *store.catalog, store.dir / "source", prior, nullptr);
    ASSERT_EQ(before.chunks.size(), 1u);
    const std::string edited = std::string(1, '\1') + zeros.substr(1);
    const ChunkedContent after =
        put_with(*store.store, *store.catalog, store.dir / "source", edited, &before);
    EXPECT_EQ(after.sha256, sha256_hex(edited)) << threads;
    EXPECT_EQ(after.chunks, std::vector<std::string>{after.sha256}) << threads;
  }
}

// A blob that cannot be read is named, on one thread (a window of one blob) and on several
// (windows of several, read while the one before is written).
TEST_F(ChunkStoreTest, ADamagedBlobIsNamedOnOneThreadAndOnSeveral) {
  const std::string content = random_bytes(300 << 10, 92);
  for (const int threads : {1, 2, 3}) {
    Chunks store(threads);
    const ChunkedContent stored =
        put_with(*store.store, *store.catalog, store.dir / "source", content, nullptr);
    ASSERT_GT(stored.chunks.size(), 8u) << "more blobs than one window holds";
    const std::string& damaged = stored.chunks[stored.chunks.size() / 2];
    auto ref = store.catalog->blob(damaged);
    ASSERT_TRUE(ref && *ref);
    {
      UniqueFd pack(
          ::open(pack_file(store.dir / "packs", (*ref)->pack).c_str(), O_WRONLY | O_CLOEXEC));
      ASSERT_TRUE(pack);
      ASSERT_EQ(::pwrite(pack.get(), "X", 1, static_cast<off_t>((*ref)->offset)), 1);
    }
    auto restored = store.store->extract(stored.chunks, stored.sha256, -1, false);
    ASSERT_FALSE(restored) << threads;
    EXPECT_NE(restored.error().find(damaged), std::string::npos) << restored.error();
    EXPECT_NE(restored.error().find("not a blob header"), std::string::npos) << restored.error();
  }
}

// A large file's window takes the cores nothing else wants: two archivers each on a large
// file on two cores run a thread each (more made them both slower: 7.1 s against 6.0 s for
// 1 GiB of text here), one alone takes the idle core too.
TEST(ThreadsForWindow, TakesOnlyTheIdleCores) {
  EXPECT_EQ(threads_for_window(2, 2, "0.50 0.40 0.30 1/200 4242\n"), 2u) << "alone";
  EXPECT_EQ(threads_for_window(2, 2, "1.50 1.40 1.30 2/200 4242\n"), 1u) << "one other runs";
  EXPECT_EQ(threads_for_window(4, 2, "3.00 1.40 1.30 7/200 4242\n"), 1u) << "never fewer than one";
  EXPECT_EQ(threads_for_window(4, 8, "1.00 1.00 1.00 3/200 4242\n"), 4u) << "never more than asked";
  EXPECT_EQ(threads_for_window(4, 4, "1.00 1.00 1.00 2/200 4242\n"), 3u);
  EXPECT_EQ(threads_for_window(1, 8, "0.00 0.00 0.00 1/200 4242\n"), 1u);
  // Unreadable: as many as asked.
  for (const char* bad : {"", "garbage", "0.5 0.4 0.3 x/200 1", "0.5 0.4 0.3 0/200 1"}) {
    EXPECT_EQ(threads_for_window(3, 2, bad), 3u) << bad;
  }
  EXPECT_EQ(threads_for_window(0, 2, ""), 1u);
}

TEST_F(ChunkStoreTest, SameContentIsStoredOnceAndAnAppendStoresLittle) {
  const std::string content = random_bytes(1 << 20, 1);
  const ChunkedContent first = put(content);
  EXPECT_GT(first.bytes_added, content.size());  // random: stored whole, plus headers
  EXPECT_EQ(put(content).bytes_added, 0u);
  const std::string longer = content + random_bytes(10000, 2);
  const ChunkedContent appended = put(longer);
  // The old last chunk again and the 10,000 new bytes: at most one max chunk plus them.
  EXPECT_LT(appended.bytes_added, kSmall.max + 10000 + 4 * kBlobHeaderSize + 1024);
  EXPECT_EQ(get(appended), longer);
  // Chunks repeated inside one file are stored once too.
  const std::string block = random_bytes(64 << 10, 3);
  const ChunkedContent twice = put(block + block + block);
  EXPECT_LT(twice.bytes_added, 2 * block.size());
}

// A file that grows is cut where its prior version was: each append stores the appended
// bytes (and the prior last chunk again only when it was under the smallest chunk), not the
// last chunk of the file again, as cutting by content alone does.
TEST_F(ChunkStoreTest, AnAppendIsCutWhereThePriorVersionWasAndStoresTheAppendedBytes) {
  std::string content = random_bytes(200 << 10, 30);
  ChunkedContent prior = put(content);
  constexpr std::size_t kAppend = 3 << 10;
  std::uint64_t added = 0;
  for (std::uint32_t i = 0; i < 10; ++i) {
    content += random_bytes(kAppend, 40 + i);
    const ChunkedContent next = put(content, &prior);
    ASSERT_GE(next.chunks.size(), prior.chunks.size());
    // Every prior chunk but the last is kept as it was.
    EXPECT_TRUE(std::equal(prior.chunks.begin(), prior.chunks.end() - 1, next.chunks.begin()));
    EXPECT_LE(next.bytes_added, kAppend + kSmall.min + 2 * kBlobHeaderSize) << i;
    added += next.bytes_added;
    EXPECT_EQ(get(next), content);
    prior = next;
  }
  // Cut by content alone, the same appends store the last chunk again each time.
  Chunks other;
  std::string again = random_bytes(200 << 10, 30);
  put_with(*other.store, *other.catalog, other.dir / "source", again, nullptr);
  std::uint64_t added_by_content = 0;
  for (std::uint32_t i = 0; i < 10; ++i) {
    again += random_bytes(kAppend, 40 + i);
    added_by_content +=
        put_with(*other.store, *other.catalog, other.dir / "source", again, nullptr).bytes_added;
  }
  EXPECT_LT(added * 2, added_by_content);
}

// Many appends smaller than the smallest chunk do not splinter a file: its last chunk is cut
// again with each append until it reaches the smallest size, so every chunk but the last is
// at least that, as when the file is cut from scratch.
TEST_F(ChunkStoreTest, SmallAppendsLeaveNoChunkUnderTheSmallestButTheLast) {
  std::string content = random_bytes(50 << 10, 50);
  ChunkedContent prior = put(content);
  for (std::uint32_t i = 0; i < 200; ++i) {
    content += random_bytes(100, 60 + i);
    prior = put(content, &prior);
  }
  EXPECT_EQ(get(prior), content);
  const auto sizes = chunk_sizes(prior);
  ASSERT_FALSE(sizes.empty());
  for (std::size_t i = 0; i + 1 < sizes.size(); ++i) {
    EXPECT_GE(sizes[i], kSmall.min) << i;
    EXPECT_LE(sizes[i], kSmall.max) << i;
  }
  EXPECT_LE(sizes.size(), content.size() / kSmall.min + 1);
}

// When the bytes are no longer the prior version's (bytes inserted at the start, or changed
// in place), the content is cut by content from there: it is stored as a file cut from
// scratch would be, and what is unchanged is still found.
TEST_F(ChunkStoreTest, AnEditedFileIsCutByContentWhereItNoLongerMatches) {
  const std::string content = random_bytes(300 << 10, 70);
  const ChunkedContent prior = put(content);
  const std::string inserted = random_bytes(5000, 71) + content;
  const ChunkedContent shifted = put(inserted, &prior);
  EXPECT_EQ(get(shifted), inserted);
  EXPECT_LT(shifted.bytes_added, 5000 + 2 * kSmall.max);
  std::string edited = inserted;
  edited[150 << 10] ^= 0x5a;
  const ChunkedContent changed = put(edited, &shifted);
  EXPECT_EQ(get(changed), edited);
  EXPECT_LT(changed.bytes_added, 2 * kSmall.max);
  EXPECT_EQ(changed.chunks.front(), shifted.chunks.front());
  EXPECT_EQ(changed.chunks.back(), shifted.chunks.back());
}

// On several threads the pieces of the prior version are cut on trust and checked by the
// window's hashes; a piece that misses sends the reader back to where it began. The result
// is the single thread's.
TEST_F(ChunkStoreTest, APriorVersionIsFollowedOnSeveralThreadsAsOnOne) {
  // Versions of one 5 MiB file: appends, an edit in place, bytes inserted, bytes removed.
  std::vector<std::string> versions{random_bytes(5 << 20, 80)};
  versions.push_back(versions.back() + random_bytes(10000, 81));
  versions.push_back(versions.back() + random_bytes(3000, 82));
  versions.push_back(versions.back());
  versions.back()[3 << 20] ^= 0x11;
  versions.push_back(random_bytes(777, 83) + versions.back());
  versions.push_back(versions.back().substr(0, 1 << 20) + versions.back().substr((1 << 20) + 999));
  std::vector<ChunkedContent> one;
  for (const auto& content : versions) {
    one.push_back(put(content, one.empty() ? nullptr : &one.back()));
  }
  for (const int threads : {2, 3}) {
    Chunks threaded(threads);
    std::optional<ChunkedContent> prior;
    for (std::size_t i = 0; i < versions.size(); ++i) {
      const ChunkedContent stored =
          put_with(*threaded.store, *threaded.catalog, threaded.dir / "source", versions[i],
                   prior ? &*prior : nullptr);
      EXPECT_EQ(stored.sha256, sha256_hex(versions[i]));
      EXPECT_EQ(stored.chunks, one[i].chunks) << threads << " threads, version " << i;
      EXPECT_EQ(stored.bytes_added, one[i].bytes_added) << threads << " threads, version " << i;
      prior = stored;
    }
  }
}

TEST_F(ChunkStoreTest, ZerosRestoreAsHolesWhenAsked) {
  const std::string content = std::string(256 << 10, '\0') + "tail";
  const ChunkedContent stored = put(content);
  EXPECT_LT(stored.bytes_added, 4096u);  // max-sized runs of zeros, all one blob
  EXPECT_EQ(get(stored, true), content);
  struct stat st {};
  ASSERT_EQ(::stat((dir_ / "restored").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, static_cast<off_t>(content.size()));
  EXPECT_LT(static_cast<std::uint64_t>(st.st_blocks) * 512, content.size());
}

TEST_F(ChunkStoreTest, AFileThatChangesLengthIsAChangeAndDamageIsNamed) {
  const std::string file = dir_ / "source";
  test::write_file(file, random_bytes(5000, 4));
  UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  CatalogBatch batch;
  auto stored = store_->store(fd.get(), 4000, "source", batch);
  ASSERT_FALSE(stored);
  EXPECT_TRUE(stored.fault().changed);
  EXPECT_EQ(stored.fault().outcome, Outcome::FailedRetry);

  const ChunkedContent good = put(random_bytes(50000, 5));
  auto missing = store_->extract({sha256_hex("nothing")}, good.sha256, -1, false);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().find("missing"), std::string::npos) << missing.error();
  auto wrong = store_->extract(good.chunks, sha256_hex("other"), -1, false);
  ASSERT_FALSE(wrong);
  EXPECT_NE(wrong.error().find("checksum mismatch"), std::string::npos) << wrong.error();
  EXPECT_TRUE(store_->extract(good.chunks, good.sha256, -1, false));
}

}  // namespace
}  // namespace tw::archive
