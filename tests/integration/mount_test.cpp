// `timewarp mount` (cli/mount_command.hpp) on a real archive: the real program is started as
// a child, and what it shows under latest/, at/<instant>/ and versions/ is compared, byte for
// byte and in metadata, with a restore of the same moment; then it is unmounted under load by
// SIGTERM, by fusermount3 -u and by umount. The format-1 archive of tests/data is mounted and
// compared with its restore likewise. Needs root and /dev/fuse (skipped otherwise).
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "archive/store.hpp"
#include "common/time.hpp"
#include "objstore/gateway.hpp"
#include "objstore/pack_store.hpp"
#include "support/test_support.hpp"
#include "support/tree_snapshot.hpp"

extern char** environ;

namespace tw::test {
namespace {

namespace fs = std::filesystem;
namespace ar = tw::archive;
using namespace std::chrono_literals;

constexpr std::uint64_t kBig = 1ULL << 30;
// The archive's clock: the first versions at t1, the second an hour later.
constexpr std::int64_t kT1 = 1'790'000'000LL * kNsPerSecond;
constexpr std::int64_t kT2 = kT1 + 3600 * kNsPerSecond;
const std::string kNewline = "new\nline";
const std::string kBadUtf8 = "bad\xff\xfe";

std::string random_bytes(std::size_t n, unsigned seed) {
  std::mt19937_64 gen(seed);
  std::string out(n, '\0');
  for (auto& c : out) c = static_cast<char>(gen());
  return out;
}

void write_at(const fs::path& file, std::uint64_t offset, const std::string& bytes) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset)),
            static_cast<ssize_t>(bytes.size()));
  ::close(fd);
}

void set_mtime(const fs::path& p, std::int64_t ns) {
  const struct timespec times[2] = {ns_timespec(ns), ns_timespec(ns)};
  ASSERT_EQ(::utimensat(AT_FDCWD, p.c_str(), times, AT_SYMLINK_NOFOLLOW), 0) << p;
}

// The program `name` as found in the usual folders (run_command takes no PATH search).
std::string program(const std::string& name) {
  for (const char* dir : {"/usr/bin", "/bin", "/usr/sbin", "/sbin"}) {
    const std::string file = fmt::format("{}/{}", dir, name);
    if (::access(file.c_str(), X_OK) == 0) return file;
  }
  return name;
}

// Whether `dir` is a FUSE mount now (/proc/self/mountinfo).
bool fuse_mounted(const fs::path& dir) {
  std::ifstream info("/proc/self/mountinfo");
  std::string line;
  while (std::getline(info, line)) {
    if (line.find(" " + dir.string() + " ") != std::string::npos &&
        line.find(" - fuse") != std::string::npos) {
      return true;
    }
  }
  return false;
}

// The source tree: names with a newline and invalid UTF-8, links (one dangling), an empty
// file, a sparse 1 GiB file with random stretches, nested folders, owners and modes.
void make_tree(const fs::path& root) {
  fs::create_directories(root / "a/b/c");
  write_file(root / "plain.txt", "first\n");
  write_file(root / kNewline, "a name with a newline\n");
  write_file(root / kBadUtf8, "a name that is not UTF-8\n");
  write_file(root / "empty", "");
  write_file(root / "a/b/c/deep.txt", random_bytes(5000, 1));
  fs::create_symlink("plain.txt", root / "link");
  fs::create_symlink("nowhere/at/all", root / "dangling");
  ASSERT_EQ(::chown((root / "a/b/c/deep.txt").c_str(), 1234, 5678), 0);
  ASSERT_EQ(::chmod((root / "a/b").c_str(), 0750), 0);
  ASSERT_EQ(::chmod((root / kNewline).c_str(), 0600), 0);
  const fs::path big = root / "big.bin";
  write_at(big, 0, random_bytes(3 << 20, 2));
  write_at(big, (300ULL << 20) + 7, random_bytes(5 << 20, 3));
  write_at(big, kBig - (1 << 20), random_bytes(1 << 20, 4));
}

// The second state: a file and the big one changed, a link retargeted, a file removed.
void change_tree(const fs::path& root) {
  write_file(root / "plain.txt", "second, longer\n");
  write_at(root / "big.bin", 100ULL << 20, random_bytes(2 << 20, 5));
  fs::remove(root / "link");
  fs::create_symlink(kNewline, root / "link");
  fs::remove(root / "empty");
}

// Archives every folder of `root` (and what is in it) with the archive's clock at `at_ns`.
void archive_tree(const fs::path& archive, const fs::path& root, std::int64_t at_ns) {
  ar::StoreHooks hooks;
  hooks.now = [at_ns] { return at_ns; };
  auto store = ar::Store::open(archive.string(), ar::Store::Mode::ReadWrite, hooks);
  ASSERT_TRUE(store) << store.error();
  std::vector<fs::path> dirs = {root};
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (e.is_directory() && !e.is_symlink()) dirs.push_back(e.path());
  }
  for (const auto& dir : dirs) {
    const auto result = store->scan(dir.string());
    ASSERT_EQ(result.outcome, Outcome::Complete) << dir << ": " << result.message;
  }
}

