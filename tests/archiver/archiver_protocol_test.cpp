// The real timewarp-archiver process over its pipes: answers for good, bad and awkward
// requests, --null, EOF, SIGTERM, and SIGINT (ignored).
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <filesystem>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "archive_test_util.hpp"
#include "archive/store.hpp"
#include "common/escape.hpp"

namespace tw::archive {
namespace {

using namespace std::chrono_literals;
using test::ArchiverProcess;
using test::fields;
using test::TempDir;
using test::write_file;

class ArchiverProtocolTest : public ::testing::Test {
 protected:
  ArchiverProcess::Options options(std::vector<std::string> extra = {}) {
    ArchiverProcess::Options o;
    o.args = {"--backup-root=" + archive_, "--log-level=warn"};
    o.args.insert(o.args.end(), extra.begin(), extra.end());
    return o;
  }
  static std::string line(std::int64_t id, std::string_view op, const std::string& raw_path) {
    return fmt::format("{}\t{}\t{}", id, op, escape_bytes(raw_path));
  }
  // The fields of the response, checking the id and the status.
  static std::vector<std::string> expect_answer(const std::optional<std::string>& response,
                                                const std::string& id, const std::string& status) {
    EXPECT_TRUE(response.has_value()) << "no response";
    if (!response) return {};
    auto f = fields(*response);
    EXPECT_EQ(f.size(), 4u) << *response;
    if (f.size() != 4) return {};
    EXPECT_EQ(f[0], id) << *response;
    EXPECT_EQ(f[1] + " " + (f[1] == "FAILED" ? f[2] : std::string()), status) << *response;
    return f;
  }

  // Sends request 1, an UPDATE of a sparse file of `size` bytes (seconds of work), and
  // waits until the archiver is busy writing its content (format 1: a temporary file
  // appears; format 2: a pack).
  void start_sparse_update(ArchiverProcess& archiver, off_t size) {
    const std::string big = dir_ / "big";
    write_file(big, "");
    ASSERT_EQ(::truncate(big.c_str(), size), 0);
    ASSERT_TRUE(archiver.send(line(1, "UPDATE", big)));
    ASSERT_TRUE(test::wait_until(
        [&] {
          std::error_code ec;
          const auto busy = [&](const std::string& dir) {
            return std::filesystem::exists(dir, ec) && !std::filesystem::is_empty(dir, ec);
          };
          return busy(archive_ + "/tmp") || busy(archive_ + "/packs");
        },
        30s));
  }

