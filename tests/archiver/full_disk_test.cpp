// A real full disk under a running timewarp-archiver, then the space back, then a collection
// (FORMAT.md, "Collection"). The backup root is a small tmpfs, mounted for the test, that a
// filler file fills while the archiver writes: its requests then fail with the archive's
// full-disk answer (FAILED RETRY naming the file system's ENOSPC or SQLite's full database)
// in the middle of a pack (a torn tail), as a pack begins (an empty pack) and at the
// catalog's commit. Once the filler is gone the same requests succeed and every version
// restores byte for byte through `timewarp restore`; `timewarp gc` then leaves no empty pack
// and no pack longer than its last record, and `timewarp verify` is clean.
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "archive/format2/catalog.hpp"
#include "archive/format2/pack.hpp"
#include "archive_test_util.hpp"
#include "common/escape.hpp"
#include "support/test_support.hpp"

namespace tw::archive {
namespace {

using test::ArchiverProcess;
using test::fields;
using test::TempDir;

constexpr std::uint64_t kDiskBytes = 16 << 20;
// What the filler leaves free: room for about fifteen versions, so the disk fills a few
// rounds in, in the middle of a pack.
constexpr std::uint64_t kFreeLeft = 3 << 20;
// One blob per version (under the smallest chunk), stored as it is (it does not compress).
constexpr std::size_t kVersionBytes = 192 << 10;
constexpr int kFiles = 8;

std::string incompressible(std::size_t size, std::uint64_t seed) {
  std::independent_bits_engine<std::mt19937_64, 8, unsigned> byte(seed);
  std::string out(size, '\0');
  std::generate(out.begin(), out.end(), [&byte] { return static_cast<char>(byte()); });
  return out;
}

// An answer's fields, for a failure's message.
std::string shown(const std::vector<std::string>& answer) {
  return fmt::format("{}", fmt::join(answer, " | "));
}

// The message of a failed answer, as the archiver wrote it.
std::string message_of(const std::vector<std::string>& answer) {
  return answer.size() < 4 ? "" : unescape_bytes(answer[3]).value_or(answer[3]);
}

// SQLite's words for SQLITE_FULL: the catalog's commit met the full disk.
bool catalog_full(const std::vector<std::string>& answer) {
  return message_of(answer).find("database or disk is full") != std::string::npos;
}

// The archive's answer to a full disk: FAILED RETRY, naming ENOSPC from a write (a pack) or
// SQLite's SQLITE_FULL (the catalog's commit).
bool full_disk_answer(const std::vector<std::string>& answer) {
  if (answer.size() < 4 || answer[1] != "FAILED" || answer[2] != "RETRY") return false;
  return message_of(answer).find(std::strerror(ENOSPC)) != std::string::npos ||
         catalog_full(answer);
}

// A pack file as the disk holds it: its size, where its whole records end, and where its
// last record a commit names ends (from the catalog).
struct PackOnDisk {
  std::string file;
  std::uint64_t size = 0;
  std::uint64_t records_end = 0;    // 0: not even a whole first line
  std::uint64_t committed_end = 0;  // 0: no committed blob lives in it
};

std::vector<PackOnDisk> packs_on_disk(const std::string& archive) {
  std::map<std::string, std::uint64_t> committed_ends;
  auto catalog = Catalog::open(archive + "/catalog.db", OpenMode::ReadOnly);
  if (!catalog) {
    ADD_FAILURE() << catalog.error();
    return {};
  }
  auto blobs = catalog->all_blobs();
  if (!blobs) {
    ADD_FAILURE() << blobs.error();
    return {};
  }
  for (const auto& [id, ref] : *blobs) {
    auto& end = committed_ends[ref.pack];
    end = std::max(end, ref.offset + kBlobHeaderSize + ref.stored);
  }
  std::vector<PackOnDisk> out;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(archive + "/packs")) {
    if (!entry.is_regular_file() || entry.path().extension() != ".pack") continue;
    PackOnDisk pack{entry.path(), entry.file_size(), 0, committed_ends[entry.path().stem()]};
    const UniqueFd fd(::open(pack.file.c_str(), O_RDONLY | O_CLOEXEC));
    EXPECT_TRUE(fd) << pack.file;
    if (auto end = scan_pack(fd.get(), [](const BlobHeader&) {})) pack.records_end = *end;
    out.push_back(pack);
  }
  return out;
}

class FullDiskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(disk_);
    std::filesystem::create_directories(src_);
    const std::string options = fmt::format("size={},mode=0755", kDiskBytes);
    if (::mount("tmpfs", disk_.c_str(), "tmpfs", 0, options.c_str()) != 0) {
      const int err = errno;
      if (err == EPERM || err == EACCES) {
        GTEST_SKIP() << "mounting a tmpfs is not permitted here (it takes root with "
                        "CAP_SYS_ADMIN): "
                     << std::strerror(err);
      }
      FAIL() << "mounting a tmpfs on " << disk_ << ": " << std::strerror(err);
    }
    mounted_ = true;
  }

  // Detached even when the test failed with a file of the tmpfs still open.
  void TearDown() override {
    if (mounted_) ::umount2(disk_.c_str(), MNT_DETACH);
  }

  // `timewarp <args...>` on the archive (the built program); its exit code.
  int timewarp(std::vector<std::string> args, std::string* out = nullptr) {
    args.insert(args.begin(), {tw::test::cli_exe(), "--backup-root=" + archive_});
    return tw::test::run_command(args, out);
  }

  // Fills the tmpfs but for `left` bytes with a file of its own.
  void fill_disk_leaving(std::uint64_t left) {
    struct statvfs fs {};
    ASSERT_EQ(::statvfs(disk_.c_str(), &fs), 0);
    const std::uint64_t free = static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize;
    ASSERT_GT(free, left);
    const UniqueFd fd(::open(filler_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    ASSERT_TRUE(fd);
    ASSERT_EQ(::posix_fallocate(fd.get(), 0, static_cast<off_t>(free - left)), 0);
  }

  // Writes a new content to the `i`th source file and sends its UPDATE; the answer's fields.
  std::vector<std::string> new_version(ArchiverProcess& archiver, int i, int round) {
    const std::string path = source(i);
    tw::test::write_file(path, incompressible(kVersionBytes, round * 100 + i));
    return update(archiver, path);
  }

  std::vector<std::string> update(ArchiverProcess& archiver, const std::string& path) {
    const auto answer = archiver.request(fmt::format("{}\tUPDATE\t{}", ++id_, escape_bytes(path)));
    EXPECT_TRUE(answer) << "no answer to the UPDATE of " << path;
    std::vector<std::string> out = answer ? fields(*answer) : std::vector<std::string>{};
    out.resize(std::max<std::size_t>(out.size(), 2));  // the outcome, [1], is always there
    if (out[1] == "COMPLETE") versions_[path].push_back(tw::test::read_file(path));
    return out;
  }

  std::string source(int i) const { return src_ + fmt::format("/file {}", i); }

  // New versions, round after round, until the full disk has refused one of every file
  // with its full-disk answer; the files refused. A refused file keeps its content, for its
  // request to be sent again.
  std::set<int> archive_until_every_file_is_refused(ArchiverProcess& archiver) {
    std::set<int> refused;
    for (int round = 1; refused.size() < kFiles && round < 40; ++round) {
      for (int i = 0; i < kFiles; ++i) {
        if (refused.contains(i)) continue;
        const auto answer = new_version(archiver, i, round);
        if (answer[1] == "COMPLETE") continue;
        EXPECT_TRUE(full_disk_answer(answer)) << shown(answer);
        refused.insert(i);
      }
    }
    return refused;
  }

  std::vector<std::string> refused_paths(const std::set<int>& refused, const std::string& copy) {
    std::vector<std::string> out;
    for (const int i : refused) out.push_back(source(i));
    out.push_back(copy);
    return out;
  }

  // `timewarp gc` deletes the empty packs and cuts back the torn ones; then `timewarp verify`
  // is clean and every pack ends at its last committed record.
  void expect_clean_after_gc(std::size_t torn, std::size_t empty) {
    std::string out;
    ASSERT_EQ(timewarp({"gc", "--json"}, &out), 0) << out;
    const auto collected = nlohmann::json::parse(out);
    EXPECT_GE(collected["packs_deleted"].get<std::size_t>(), empty) << out;
    EXPECT_GE(collected["packs_truncated"].get<std::size_t>(), torn) << out;
    EXPECT_EQ(collected["packs_busy"].get<std::size_t>(), 0u) << out;
    EXPECT_EQ(timewarp({"verify"}, &out), 0) << out;
    EXPECT_TRUE(out.ends_with(": OK\n")) << out;
    EXPECT_EQ(out.find("empty packs"), std::string::npos) << out;
    EXPECT_EQ(out.find("not a readable pack"), std::string::npos) << out;
    const auto packs = packs_on_disk(archive_);
    EXPECT_FALSE(packs.empty());
    for (const auto& pack : packs) {
      EXPECT_GT(pack.committed_end, 0u) << pack.file << ": no committed blob lives in it";
      EXPECT_EQ(pack.size, pack.committed_end) << pack.file << " goes on past its last record";
    }
  }

  // Every archived version of every file, restored by `timewarp restore --version`, is the
  // content it was archived with.
  void expect_every_version_restores() {
    int restored = 0;
    for (const auto& [path, contents] : versions_) {
      for (std::size_t n = 0; n < contents.size(); ++n) {
        const std::string to = dir_ / fmt::format("restored/{}", ++restored);
        ASSERT_EQ(timewarp({"restore", path, "--version", std::to_string(n + 1), "--to", to}), 0)
            << path << " version " << n + 1;
        EXPECT_TRUE(tw::test::read_file(to) == contents[n]) << path << " version " << n + 1;
      }
    }
  }

  TempDir dir_;
  std::string disk_ = dir_ / "disk";  // the tmpfs
  std::string archive_ = disk_ + "/archive";
  std::string filler_ = disk_ + "/filler";
  std::string src_ = dir_ / "src";  // on the test's own disk
  bool mounted_ = false;
  std::int64_t id_ = 0;
  std::map<std::string, std::vector<std::string>> versions_;  // path: each version's content
};

TEST_F(FullDiskTest, RequestsRefusedByAFullDiskSucceedOnceSpaceIsBackAndGcLeavesItClean) {
  ArchiverProcess::Options options;
  options.args = {"--backup-root=" + archive_, "--log-level=error"};
  ArchiverProcess archiver(options);
  for (int i = 0; i < kFiles; ++i) ASSERT_EQ(new_version(archiver, i, 0)[1], "COMPLETE");
  fill_disk_leaving(kFreeLeft);
  const std::set<int> refused = archive_until_every_file_is_refused(archiver);
  ASSERT_EQ(refused.size(), static_cast<std::size_t>(kFiles));
  // A new path holding a content the archive has: no byte for a pack, only the catalog's
  // commit, whose journal frames need room the full disk no longer has (the journal has not
  // reached a checkpoint since the archive was made, so it only grows).
  const std::string copy = src_ + "/copy";
  tw::test::write_file(copy, versions_[source(0)].front());
  const auto copied = update(archiver, copy);
  EXPECT_TRUE(full_disk_answer(copied) && catalog_full(copied)) << shown(copied);

  // The full disk cut a pack short after its last committed record, and left packs it could
  // not write a first line to.
  std::size_t torn = 0;
  std::size_t empty = 0;
  for (const auto& pack : packs_on_disk(archive_)) {
    torn += pack.committed_end > 0 && pack.records_end < pack.size ? 1 : 0;
    empty += pack.size < kPackMagic.size() ? 1 : 0;
  }
  EXPECT_GE(torn, 1u);
  EXPECT_GE(empty, 2u);

  // Space back: every refused request, sent again, is stored; archiving goes on.
  ASSERT_EQ(::unlink(filler_.c_str()), 0);
  bool first = true;
  for (const std::string& path : refused_paths(refused, copy)) {
    auto answer = update(archiver, path);
    // The group open when the catalog's commit failed was lost with it (FORMAT.md, "Group
    // commit and durability": so is every group closed after a failed one), and the first
    // request after the space came back was staged in it: it is sent again, as the scheduler
    // sends a FAILED RETRY.
    if (std::exchange(first, false) && catalog_full(answer)) answer = update(archiver, path);
    EXPECT_EQ(answer[1], "COMPLETE") << shown(answer);
  }
  for (int i = 0; i < kFiles; ++i) EXPECT_EQ(new_version(archiver, i, 100)[1], "COMPLETE");
  archiver.close_stdin();
  EXPECT_EQ(archiver.wait(), 0);

  // Before the collection verify counts the empty packs as reclaimable, not damage.
  std::string out;
  EXPECT_EQ(timewarp({"verify"}, &out), 0) << out;
  EXPECT_NE(out.find(fmt::format("; {} empty packs", empty)), std::string::npos) << out;
  expect_clean_after_gc(torn, empty);
  expect_every_version_restores();
}

}  // namespace
}  // namespace tw::archive