// An archive in dir_/archive of the tree tree_, mounted at mnt_ by the real program.
class MountFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0 || ::access("/dev/fuse", R_OK | W_OK) != 0) {
      GTEST_SKIP() << "timewarp mount needs root and /dev/fuse";
    }
  }

  void TearDown() override {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (fuse_mounted(mnt_)) run_command({program("fusermount3"), "-u", "-z", mnt_.string()});
  }

  // Starts `timewarp mount` of the backup root (or with `from` the archive it names) and
  // waits (bounded) until the mount is there.
  void mount(std::vector<std::string> from = {}) {
    if (from.empty()) from = {"--backup-root", (dir_ / "archive").string()};
    std::vector<std::string> args = {cli_exe(), "mount", mnt_.string()};
    args.insert(args.end(), from.begin(), from.end());
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ASSERT_EQ(::posix_spawn(&pid_, argv[0], nullptr, nullptr, argv.data(), environ), 0);
    ASSERT_TRUE(wait_until([&] { return fuse_mounted(mnt_); }, 20s)) << "not mounted";
  }

  // Waits (bounded) for the mount process to exit: its exit code, or -1.
  int wait_exit() {
    int status = 0;
    const bool exited = wait_until([&] { return ::waitpid(pid_, &status, WNOHANG) == pid_; }, 30s);
    if (!exited) return -1;
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  // What a restore of the tree at `which` gives, as a snapshot.
  // (A file goes into a new folder `name`, under its own name.)
  TreeSnapshot restored(const ar::VersionSelector& which, const std::string& name,
                        const fs::path& path = {}) {
    auto store = ar::Store::open((dir_ / "archive").string(), ar::Store::Mode::ReadOnly);
    EXPECT_TRUE(store) << store.error();
    ar::RestoreOptions options;
    options.which = which;
    options.destination = (dir_ / name).string();
    if (!path.empty()) fs::create_directories(dir_ / name);
    options.restore_owner = true;
    const auto report = store->restore((path.empty() ? tree_ : path).string(), options);
    EXPECT_TRUE(report) << report.error();
    EXPECT_TRUE(report->problems.empty());
    return snapshot_tree(dir_ / name);
  }

  // The names in versions/<file>/, in order, each checked to be a file named by its time
  // and number (…v1, …v2, …) that is, in content and metadata, what a restore of that
  // version of `file` gives.
  std::vector<std::string> versions_as_restored(const fs::path& file) {
    std::vector<std::string> names;
    const fs::path history = mnt_ / "versions" / file.relative_path();
    for (const auto& e : fs::directory_iterator(history)) names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    const TreeSnapshot shown = snapshot_tree(history);
    for (std::uint64_t number = 1; number <= names.size(); ++number) {
      const std::string& name = names[number - 1];
      EXPECT_TRUE(name.ends_with(fmt::format(".v{}", number))) << name;
      const TreeSnapshot one = restored({number, std::nullopt}, fmt::format("v{}", number), file);
      const auto& entry = shown.at(name);
      const auto& want = one.at(file.filename());
      EXPECT_EQ(entry.type, want.type);
      EXPECT_EQ(entry.digest, want.digest);
      EXPECT_EQ(entry.size, want.size);
      EXPECT_EQ(entry.mode, want.mode);
      EXPECT_EQ(entry.mtime_ns, want.mtime_ns);
      EXPECT_EQ(entry.uid, want.uid);
      EXPECT_EQ(entry.gid, want.gid);
    }
    return names;
  }

  TempDir dir_;
  fs::path tree_;
  fs::path mnt_ = dir_ / "mnt";
  pid_t pid_ = -1;
};

// The tree of make_tree archived at kT1, changed by change_tree and archived again at kT2.
class MountTest : public MountFixture {
 protected:
  void SetUp() override {
    MountFixture::SetUp();
    if (IsSkipped()) return;
    tree_ = dir_ / "src/tree";
    make_tree(tree_);
    for (const auto& e : fs::recursive_directory_iterator(tree_)) set_mtime(e.path(), kT1 - 5);
    set_mtime(tree_, kT1 - 5);
    archive_tree(dir_ / "archive", tree_, kT1);
    change_tree(tree_);
    set_mtime(tree_ / "plain.txt", kT2 - 7);
    archive_tree(dir_ / "archive", tree_, kT2);
    fs::create_directories(mnt_);
  }
};