  TempDir dir_;
  std::string archive_ = dir_ / "archive";
};

TEST_F(ArchiverProtocolTest, ArchivesAwkwardNamesSentEscaped) {
  ArchiverProcess archiver(options());
  const std::vector<std::string> names = {"with space", "tab\there", "new\nline", "100%",
                                          "\xff\xfe",   "-rf",       "%41",       "caf\xc3\xa9"};
  std::int64_t id = 1;
  for (const auto& name : names) {
    const std::string path = dir_ / ("src/" + name);
    write_file(path, "content of " + name);
    auto f =
        expect_answer(archiver.request(line(id, "UPDATE", path)), std::to_string(id), "COMPLETE ");
    ++id;
    if (f.size() == 4) {
      EXPECT_GT(std::stoull(f[2]), 0u);
    }
  }
  archiver.close_stdin();
  EXPECT_EQ(archiver.wait(), 0);
  auto store = Store::open(archive_, Store::Mode::ReadOnly);
  ASSERT_TRUE(store) << store.error();
  for (const auto& name : names) {
    const std::string path = dir_ / ("src/" + name);
    RestoreOptions o;
    o.destination = dir_ / fmt::format("out/{}", escape_bytes(name).size());
    std::filesystem::remove(o.destination);
    auto report = store->restore(path, o);
    ASSERT_TRUE(report) << report.error();
    EXPECT_EQ(test::compare_files(path, o.destination), "") << escape_bytes(name);
  }
}

TEST_F(ArchiverProtocolTest, CompleteCarriesBytesAndCpu) {
  ArchiverProcess archiver(options());
  std::string big;
  for (int i = 0; big.size() < (8u << 20); ++i) big += fmt::format("{:x}", i * 2654435761u);
  write_file(dir_ / "src/big", big);
  auto f = expect_answer(archiver.request(line(7, "UPDATE", dir_ / "src/big")), "7", "COMPLETE ");
  ASSERT_EQ(f.size(), 4u);
  EXPECT_GT(std::stoull(f[2]), 1000u);
  EXPECT_GT(std::stoull(f[3]), 0u) << "8 MiB cannot be hashed and compressed in no CPU time";
  f = expect_answer(archiver.request(line(8, "UPDATE", dir_ / "src/big")), "8", "COMPLETE ");
  ASSERT_EQ(f.size(), 4u);
  EXPECT_EQ(f[2], "0") << "an unchanged file adds nothing";
}

TEST_F(ArchiverProtocolTest, AQuietArchiveKeepsNoJournalBesideItsCatalog) {
  ArchiverProcess archiver(options());
  for (int i = 1; i <= 20; ++i) {
    write_file(dir_ / fmt::format("src/f{}", i), fmt::format("content {}", i));
    expect_answer(archiver.request(line(i, "UPDATE", dir_ / fmt::format("src/f{}", i))),
                  std::to_string(i), "COMPLETE ");
  }
  // Still running, and quiet: within a few seconds the journal is folded in and emptied.
  const std::string wal = archive_ + "/catalog.db-wal";
  EXPECT_TRUE(test::wait_until(
      [&] {
        std::error_code ec;
        return std::filesystem::file_size(wal, ec) == 0 && !ec;
      },
      10s))
      << std::filesystem::file_size(wal);
  auto store = Store::open(archive_, Store::Mode::ReadOnly);
  ASSERT_TRUE(store) << store.error();
  auto versions = store->versions(dir_ / "src/f20");
  ASSERT_TRUE(versions) << versions.error();
  EXPECT_EQ(versions->size(), 1u);
  archiver.close_stdin();
  EXPECT_EQ(archiver.wait(), 0);
}

TEST_F(ArchiverProtocolTest, CompressionKeysReachTheStore) {
  std::string text;
  for (int i = 0; text.size() < (6u << 20); ++i) text += fmt::format("{:x} {}\n", i % 3000, i);
  write_file(dir_ / "src/text", text);
  std::vector<std::uint64_t> added;
  for (const char* level : {"-7", "19"}) {
    archive_ = dir_ / fmt::format("archive{}", level);
    ArchiverProcess archiver(
        options({fmt::format("--compression-level={}", level), "--compression-threads=2"}));
    auto f =
        expect_answer(archiver.request(line(1, "UPDATE", dir_ / "src/text")), "1", "COMPLETE ");
    ASSERT_EQ(f.size(), 4u);
    added.push_back(std::stoull(f[2]));
    archiver.close_stdin();
    EXPECT_EQ(archiver.wait(), 0);
    auto store = Store::open(archive_, Store::Mode::ReadOnly);
    ASSERT_TRUE(store) << store.error();
    EXPECT_TRUE(store->verify().ok());
  }
  EXPECT_LT(added[1], added[0]) << "level 19 stores fewer bytes than level -7";
}

TEST_F(ArchiverProtocolTest, BadRequestsGetPermanentFailuresAndNeverACrash) {
  ArchiverProcess archiver(options());
  struct Case {
    std::string request;
    std::string id;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {"abc\tUPDATE\t/x", "0", "bad item id"},
      {"", "0", "bad item id"},
      {"-5\tUPDATE\t/x", "0", "bad item id"},
      {"5\tFROB\t/x", "5", "unknown op"},
      {"6\tUPDATE", "6", "expected"},
      {"7\tMOVE\t/a", "7", "MOVE takes 4 fields"},
      {"8\tUPDATE\t/a\t/b", "8", "UPDATE takes 3 fields"},
      {"9\tUPDATE\trelative/path", "9", "relative path"},
      {"10\tUPDATE\t/a%zz", "10", "badly escaped"},
      {"11\tUPDATE\t", "11", "empty path"},
      {"12\tUPDATE\t/a/../b", "12", ".."},
      {"13\tMOVE\t/a\tnot/absolute", "13", "relative path"},
      {std::string("14\tUPDATE\t/nul\0byte", 19), "14", ""},
      {"99999999999999999999\tUPDATE\t/x", "0", "bad item id"},
      {"\xff\xfe\t\x01", "0", "bad item id"},
  };
  for (const auto& c : cases) {
    auto f = expect_answer(archiver.request(c.request), c.id, "FAILED PERMANENT");
    if (f.size() == 4) {
      EXPECT_NE(f[3].find(c.needle), std::string::npos) << f[3];
    }
  }
  // A line longer than 1 MiB, then a good request: still answered in order.
  auto f = expect_answer(archiver.request("15\tUPDATE\t/" + std::string(3 << 20, 'x')), "15",
                         "FAILED PERMANENT");
  if (f.size() == 4) {
    EXPECT_NE(f[3].find("longer than"), std::string::npos) << f[3];
  }
  write_file(dir_ / "ok", "ok");
  expect_answer(archiver.request(line(16, "UPDATE", dir_ / "ok")), "16", "COMPLETE ");
  archiver.close_stdin();
  EXPECT_EQ(archiver.wait(), 0);
}

TEST_F(ArchiverProtocolTest, AnOverlongLineRunsNothing) {
  // A directory whose path fills the line's first 64 bytes exactly, archived with a file.
  const std::string prefix = "9\tDELETE\t";
  std::string dir = dir_ / "d";
  ASSERT_LT(prefix.size() + dir.size(), 63u) << "temporary directory path too long";
  dir += "/" + std::string(64 - prefix.size() - dir.size() - 1, 'p');
  ASSERT_EQ(prefix.size() + dir.size(), 64u);
  write_file(dir + "/x", "keep me");
  ArchiverProcess archiver(options());
  expect_answer(archiver.request(line(1, "UPDATE", dir)), "1", "COMPLETE ");
  expect_answer(archiver.request(line(2, "UPDATE", dir + "/x")), "2", "COMPLETE ");
  std::filesystem::remove_all(dir);  // only a request naming `dir` would tombstone it now
  // A request for a path beneath it, over 1 MiB long: refused whole, nothing run.
  auto f = expect_answer(archiver.request(prefix + dir + "/" + std::string(2 << 20, 'q')), "9",
                         "FAILED PERMANENT");
  if (f.size() == 4) {
    EXPECT_NE(f[3].find("longer than"), std::string::npos) << f[3];
  }
  archiver.close_stdin();
  EXPECT_EQ(archiver.wait(), 0);
  auto store = Store::open(archive_, Store::Mode::ReadOnly);
  ASSERT_TRUE(store);
  EXPECT_EQ(store->versions(dir)->size(), 1u) << "the line's first 64 bytes were run";
  EXPECT_EQ(store->versions(dir + "/x")->size(), 1u) << "the line's first 64 bytes were run";
}

TEST_F(ArchiverProtocolTest, AbsentPathsAndSpecialFiles) {
  ArchiverProcess archiver(options());
  // A path that does not exist is reconciled like any other: nothing archived, COMPLETE.
  for (const char* op : {"UPDATE", "STAT"}) {
    expect_answer(archiver.request(line(1, op, dir_ / "gone")), "1", "COMPLETE ");
  }
  expect_answer(archiver.request(line(2, "UPDATE", dir_ / "no/such/dir/file")), "2", "COMPLETE ");
  std::vector<std::string> f;
  const std::string fifo = dir_ / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  expect_answer(archiver.request(line(3, "UPDATE", fifo)), "3", "FAILED PERMANENT");
  const std::string sock = dir_ / "sock";
  const int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un addr {};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", sock.c_str());
  ASSERT_EQ(::bind(s, reinterpret_cast<struct sockaddr*>(&addr), sizeof addr), 0);
  f = expect_answer(archiver.request(line(4, "UPDATE", sock)), "4", "FAILED PERMANENT");
  if (f.size() == 4) {
    EXPECT_NE(f[3].find("socket"), std::string::npos);
  }
  ::close(s);
  expect_answer(archiver.request(line(5, "UPDATE", "/dev/null")), "5", "FAILED PERMANENT");
  // DELETE and MOVE of unknown paths are fine (nothing to record).
  expect_answer(archiver.request(line(6, "DELETE", dir_ / "gone")), "6", "COMPLETE ");
}

// Files of /proc and /sys are the kernel talking, not data: their sizes are made up and
// their contents change between two reads. They are refused for good, naming the
// filesystem, instead of spending every attempt on FAILED RETRY.
TEST_F(ArchiverProtocolTest, PseudoFilesystemPathsArePermanentFailures) {
  ArchiverProcess archiver(options());
  std::vector<std::pair<std::string, std::string>> paths = {
      {"/proc/version", "proc"},
      {fmt::format("/proc/{}/status", ::getpid()), "proc"},
      {"/proc/sys/kernel", "proc"},  // a directory
  };
  for (const char* sys :
       {"/sys/kernel/address_bits", "/sys/kernel/mm/transparent_hugepage/enabled", "/sys/kernel"}) {
    if (::access(sys, F_OK) == 0) paths.emplace_back(sys, "sysfs");
  }
  ASSERT_GT(paths.size(), 3u) << "no /sys here";
  std::int64_t id = 1;
  for (const auto& [path, filesystem] : paths) {
    for (const char* op : {"UPDATE", "STAT"}) {
      const auto f = expect_answer(archiver.request(line(id, op, path)), std::to_string(id),
                                   "FAILED PERMANENT");
      if (f.size() == 4) {
        EXPECT_EQ(f[3], fmt::format("on the pseudo filesystem {}, not data: {}", filesystem,
                                    escape_bytes(path)));
      }
      ++id;
    }
  }
  archiver.close_stdin();
  EXPECT_EQ(archiver.wait(), 0);
  auto store = Store::open(archive_, Store::Mode::ReadOnly);
  ASSERT_TRUE(store) << store.error();
  for (const auto& [path, filesystem] : paths) {
    auto versions = store->versions(path);
    EXPECT_TRUE(!versions || versions->empty()) << path << " has versions in the archive";
  }
}

TEST_F(ArchiverProtocolTest, PermissionDeniedIsPermanent) {
  // Root reads anything, so the archiver runs as nobody (65534) for this test.
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to start the archiver as another user";
  const std::string locked = dir_ / "locked";
  write_file(locked + "/file", "secret");
  write_file(dir_ / "unreadable", "secret", 0000);
  ASSERT_EQ(::chmod(locked.c_str(), 0000), 0);
  ASSERT_EQ(::chmod(dir_.path().c_str(), 0755), 0);
  std::filesystem::create_directories(archive_);
  ASSERT_EQ(::chown(archive_.c_str(), 65534, 65534), 0);
  auto o = options();
  o.run_as = 65534;
  ArchiverProcess archiver(o);
  for (const std::string& path : {locked + "/file", dir_ / "unreadable"}) {
    auto f = expect_answer(archiver.request(line(1, "UPDATE", path)), "1", "FAILED PERMANENT");
    if (f.size() == 4) {
      EXPECT_NE(f[3].find("Permission denied"), std::string::npos) << f[3];
    }
  }
  archiver.close_stdin();
  EXPECT_EQ(archiver.wait(), 0);
}

TEST_F(ArchiverProtocolTest, NullModeAnswersCompleteWithoutTouchingFiles) {
  ArchiverProcess::Options o;
  o.args = {"--null"};
  ArchiverProcess archiver(o);
  auto f = expect_answer(archiver.request(line(3, "UPDATE", dir_ / "does-not-matter")), "3",
                         "COMPLETE ");
  if (f.size() == 4) {
    EXPECT_EQ(f[2], "0");
    EXPECT_EQ(f[3], "0");
  }
  expect_answer(archiver.request("4\tMOVE\t/a\t/b"), "4", "COMPLETE ");
  expect_answer(archiver.request("x\tUPDATE\t/a"), "0", "FAILED PERMANENT");
  archiver.close_stdin();
  EXPECT_EQ(archiver.wait(), 0);
  EXPECT_FALSE(std::filesystem::exists(archive_));
}

TEST_F(ArchiverProtocolTest, NeedsABackupRootUnlessNull) {
  ArchiverProcess::Options o;
  o.args = {};
  o.env = {{"BACKUP_ROOT", ""}};
  ArchiverProcess archiver(o);
  EXPECT_EQ(archiver.wait(), 2);
}

TEST_F(ArchiverProtocolTest, ExitsAtEofAndPromptlyOnSigterm) {
  {
    ArchiverProcess archiver(options());
    archiver.close_stdin();
    EXPECT_EQ(archiver.wait(10s), 0);
  }
  ArchiverProcess archiver(options());
  write_file(dir_ / "f", "f");
  expect_answer(archiver.request(line(1, "UPDATE", dir_ / "f")), "1", "COMPLETE ");
  archiver.kill(SIGTERM);  // idle, blocked reading stdin
  EXPECT_EQ(archiver.wait(5s), 0);
}

// A Ctrl-C in a terminal reaches the archivers too (same process group); only the
// scheduler's STOP (EOF on stdin) or SIGTERM may end them.
TEST_F(ArchiverProtocolTest, IgnoresSigintWhileIdle) {
  ArchiverProcess archiver(options());
  write_file(dir_ / "f", "one");
  expect_answer(archiver.request(line(1, "UPDATE", dir_ / "f")), "1", "COMPLETE ");
  archiver.kill(SIGINT);  // idle, blocked reading stdin
  write_file(dir_ / "f", "two");
  expect_answer(archiver.request(line(2, "UPDATE", dir_ / "f")), "2", "COMPLETE ");
  archiver.kill(SIGINT);
  archiver.kill(SIGINT);
  write_file(dir_ / "f", "three");
  expect_answer(archiver.request(line(3, "UPDATE", dir_ / "f")), "3", "COMPLETE ");
  EXPECT_FALSE(archiver.wait(200ms).has_value()) << "exited after SIGINT";
  archiver.kill(SIGTERM);
  EXPECT_EQ(archiver.wait(5s), 0);
  auto store = Store::open(archive_, Store::Mode::ReadOnly);
  ASSERT_TRUE(store) << store.error();
  auto versions = store->versions(dir_ / "f");
  ASSERT_TRUE(versions) << versions.error();
  EXPECT_EQ(versions->size(), 3u);

  ArchiverProcess second(options());
  write_file(dir_ / "g", "g");
  expect_answer(second.request(line(4, "UPDATE", dir_ / "g")), "4", "COMPLETE ");  // started
  second.kill(SIGINT);
  expect_answer(second.request(line(5, "DELETE", dir_ / "f")), "5", "COMPLETE ");
  second.close_stdin();
  EXPECT_EQ(second.wait(5s), 0) << "EOF still ends it";
}

TEST_F(ArchiverProtocolTest, SigintDuringALargeFileDoesNotCancelIt) {
  ArchiverProcess archiver(options());
  ASSERT_NO_FATAL_FAILURE(start_sparse_update(archiver, off_t{1} << 30));
  archiver.kill(SIGINT);
  expect_answer(archiver.read_line(), "1", "COMPLETE ");
  archiver.close_stdin();
  EXPECT_EQ(archiver.wait(10s), 0);
  auto store = Store::open(archive_, Store::Mode::ReadOnly);
  ASSERT_TRUE(store) << store.error();
  EXPECT_TRUE(store->verify().ok());
}

TEST_F(ArchiverProtocolTest, SigtermDuringALargeFileStopsPromptlyAndLeavesASoundArchive) {
  ArchiverProcess archiver(options());
  ASSERT_NO_FATAL_FAILURE(start_sparse_update(archiver, off_t{4} << 30));
  archiver.kill(SIGTERM);
  EXPECT_EQ(archiver.wait(5s), 0) << "did not stop within 5 s";
  auto store = Store::open(archive_, Store::Mode::ReadOnly);
  ASSERT_TRUE(store);
  EXPECT_TRUE(store->verify().ok());
}

}  // namespace
}  // namespace tw::archive
