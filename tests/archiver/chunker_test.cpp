// Content-defined chunking (archiver/chunker.hpp): chunks cover the input
// exactly, stay within their bounds, and an edit moves only the cuts near it.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <numeric>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "archive_test_util.hpp"
#include "archive/format2/chunker.hpp"
#include "archive/sha256.hpp"
#include "common/fd.hpp"

namespace tw::archive {
namespace {

// Small sizes so that a few MiB hold hundreds of chunks.
constexpr ChunkSizes kSmall{.min = 2 << 10, .avg = 8 << 10, .max = 32 << 10};

std::vector<std::uint8_t> random_bytes(std::size_t n, std::uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint8_t> out(n);
  for (auto& b : out) b = static_cast<std::uint8_t>(rng());
  return out;
}

// The chunk lengths of `data`, cut as a caller with all of it in memory would.
std::vector<std::size_t> cuts(const Chunker& chunker, const std::vector<std::uint8_t>& data) {
  std::vector<std::size_t> out;
  std::size_t at = 0;
  while (at < data.size()) {
    const std::size_t n =
        chunker.cut(std::span(data).subspan(at, std::min(chunker.sizes().max, data.size() - at)));
    out.push_back(n);
    at += n;
  }
  return out;
}

std::set<std::string> chunk_ids(const Chunker& chunker, const std::vector<std::uint8_t>& data) {
  std::set<std::string> ids;
  std::size_t at = 0;
  for (const std::size_t n : cuts(chunker, data)) {
    ids.insert(sha256_hex(std::string_view(reinterpret_cast<const char*>(data.data() + at), n)));
    at += n;
  }
  return ids;
}

std::size_t new_chunks(const std::set<std::string>& before, const std::set<std::string>& after) {
  std::size_t n = 0;
  for (const auto& id : after) n += before.count(id) == 0 ? 1 : 0;
  return n;
}

TEST(Chunker, TheGearTableIsFixed) {
  // Part of the format: a change moves every cut of every file archived before
  // it. The words are splitmix64 from the seed "TIMEWARP", computed here
  // independently too.
  EXPECT_EQ(Chunker::gear()[0], 0x93287307f4078278ULL);
  EXPECT_EQ(Chunker::gear()[255], 0xff0e2a40575262adULL);
}

TEST(Chunker, ChunksCoverTheInputWithinTheirBounds) {
  const Chunker chunker(kSmall);
  const auto data = random_bytes(4 << 20, 1);
  const auto lengths = cuts(chunker, data);
  EXPECT_EQ(std::accumulate(lengths.begin(), lengths.end(), std::size_t{0}), data.size());
  for (std::size_t i = 0; i + 1 < lengths.size(); ++i) {
    EXPECT_GE(lengths[i], kSmall.min) << i;
    EXPECT_LE(lengths[i], kSmall.max) << i;
  }
  // Normalized chunking keeps the mean near avg on random content.
  const double mean = static_cast<double>(data.size()) / static_cast<double>(lengths.size());
  EXPECT_GT(mean, 0.75 * kSmall.avg);
  EXPECT_LT(mean, 1.5 * kSmall.avg);
}

TEST(Chunker, ShortInputIsOneChunkAndZerosAreCutAtMax) {
  const Chunker chunker(kSmall);
  EXPECT_EQ(cuts(chunker, std::vector<std::uint8_t>(100, 7)), std::vector<std::size_t>{100});
  EXPECT_TRUE(cuts(chunker, {}).empty());
  // A run of one byte value never matches the mask: max-sized chunks, all
  // alike.
  const auto zeros = cuts(chunker, std::vector<std::uint8_t>(kSmall.max * 3 + 5, 0));
  ASSERT_EQ(zeros.size(), 4u);
  EXPECT_EQ(zeros[0], kSmall.max);
  EXPECT_EQ(zeros[3], 5u);
}

TEST(Chunker, AnInsertionInTheMiddleChangesOnlyTheChunksAroundIt) {
  const Chunker chunker(kSmall);
  auto data = random_bytes(8 << 20, 2);
  const auto before = chunk_ids(chunker, data);
  const auto extra = random_bytes(100, 3);
  data.insert(data.begin() + (4 << 20), extra.begin(), extra.end());
  const auto after = chunk_ids(chunker, data);
  EXPECT_GT(before.size(), 500u);
  EXPECT_LE(new_chunks(before, after), 3u);
}

TEST(Chunker, AnAppendChangesOnlyTheLastChunks) {
  const Chunker chunker(kSmall);
  auto data = random_bytes(8 << 20, 4);
  const auto before = chunk_ids(chunker, data);
  const auto extra = random_bytes(64 << 10, 5);
  data.insert(data.end(), extra.begin(), extra.end());
  const auto after = chunk_ids(chunker, data);
  // The old last chunk and the appended bytes: at most 64 KiB / min + 2 new
  // chunks.
  EXPECT_LE(new_chunks(before, after), (64 << 10) / kSmall.min + 2);
  std::size_t kept = 0;
  for (const auto& id : before) kept += after.count(id);
  EXPECT_GE(kept, before.size() - 1);
}

// Everything a reader hands out, to its end; with `lengths`, the length of each chunk.
std::string read_all(ChunkReader& reader, std::vector<std::size_t>* lengths = nullptr) {
  std::string joined;
  for (;;) {
    auto chunk = reader.next();
    EXPECT_TRUE(chunk) << chunk.fault().message;
    if (!chunk || chunk->empty()) break;
    if (lengths != nullptr) lengths->push_back(chunk->size());
    joined.append(reinterpret_cast<const char*>(chunk->data()), chunk->size());
  }
  return joined;
}

TEST(Chunker, TheReaderCutsAFileAsTheWholeBufferIsCut) {
  const Chunker chunker(kSmall);
  const auto data = random_bytes((3 << 20) + 12345, 6);
  test::TempDir dir;
  const std::string file = dir / "f";
  test::write_file(file, std::string(data.begin(), data.end()));
  UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(fd);
  ReadBuffer buffer;
  ChunkReader reader(chunker, fd.get(), "f", buffer);
  std::vector<std::size_t> lengths;
  EXPECT_EQ(read_all(reader, &lengths), std::string(data.begin(), data.end()));
  EXPECT_EQ(lengths, cuts(chunker, data));
  EXPECT_EQ(reader.offset(), data.size());
}

// Told the file's size, the reader takes a read that stops short there for the file's end
// and reads no further: the second read below would fail (a pipe with nothing more in it,
// read without blocking, its writer still open).
TEST(Chunker, TheReaderToldTheSizeMakesNoReadToFindTheEnd) {
  const Chunker chunker(kSmall);
  const auto data = random_bytes(5000, 11);
  int ends[2];
  ASSERT_EQ(::pipe2(ends, O_CLOEXEC | O_NONBLOCK), 0);
  UniqueFd out(ends[0]), in(ends[1]);
  ASSERT_EQ(::write(in.get(), data.data(), data.size()), static_cast<ssize_t>(data.size()));
  ReadBuffer buffer;
  ChunkReader reader(chunker, out.get(), "pipe", buffer, data.size());
  EXPECT_EQ(read_all(reader), std::string(data.begin(), data.end()));
  EXPECT_TRUE(reader.at_end());
}

// The size is what the file had when it was opened: a file that has grown since, or whose
// size was reported wrong (0 where there is content), is read to its real end all the same,
// and one that has shrunk ends where its content does.
TEST(Chunker, TheReaderReadsPastASizeThatWasWrong) {
  const Chunker chunker(kSmall);
  const auto data = random_bytes((1 << 20) + 321, 12);
  test::TempDir dir;
  const std::string file = dir / "f";
  test::write_file(file, std::string(data.begin(), data.end()));
  for (const std::uint64_t told :
       {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{4096}, std::uint64_t{data.size() - 1},
        std::uint64_t{data.size()}, std::uint64_t{data.size() + 1}, std::uint64_t{3} << 20}) {
    UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
    ASSERT_TRUE(fd);
    ReadBuffer buffer;
    ChunkReader reader(chunker, fd.get(), "f", buffer, told);
    EXPECT_EQ(read_all(reader), std::string(data.begin(), data.end())) << "told " << told;
    EXPECT_EQ(reader.offset(), data.size()) << "told " << told;
  }
}

// A cut looked for over bytes that come in parts of any size (a chunk store reading only as
// far as it needs) is the cut of the whole, with no byte looked at twice.
TEST(Chunker, ACutOverBytesInPartsIsTheCutOfTheWhole) {
  const Chunker chunker(kSmall);
  const auto data = random_bytes((1 << 20) + 777, 9);
  std::mt19937 rng(10);
  std::vector<std::size_t> lengths;
  for (std::size_t at = 0; at < data.size();) {
    Chunker::Scan scan;
    std::size_t held = 0, length = 0, looked = 0;
    while (length == 0) {
      held = std::min(data.size() - at, held + 1 + rng() % 5000);
      length = chunker.cut_more(std::span(data).subspan(at, held), at + held == data.size(), scan);
      EXPECT_GE(scan.looked, looked);
      looked = scan.looked;
    }
    lengths.push_back(length);
    at += length;
  }
  EXPECT_EQ(lengths, cuts(chunker, data));
}

TEST(Chunker, SizesThatCannotWorkAreRefused) {
  EXPECT_FALSE((ChunkSizes{.min = 32, .avg = 1024, .max = 4096}).valid());
  EXPECT_FALSE((ChunkSizes{.min = 1024, .avg = 1000, .max = 4096}).valid());
  EXPECT_FALSE((ChunkSizes{.min = 1024, .avg = 4096, .max = 4096}).valid());
  EXPECT_TRUE(ChunkSizes{}.valid());
  EXPECT_THROW(Chunker(ChunkSizes{.min = 4096, .avg = 1024, .max = 8192}), std::invalid_argument);
}

// The chunk sizes an archive's FORMAT file names: none (the first releases of format 2), or
// one exact line; anything else is an error that says what it found.
TEST(Chunker, AFormatFileNamesItsChunkSizesInOneExactLine) {
  auto first = parse_chunk_sizes("");
  ASSERT_TRUE(first) << first.error();
  EXPECT_EQ(first->avg, kFirstChunkSizes.avg);
  auto named = parse_chunk_sizes(chunk_sizes_line(ChunkSizes{}));
  ASSERT_TRUE(named) << named.error();
  const ChunkSizes wanted{};
  EXPECT_EQ(std::tie(named->min, named->avg, named->max),
            std::tie(wanted.min, wanted.avg, wanted.max));
  EXPECT_EQ(chunk_sizes_line(ChunkSizes{}), "chunks 524288 2097152 8388608\n");
  for (const char* bad : {"chunks 524288 2097152 8388608", "chunks 524288 2097152\n",
                          "chunks  524288 2097152 8388608\n", "chunks 524288 2097152 8388608 1\n",
                          "chunks 524288 2097152 8388608\nmore\n", "chunks -1 2097152 8388608\n",
                          "sizes 524288 2097152 8388608\n", "\n",
                          "chunks 99999999999999999999999 2097152 8388608\n"}) {
    auto refused = parse_chunk_sizes(bad);
    ASSERT_FALSE(refused) << bad;
    EXPECT_NE(refused.error().find("expected 'chunks MIN AVG MAX'"), std::string::npos)
        << refused.error();
  }
  // Well formed, but sizes that cannot work or would not fit a blob's header.
  for (const char* bad : {"chunks 4096 3000 65536\n", "chunks 32 1024 4096\n",
                          "chunks 1048576 2097152 2147483648\n"}) {
    auto refused = parse_chunk_sizes(bad);
    ASSERT_FALSE(refused) << bad;
    EXPECT_NE(refused.error().find("need 64 <= min < avg < max"), std::string::npos)
        << refused.error();
  }
}

}  // namespace
}  // namespace tw::archive
