// Pack files (archiver/pack.hpp): blobs read back byte for byte, a torn tail
// and damage are found, a full pack is sealed, and nothing is written after a
// failed append.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "archive_test_util.hpp"
#include "archive/format2/pack.hpp"
#include "archive/sha256.hpp"
#include "common/dirs.hpp"
#include "common/fd.hpp"

namespace tw::archive {
namespace {

std::string random_text(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::string out(n, '\0');
  for (auto& c : out) c = static_cast<char>('a' + rng() % 8);  // compressible
  return out;
}

struct Blob {
  std::string content;
  std::string id;
  BlobRef ref;
};

class PackTest : public ::testing::Test {
 protected:
  PackTest() : disk_(dir_.path(), nullptr) {}

  Blob put(PackWriter& writer, const std::string& content) {
    Blob blob{content, sha256_hex(content), {}};
    auto frame = compressor_.compress(std::span(content.data(), content.size()));
    EXPECT_TRUE(frame);
    auto ref = writer.append(blob.id, content.size(), *frame);
    EXPECT_TRUE(ref) << ref.fault().message;
    blob.ref = *ref;
    return blob;
  }

  UniqueFd open_pack(const std::string& name) const {
    return UniqueFd(::open(pack_file(packs(), name).c_str(), O_RDONLY | O_CLOEXEC));
  }

  std::string packs() const { return dir_ / "packs"; }