// An archive in the first releases' layout (archive/FORMAT.md), read only: the one
// tests/archiver/compat_test.cpp reads, unpacked the same way. Its tree was archived at
// kFormat1Source: notes.txt in two versions, a name with a tab and invalid UTF-8, a link,
// dir/sub/deep.txt, and dir/gone.txt, since deleted.
const std::string kFormat1Source = "/timewarp-fixture/src";

class MountFormat1Test : public MountFixture {
 protected:
  void SetUp() override {
    MountFixture::SetUp();
    if (IsSkipped()) return;
    const std::string command = fmt::format("tar -xzf '{}/format1-archive.tar.gz' -C '{}'",
                                            TW_TEST_DATA_DIR, dir_.path().string());
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
    tree_ = kFormat1Source;
    fs::create_directories(mnt_);
  }
};

TEST_F(MountFormat1Test, ShowsTheOldArchiveAsRestoreDoes) {
  mount();
  const fs::path latest_dir = mnt_ / "latest" / tree_.relative_path();
  const TreeSnapshot latest = snapshot_tree(latest_dir);
  EXPECT_EQ(diff_trees(restored({}, "now"), latest), "");
  const std::string notes_now = "first version\nsecond version, longer\n";
  EXPECT_EQ(read_file(latest_dir / "notes.txt"), notes_now);
  EXPECT_EQ(read_file(latest_dir / "odd\tname %\xff.txt"), "tab\there");
  EXPECT_EQ(read_file(latest_dir / "dir/sub/deep.txt"), "deep\n");
  ASSERT_EQ(latest.count("link"), 1U);
  EXPECT_EQ(latest.at("link").digest, "notes.txt");
  EXPECT_EQ(latest.count("dir/gone.txt"), 0U);

  const std::vector<std::string> names = versions_as_restored(tree_ / "notes.txt");
  ASSERT_EQ(names.size(), 2U);
  const fs::path history = mnt_ / "versions" / tree_.relative_path() / "notes.txt";
  EXPECT_EQ(read_file(history / names[0]), "first version\n");
  EXPECT_EQ(read_file(history / names[1]), notes_now);

  ASSERT_EQ(::kill(pid_, SIGTERM), 0);
  EXPECT_EQ(wait_exit(), 0);
  EXPECT_FALSE(fuse_mounted(mnt_));
}

// The archive shipped to the S3 gateway, the backup root deleted: mounted from the bucket
// alone (`--from-store`), latest/ and at/ show what restore from the backup root showed.
TEST_F(MountTest, FromTheStoreShowsWhatTheBackupRootShowed) {
  if (!objstore::store_configured()) GTEST_SKIP() << "TW_S3_ENDPOINT is not set";
  const std::int64_t between = (kT1 + kT2) / 2;
  const TreeSnapshot now = restored({}, "now");
  const TreeSnapshot then = restored({std::nullopt, between}, "then");
  const objstore::BucketConfig store = objstore::fresh_bucket().config();
  {
    auto writer = ar::Store::open((dir_ / "archive").string(), ar::Store::Mode::ReadWrite);
    ASSERT_TRUE(writer) << writer.error();
    auto bucket = objstore::Bucket::open(store);
    ASSERT_TRUE(bucket) << bucket.error();
    objstore::BucketPackStore packs(std::move(*bucket), "mounted-host");
    ar::ShipReport report;
    ASSERT_TRUE(writer->ship(packs, report));
  }
  fs::remove_all(dir_ / "archive");
  mount({"--from-store", "--store-endpoint=" + store.endpoint, "--store-bucket=" + store.bucket,
         "--store-prefix=mounted-host", "--store-region=" + store.region,
         "--store-access-key=" + store.access_key, "--store-secret-key=" + store.secret_key,
         "--cache-dir=" + (dir_ / "cache").string(), "--cache-size=67108864"});
  EXPECT_EQ(diff_trees(now, snapshot_tree(mnt_ / "latest" / tree_.relative_path())), "");
  const std::string instant = std::to_string(between / kNsPerSecond);
  EXPECT_EQ(diff_trees(then, snapshot_tree(mnt_ / "at" / instant / tree_.relative_path())), "");
  ASSERT_EQ(::kill(pid_, SIGTERM), 0);
  EXPECT_EQ(wait_exit(), 0);
}

