// Writing a restored file's content (archive/file_out.hpp): whatever the order of writes
// and holes, the file holds exactly the bytes given, with holes where zeros were skipped,
// through the page cache first and with direct I/O past kDirectFrom where the filesystem
// takes it.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <random>
#include <string>

#include "archive/file_out.hpp"
#include "archive_test_util.hpp"
#include "common/fd.hpp"

namespace tw::archive {
namespace {

using test::read_file;
using test::TempDir;

// Whether the filesystem of `dir` says it takes direct I/O on its files.
bool takes_direct_io(const std::string& dir) {
  const std::string probe = dir + "/probe";
  test::write_file(probe, "");
  struct statx info {};
  return ::statx(AT_FDCWD, probe.c_str(), 0, STATX_DIOALIGN, &info) == 0 &&
         (info.stx_mask & STATX_DIOALIGN) != 0 && info.stx_dio_offset_align != 0;
}

struct Written {
  std::string expected;
  bool went_direct = false;
};

// A seeded sequence of writes and skipped zero runs of every size, from one byte to a few
// MiB, to `path`; returns what the file must hold.
Written write_sequence(const std::string& path, std::uint32_t seed, std::uint64_t total) {
  std::mt19937 rng(seed);
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  EXPECT_TRUE(fd) << path;
  FileOut out(fd.get());
  Written result;
  while (result.expected.size() < total) {
    // Sizes spread over orders of magnitude: a byte, a block's worth, several MiB.
    const std::size_t size = 1 + rng() % (std::size_t{1} << (rng() % 23));
    if (rng() % 4 == 0) {
      EXPECT_EQ(out.skip(size), 0);
      result.expected.append(size, '\0');
    } else {
      // Letters from a random start, each write's different from the next.
      std::string data(size, '\0');
      const auto first = rng();
      for (std::size_t i = 0; i < size; ++i)
        data[i] = static_cast<char>('A' + (first + i * 7) % 26);
      EXPECT_EQ(out.write(data), 0);
      result.expected += data;
    }
    EXPECT_EQ(out.written(), result.expected.size());
  }
  result.went_direct = out.direct();
  EXPECT_EQ(out.finish(), 0);
  return result;
}

TEST(FileOutTest, TheFileHoldsExactlyTheBytesGivenWhateverTheSizesAndHoles) {
  TempDir dir;
  const bool direct_here = takes_direct_io(dir.path());
  for (std::uint32_t seed = 1; seed <= 12; ++seed) {
    SCOPED_TRACE(testing::Message() << "seed " << seed);
    const std::string path = dir / ("f" + std::to_string(seed));
    // Small files (all through the page cache) and large ones (direct past 4 MiB).
    const std::uint64_t total = seed % 3 == 0 ? 100'000 : 24 << 20;
    const Written w = write_sequence(path, seed, total);
    EXPECT_EQ(read_file(path), w.expected);
    // Small files never go direct; large ones do where the filesystem says it takes it
    // (unless it then refused a write, which the content check above still covers).
    if (total < FileOut::kDirectFrom || !direct_here) {
      EXPECT_FALSE(w.went_direct);
    }
  }
}

TEST(FileOutTest, EndsOnAnyByteAndKeepsItsHolesOnceDirect) {
  TempDir dir;
  for (const std::uint64_t tail : {0, 1, 4095, 4096, 4097, 1 << 20}) {
    SCOPED_TRACE(testing::Message() << "tail " << tail);
    const std::string path = dir / ("t" + std::to_string(tail));
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    ASSERT_TRUE(fd);
    FileOut out(fd.get());
    std::string expected(FileOut::kDirectFrom + 12'345, 'x');
    ASSERT_EQ(out.write(expected), 0);
    // 8 MiB of zeros, then `tail` bytes of data, or the file ending in the hole.
    ASSERT_EQ(out.skip(8 << 20), 0);
    expected.append(8 << 20, '\0');
    expected.append(tail, 'y');
    ASSERT_EQ(out.write(std::string(tail, 'y')), 0);
    ASSERT_EQ(out.finish(), 0);
    EXPECT_EQ(read_file(path), expected);
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_EQ(static_cast<std::uint64_t>(st.st_size), expected.size());
    // The hole stays one: far fewer blocks than the file's length.
    EXPECT_LT(static_cast<std::uint64_t>(st.st_blocks) * 512, expected.size() / 2);
  }
}

}  // namespace
}  // namespace tw::archive