  test::TempDir dir_;
  DiskWriter disk_;
  BlobCompressor compressor_{1};
};

TEST_F(PackTest, BlobsReadBackByteForByteAndScanInOrder) {
  ASSERT_TRUE(disk_.make_dir(packs()));
  PackWriter writer(disk_, packs());
  std::vector<Blob> blobs;
  for (int i = 0; i < 20; ++i) blobs.push_back(put(writer, random_text(100 + i * 997, i)));
  blobs.push_back(put(writer, ""));  // an empty file is a blob too
  EXPECT_GT(writer.unsynced(), 0u);
  ASSERT_TRUE(writer.sync());
  EXPECT_EQ(writer.unsynced(), 0u);

  const UniqueFd fd = open_pack(blobs[0].ref.pack);
  ASSERT_TRUE(fd);
  for (const auto& blob : blobs) {
    EXPECT_EQ(blob.ref.pack, blobs[0].ref.pack);
    auto raw = read_blob(fd.get(), blob.ref, blob.id);
    ASSERT_TRUE(raw) << raw.error();
    EXPECT_EQ(std::string(raw->begin(), raw->end()), blob.content);
  }
  std::vector<std::string> seen;
  auto end = scan_pack(fd.get(), [&](const BlobHeader& h) { seen.push_back(h.id); });
  ASSERT_TRUE(end);
  struct stat st {};
  ASSERT_EQ(::fstat(fd.get(), &st), 0);
  EXPECT_EQ(*end, static_cast<std::uint64_t>(st.st_size));
  ASSERT_EQ(seen.size(), blobs.size());
  // A header names its blob by the first 3 bytes of its digest.
  for (std::size_t i = 0; i < blobs.size(); ++i) EXPECT_EQ(seen[i], blobs[i].id.substr(0, 6));
}

TEST_F(PackTest, AnIncompressibleBlobIsStoredAsItIsBehindASixteenByteHeader) {
  ASSERT_TRUE(disk_.make_dir(packs()));
  PackWriter writer(disk_, packs());
  std::mt19937 rng(7);
  std::string noise(5000, '\0');
  for (auto& c : noise) c = static_cast<char>(rng());
  const Blob text = put(writer, random_text(5000, 1));
  const Blob random = put(writer, noise);
  ASSERT_TRUE(writer.sync());
  EXPECT_LT(text.ref.stored, 5000u);
  EXPECT_EQ(random.ref.stored, 5000u);  // no zstd frame around it
  EXPECT_EQ(random.ref.offset, text.ref.offset + kBlobHeaderSize + text.ref.stored);
  const UniqueFd fd = open_pack(random.ref.pack);
  auto raw = read_blob(fd.get(), random.ref, random.id);
  ASSERT_TRUE(raw) << raw.error();
  EXPECT_EQ(std::string(raw->begin(), raw->end()), noise);
  std::vector<bool> compressed;
  ASSERT_TRUE(scan_pack(fd.get(), [&](const BlobHeader& h) { compressed.push_back(h.compressed); }));
  EXPECT_EQ(compressed, (std::vector<bool>{true, false}));
  // Damage in stored bytes with no frame around them is found by the blob's digest.
  {
    UniqueFd rw(::open(pack_file(packs(), random.ref.pack).c_str(), O_RDWR | O_CLOEXEC));
    const char junk = static_cast<char>(noise[100] ^ 1);
    ASSERT_EQ(::pwrite(rw.get(), &junk, 1,
                       static_cast<off_t>(random.ref.offset + kBlobHeaderSize + 100)),
              1);
  }
  auto damaged = read_blob(fd.get(), random.ref, random.id);
  ASSERT_FALSE(damaged);
  EXPECT_NE(damaged.error().find("checksum"), std::string::npos) << damaged.error();
}

// A compressor made for blobs of 2 MiB finds a repeat 1.5 MiB back, past the 1 MiB window
// zstd gives level 2 on its own; one made for no size in particular keeps zstd's window.
TEST(BlobCompressorTest, AWindowHoldsABlobOfTheSizeItIsMadeFor) {
  std::mt19937 rng(5);
  std::string half(3 << 19, '\0');
  for (auto& c : half) c = static_cast<char>(rng());
  const std::string blob = half + half;
  BlobCompressor sized(2, 2 << 20);
  auto stored = sized.compress(std::span(blob.data(), blob.size()));
  ASSERT_TRUE(stored) << stored.fault().message;
  EXPECT_TRUE(stored->compressed);
  EXPECT_LT(stored->bytes.size(), half.size() + (16 << 10));
  BlobCompressor plain(2);
  auto unsized = plain.compress(std::span(blob.data(), blob.size()));
  ASSERT_TRUE(unsized) << unsized.fault().message;
  EXPECT_GT(unsized->bytes.size(), blob.size() - (16 << 10));
  // The larger window's frame decompresses to the blob.
  std::string back(blob.size(), '\0');
  EXPECT_EQ(ZSTD_decompress(back.data(), back.size(), stored->bytes.data(), stored->bytes.size()),
            blob.size());
  EXPECT_TRUE(back == blob);
}

TEST_F(PackTest, ATornTailEndsTheScanAndEarlierBlobsStayReadable) {
  ASSERT_TRUE(disk_.make_dir(packs()));
  PackWriter writer(disk_, packs());
  const Blob first = put(writer, random_text(5000, 1));
  const Blob second = put(writer, random_text(7000, 2));
  ASSERT_TRUE(writer.sync());
  const std::string file = pack_file(packs(), first.ref.pack);
  // A writer killed mid-append leaves part of a record.
  ASSERT_EQ(::truncate(file.c_str(), static_cast<off_t>(second.ref.offset + 70)), 0);
  const UniqueFd fd = open_pack(first.ref.pack);
  std::size_t whole = 0;
  auto end = scan_pack(fd.get(), [&](const BlobHeader&) { ++whole; });
  ASSERT_TRUE(end);
  EXPECT_EQ(whole, 1u);
  EXPECT_EQ(*end, second.ref.offset);
  EXPECT_TRUE(read_blob(fd.get(), first.ref, first.id));
  auto lost = read_blob(fd.get(), second.ref, second.id);
  ASSERT_FALSE(lost);
  EXPECT_NE(lost.error().find("truncated"), std::string::npos) << lost.error();
}

TEST_F(PackTest, DamageIsNamed) {
  ASSERT_TRUE(disk_.make_dir(packs()));
  PackWriter writer(disk_, packs());
  const Blob blob = put(writer, random_text(20000, 3));
  ASSERT_TRUE(writer.sync());
  const std::string file = pack_file(packs(), blob.ref.pack);
  {
    UniqueFd rw(::open(file.c_str(), O_RDWR | O_CLOEXEC));
    const char junk = 'X';
    ASSERT_EQ(::pwrite(rw.get(), &junk, 1,
                       static_cast<off_t>(blob.ref.offset + kBlobHeaderSize + blob.ref.stored / 2)),
              1);
  }
  const UniqueFd fd = open_pack(blob.ref.pack);
  auto damaged = read_blob(fd.get(), blob.ref, blob.id);
  ASSERT_FALSE(damaged);
  EXPECT_TRUE(damaged.error().find("corrupt") != std::string::npos ||
              damaged.error().find("checksum") != std::string::npos)
      << damaged.error();
  // Asked under another id, the header says whose blob is there.
  auto wrong = read_blob(fd.get(), blob.ref, sha256_hex("other"));
  ASSERT_FALSE(wrong);
  EXPECT_NE(wrong.error().find(blob.id.substr(0, 6)), std::string::npos) << wrong.error();
}

TEST_F(PackTest, AFullPackIsSealedAndTheNextBlobStartsANewOne) {
  ASSERT_TRUE(disk_.make_dir(packs()));
  PackWriter writer(disk_, packs(), 64 << 10);
  std::vector<Blob> blobs;
  std::mt19937 rng(9);
  for (int i = 0; i < 12; ++i) {  // incompressible, 16 KiB each: about four per pack
    std::string content(16 << 10, '\0');
    for (auto& c : content) c = static_cast<char>(rng());
    blobs.push_back(put(writer, content));
  }
  ASSERT_TRUE(writer.sync());
  std::set<std::string> names;
  for (const auto& blob : blobs) names.insert(blob.ref.pack);
  EXPECT_GE(names.size(), 3u);
  for (const auto& blob : blobs) {
    const UniqueFd fd = open_pack(blob.ref.pack);
    auto raw = read_blob(fd.get(), blob.ref, blob.id);
    ASSERT_TRUE(raw) << raw.error();
    EXPECT_EQ(std::string(raw->begin(), raw->end()), blob.content);
  }
}

TEST_F(PackTest, SyncWaitsForEveryStepAndAHeaderIsFoundOnlyWhereOneIs) {
  std::vector<std::string> steps;
  DiskWriter disk(dir_.path(), [&](std::string_view step) { steps.emplace_back(step); });
  ASSERT_TRUE(disk.make_dir(packs()));
  PackWriter writer(disk, packs());
  auto frame = compressor_.compress(std::span("abc", 3));
  ASSERT_TRUE(frame);
  ASSERT_TRUE(writer.append(sha256_hex("abc"), 3, *frame));
  ASSERT_TRUE(writer.append(sha256_hex("abc"), 3, *frame));
  ASSERT_TRUE(writer.sync());
  // One pack sync and one directory sync for both blobs; nothing when nothing
  // is new.
  EXPECT_EQ(std::count(steps.begin(), steps.end(), "pack-sync"), 1);
  ASSERT_TRUE(writer.sync());
  EXPECT_EQ(std::count(steps.begin(), steps.end(), "pack-sync"), 1);
  EXPECT_FALSE(writer.append("not-an-id", 3, *frame));
  EXPECT_FALSE(decode_blob_header(std::span<const char>(std::string(64, 'x').data(), 64), 0));
}

}  // namespace
}  // namespace tw::archive