TEST_F(MountTest, ShowsLatestAnInstantAndVersionsAsRestoreDoes) {
  mount();
  const auto started = std::chrono::steady_clock::now();
  const TreeSnapshot latest = snapshot_tree(mnt_ / "latest" / tree_.relative_path());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::cout << fmt::format("latest/ walked and read ({} GiB file included) in {:.2f} s\n",
                           kBig >> 30, seconds);
  EXPECT_EQ(diff_trees(restored({}, "now"), latest), "");
  {
    // What reading the 1 GiB file costs through the mount (its pages not cached: latest/).
    const fs::path big = mnt_ / "latest" / tree_.relative_path() / "big.bin";
    const int fd = ::open(big.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    std::vector<char> buffer(1 << 20);
    std::uint64_t total = 0;
    const auto from = std::chrono::steady_clock::now();
    for (ssize_t n = 0; (n = ::read(fd, buffer.data(), buffer.size())) > 0;) total += n;
    const double spent =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - from).count();
    ::close(fd);
    EXPECT_EQ(total, kBig);
    std::cout << fmt::format("1 GiB read through the mount in {:.2f} s ({:.0f} MiB/s)\n", spent,
                             1024 / spent);
  }
  ASSERT_EQ(latest.count(kNewline), 1U);
  ASSERT_EQ(latest.count(kBadUtf8), 1U);
  EXPECT_EQ(latest.count("empty"), 0U);
  EXPECT_EQ(latest.at("big.bin").size, kBig);
  EXPECT_EQ(latest.at("dangling").digest, "nowhere/at/all");
  EXPECT_EQ(latest.at("a/b/c/deep.txt").uid, 1234U);

  // Between the two versions, typed as Unix seconds: the first state, the empty file in it.
  const std::int64_t between = (kT1 + kT2) / 2;
  const std::string instant = std::to_string(between / kNsPerSecond);
  const TreeSnapshot then = snapshot_tree(mnt_ / "at" / instant / tree_.relative_path());
  EXPECT_EQ(diff_trees(restored({std::nullopt, between}, "then"), then), "");
  EXPECT_EQ(then.count("empty"), 1U);
  EXPECT_EQ(then.at("link").digest, "plain.txt");
  EXPECT_NE(then.at("big.bin").digest, latest.at("big.bin").digest);
  EXPECT_FALSE(fs::exists(mnt_ / "at" / "not-a-time"));

  // versions/PATH/: each version of plain.txt as a file named by its time and number.
  ASSERT_EQ(versions_as_restored(tree_ / "plain.txt").size(), 2U);
  const fs::path links = mnt_ / "versions" / tree_.relative_path() / "link";
  std::vector<std::string> targets;
  for (const auto& e : fs::directory_iterator(links)) {
    targets.push_back(fs::read_symlink(e.path()).string());
  }
  std::sort(targets.begin(), targets.end());
  EXPECT_EQ(targets, (std::vector<std::string>{kNewline, "plain.txt"}));
  // Read only.
  EXPECT_LT(
      ::open((mnt_ / "latest" / tree_.relative_path() / "new").c_str(), O_CREAT | O_WRONLY, 0644),
      0);
  EXPECT_EQ(errno, EROFS);

  ASSERT_EQ(::kill(pid_, SIGTERM), 0);
  EXPECT_EQ(wait_exit(), 0);
  EXPECT_FALSE(fuse_mounted(mnt_));
}

TEST_F(MountTest, UnmountsUnderLoadOnSigtermAndByFusermountAndUmount) {
  mount();
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> bytes{0};
  std::vector<std::thread> load;
  const fs::path big = mnt_ / "latest" / tree_.relative_path() / "big.bin";
  for (int i = 0; i < 3; ++i) {
    load.emplace_back([&, i] {
      std::vector<char> buffer(1 << 20);
      while (!stop) {
        const int fd = ::open(big.c_str(), O_RDONLY);
        if (fd < 0) return;
        for (off_t at = static_cast<off_t>(i) << 28; !stop; at += buffer.size()) {
          const ssize_t n = ::pread(fd, buffer.data(), buffer.size(), at);
          if (n <= 0) break;
          bytes += static_cast<std::uint64_t>(n);
        }
        ::close(fd);
      }
    });
  }
  load.emplace_back([&] {
    while (!stop) {
      std::error_code ec;
      for (fs::recursive_directory_iterator it(mnt_ / "latest", ec), end; !ec && it != end;
           it.increment(ec)) {
      }
      if (ec) return;
    }
  });
  ASSERT_TRUE(wait_until([&] { return bytes > (64U << 20); }, 30s)) << "no reads under way";
  ASSERT_EQ(::kill(pid_, SIGTERM), 0);
  EXPECT_EQ(wait_exit(), 0);
  stop = true;
  for (auto& t : load) t.join();
  EXPECT_FALSE(fuse_mounted(mnt_));

  for (const std::string unmount : {"fusermount3", "umount"}) {
    mount();
    std::vector<std::string> command = {program(unmount), mnt_.string()};
    if (unmount == "fusermount3") command.insert(command.begin() + 1, "-u");
    EXPECT_EQ(run_command(command), 0) << unmount;
    EXPECT_EQ(wait_exit(), 0) << unmount;
    EXPECT_FALSE(fuse_mounted(mnt_)) << unmount;
  }
}

}  // namespace
}  // namespace tw::test
