// `timewarp check`: an archive made of a small tree with the real Store, then each kind of
// difference produced on disk and seen by the command (run in-process, and once as the
// built program), with its exit code, its lines, and its JSON.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "archive_test_util.hpp"
#include "cli_in_process.hpp"
#include "archive/sha256.hpp"
#include "archive/store.hpp"
#include "archive/timefmt.hpp"
#include "cli/check_command.hpp"
#include "common/escape.hpp"
#include "support/test_support.hpp"

namespace tw {
namespace {

namespace fs = std::filesystem;
using archive::test::write_file;

struct timespec mtime_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_mtim;
}

std::int64_t ns(const struct timespec& t) {
  return static_cast<std::int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

void set_mtime(const std::string& path, const struct timespec& mtime) {
  const struct timespec times[2] = {{0, UTIME_OMIT}, mtime};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW), 0) << path;
}

// Runs `change`, then gives `dir` its mtime back: the test then sees only the change itself.
template <class F>
void keeping_mtime(const std::string& dir, F change) {
  const auto before = mtime_of(dir);
  change();
  set_mtime(dir, before);
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string line(std::string_view kind, const std::string& path, const std::string& archive,
                 const std::string& disk) {
  return fmt::format("{}\t{}\t{}\t{}", kind, escape_bytes(path), archive, disk);
}

class CheckCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The tree: files, a subdirectory with a file, an empty directory, a symlink.
    write_file(src_ + "/a.txt", "alpha", 0644);
    write_file(src_ + "/sub/b.txt", "beta!", 0640);
    fs::create_directories(src_ + "/empty");
    ASSERT_EQ(::symlink("a.txt", (src_ + "/link").c_str()), 0);
    archive_tree();
  }

  // Archives every path of the source tree as it is now (directories after their entries,
  // so each directory's version is of its final state).
  void archive_tree() {
    auto store = archive::Store::open(archive_, archive::Store::Mode::ReadWrite);
    ASSERT_TRUE(store) << store.error();
    std::vector<std::string> paths{src_};
    for (const auto& entry : fs::recursive_directory_iterator(src_)) {
      paths.push_back(entry.path().native());
    }
    std::sort(paths.rbegin(), paths.rend());
    for (const auto& path : paths) {
      ASSERT_EQ(store->update(path).outcome, Outcome::Complete) << path;
    }
  }

  // Runs `timewarp <args...>` in-process with the test archive as backup root.
  int run(std::vector<std::string> args, std::string* out = nullptr, std::string* err = nullptr) {
    return test::run_timewarp(
        archive_, std::move(args),
        [](CLI::App& app, Config& config, std::function<int()>& work) { cli::add_check_command(app, config, work); }, out, err);
  }

  // `check src` must exit 1 and print exactly `expected`.
  void expect_lines(const std::vector<std::string>& expected,
                    std::vector<std::string> extra_args = {}) {
    std::string out;
    std::string err;
    extra_args.insert(extra_args.begin(), {"check", src_});
    EXPECT_EQ(run(extra_args, &out, &err), 1) << out << err;
    EXPECT_EQ(lines_of(out), expected) << err;
  }

  void expect_current(std::vector<std::string> extra_args = {}) {
    std::string out;
    std::string err;
    extra_args.insert(extra_args.begin(), {"check", src_});
    EXPECT_EQ(run(extra_args, &out, &err), 0) << out << err;
    EXPECT_EQ(out, "");
    EXPECT_NE(err.find("the archive is current"), std::string::npos) << err;
  }

  archive::test::TempDir dir_;
  std::string src_ = dir_ / "src";
  std::string archive_ = dir_ / "archive";
};

TEST_F(CheckCommandTest, ACurrentTreeExitsZeroAndPrintsNothing) {
  expect_current();
  expect_current({"--content"});
  std::string out;
  std::string err;
  ASSERT_EQ(run({"check", src_}, &out, &err), 0);
  EXPECT_NE(err.find("compared 6 paths in 1 tree"), std::string::npos) << err;
}

TEST_F(CheckCommandTest, AFileOnDiskButNotArchivedIsMissing) {
  keeping_mtime(src_ + "/sub", [&] { write_file(src_ + "/sub/new", "n"); });
  expect_lines({line("missing", src_ + "/sub/new", "-", "file")});
  // A new directory and what it holds, each once.
  keeping_mtime(src_, [&] { write_file(src_ + "/newdir/x", "x"); });
  expect_lines({line("missing", src_ + "/newdir", "-", "directory"),
                line("missing", src_ + "/newdir/x", "-", "file"),
                line("missing", src_ + "/sub/new", "-", "file")});
}

TEST_F(CheckCommandTest, AnArchivedPathGoneFromDiskIsExtraWithEverythingBeneathIt) {
  keeping_mtime(src_, [&] { fs::remove(src_ + "/a.txt"); });
  expect_lines({line("extra", src_ + "/a.txt", "file", "-")});
  keeping_mtime(src_, [&] { fs::remove_all(src_ + "/sub"); });
  expect_lines({line("extra", src_ + "/a.txt", "file", "-"),
                line("extra", src_ + "/sub", "directory", "-"),
                line("extra", src_ + "/sub/b.txt", "file", "-")});
  // Once the archive records the deletions (tombstones), nothing is left over.
  auto store = archive::Store::open(archive_, archive::Store::Mode::ReadWrite);
  ASSERT_TRUE(store) << store.error();
  ASSERT_EQ(store->remove(src_ + "/a.txt").outcome, Outcome::Complete);
  ASSERT_EQ(store->remove(src_ + "/sub").outcome, Outcome::Complete);
  expect_current();
}

TEST_F(CheckCommandTest, ATypeChangeIsOneLineAndTheOldDirectorysEntriesAreExtra) {
  const std::string dir_mtime = archive::format_time_ns(ns(mtime_of(src_ + "/sub")));
  keeping_mtime(src_, [&] {
    fs::remove(src_ + "/a.txt");
    fs::create_directory(src_ + "/a.txt");
    fs::remove_all(src_ + "/sub");
    write_file(src_ + "/sub", "now a file");
  });
  expect_lines({line("type", src_ + "/a.txt", "file", "directory"),
                line("type", src_ + "/sub", "directory", "file"),
                line("extra", src_ + "/sub/b.txt", "file", "-")});
}

TEST_F(CheckCommandTest, SizeMtimeModeAndOwnerOfFilesAndDirectories) {
  const std::string file = src_ + "/sub/b.txt";
  const auto file_mtime = mtime_of(file);
  write_file(file, "beta!!", 0640);  // one byte more, same mtime
  set_mtime(file, file_mtime);
  expect_lines({line("size", file, "5", "6")});
  write_file(file, "beta!", 0640);
  set_mtime(file, {file_mtime.tv_sec - 100, 5});
  expect_lines({line("mtime", file, archive::format_time_ns(ns(file_mtime)),
                     archive::format_time_ns(ns({file_mtime.tv_sec - 100, 5})))});
  set_mtime(file, file_mtime);
  expect_current();

  const std::string dir = src_ + "/sub";
  const auto dir_mtime = mtime_of(dir);
  set_mtime(dir, {dir_mtime.tv_sec + 7, 0});
  expect_lines({line("mtime", dir, archive::format_time_ns(ns(dir_mtime)),
                     archive::format_time_ns(ns({dir_mtime.tv_sec + 7, 0})))});
  set_mtime(dir, dir_mtime);

  ASSERT_EQ(::chmod(file.c_str(), 0600), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 0700), 0);
  expect_lines({line("mode", dir, "0755", "0700"), line("mode", file, "0640", "0600")});
  ASSERT_EQ(::chmod(file.c_str(), 0640), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 0755), 0);

  if (::geteuid() != 0) GTEST_SKIP() << "changing an owner needs root";
  struct stat st {};
  ASSERT_EQ(::lstat(file.c_str(), &st), 0);
  const std::string owner = fmt::format("{}:{}", st.st_uid, st.st_gid);
  ASSERT_EQ(::lchown(file.c_str(), 4321, 8765), 0);
  ASSERT_EQ(::lchown((src_ + "/link").c_str(), st.st_uid, 8765), 0);
  expect_lines({line("owner", src_ + "/link", owner, fmt::format("{}:8765", st.st_uid)),
                line("owner", file, owner, "4321:8765")});
}

TEST_F(CheckCommandTest, ALinkTargetAndALinksMtime) {
  const std::string link = src_ + "/link";
  const auto link_mtime = mtime_of(link);
  keeping_mtime(src_, [&] {
    fs::remove(link);
    ASSERT_EQ(::symlink("sub/b.txt", link.c_str()), 0);
  });
  set_mtime(link, link_mtime);
  expect_lines({line("link", link, "a.txt", "sub/b.txt")});
  set_mtime(link, {link_mtime.tv_sec - 1, 0});
  expect_lines({line("mtime", link, archive::format_time_ns(ns(link_mtime)),
                     archive::format_time_ns(ns({link_mtime.tv_sec - 1, 0}))),
                line("link", link, "a.txt", "sub/b.txt")});
}

TEST_F(CheckCommandTest, ContentChangedWithTheSameSizeAndMtimeIsSeenOnlyWithContent) {
  const std::string file = src_ + "/a.txt";
  const auto before = mtime_of(file);
  const std::string old_digest = archive::sha256_hex("alpha");
  write_file(file, "ALPHA");
  set_mtime(file, before);
  expect_current();
  expect_lines({line("content", file, old_digest, archive::sha256_hex("ALPHA"))}, {"--content"});
}

TEST_F(CheckCommandTest, NamesWithNewlinesTabsAndInvalidUtf8StayOneLineEach) {
  const std::vector<std::string> odd = {"new\nline", "tab\there", std::string("bad\xff\xfe"),
                                        "per%cent", "-dash"};
  // Archived, then removed: the archive's side of the names.
  for (const auto& name : odd) write_file(src_ + "/gone " + name, "x");
  archive_tree();
  // Not archived: the disk's side.
  keeping_mtime(src_, [&] {
    for (const auto& name : odd) {
      fs::remove(src_ + "/gone " + name);
      write_file(src_ + "/" + name, "y");
    }
  });
  std::string out;
  ASSERT_EQ(run({"check", src_}, &out), 1);
  const auto lines = lines_of(out);
  ASSERT_EQ(lines.size(), 2 * odd.size()) << out;
  std::set<std::string> missing;
  std::set<std::string> extra;
  for (const auto& l : lines) {
    const auto f = archive::test::fields(l);
    ASSERT_EQ(f.size(), 4u) << l;
    auto path = unescape_bytes(f[1]);
    ASSERT_TRUE(path) << f[1];
    (f[0] == "missing" ? missing : extra).insert(*path);
  }
  for (const auto& name : odd) {
    EXPECT_EQ(missing.count(src_ + "/" + name), 1u) << escape_bytes(name);
    EXPECT_EQ(extra.count(src_ + "/gone " + name), 1u) << escape_bytes(name);
  }
  // A PATH given escaped names the same file.
  ASSERT_EQ(run({"check", "--escaped", escape_bytes(src_ + "/new\nline")}, &out), 1);
  EXPECT_EQ(lines_of(out),
            std::vector<std::string>{line("missing", src_ + "/new\nline", "-", "file")});
}

TEST_F(CheckCommandTest, WhatTheArchiveNeverKeepsIsNotReported) {
  keeping_mtime(src_, [&] {
    write_file(src_ + "/scratch.tmp", "t");             // excluded by a glob
    write_file(src_ + "/cache/deep/file", "c");         // in an excluded directory
    write_file(src_ + "/big", std::string(2000, 'b'));  // over max_file_size
    ASSERT_EQ(::mkfifo((src_ + "/fifo").c_str(), 0644), 0);
    fs::remove(src_ + "/sub/b.txt");  // archived, now excluded: neither side reported
  });
  const std::string sub = src_ + "/sub";
  set_mtime(sub, mtime_of(sub));
  const std::vector<std::string> filters = {"--exclude=*.tmp", "--exclude=cache",
                                            "--exclude=sub/b.txt", "--max-file-size=1000"};
  std::string out;
  std::string err;
  // sub's mtime changed with the removal: the only difference left.
  EXPECT_EQ(run({"check", src_, filters[0], filters[1], filters[2], filters[3]}, &out, &err), 1)
      << err;
  ASSERT_EQ(lines_of(out).size(), 1u) << out;
  EXPECT_EQ(lines_of(out)[0].rfind("mtime\t" + escape_bytes(sub) + "\t", 0), 0u) << out;
  // Without the filters, all of it shows.
  ASSERT_EQ(run({"check", src_}, &out), 1);
  EXPECT_NE(out.find("missing\t" + escape_bytes(src_ + "/scratch.tmp")), std::string::npos);
  EXPECT_NE(out.find("missing\t" + escape_bytes(src_ + "/cache/deep/file")), std::string::npos);
  EXPECT_NE(out.find("missing\t" + escape_bytes(src_ + "/big")), std::string::npos);
  EXPECT_NE(out.find("extra\t" + escape_bytes(src_ + "/sub/b.txt")), std::string::npos);
  EXPECT_EQ(out.find("fifo"), std::string::npos) << out;
}

TEST(CheckCommandBackupRoot, ABackupRootInsideTheSourceIsNotCompared) {
  archive::test::TempDir dir;
  const std::string src = dir / "src";
  const std::string root = src + "/.timewarp-archive";
  write_file(src + "/f", "f");
  {
    auto store = archive::Store::open(root, archive::Store::Mode::ReadWrite);
    ASSERT_TRUE(store) << store.error();
    ASSERT_EQ(store->update(src + "/f").outcome, Outcome::Complete);
    ASSERT_EQ(store->update(src).outcome, Outcome::Complete);
  }
  std::string out;
  EXPECT_EQ(test::run_command(
                {test::cli_exe(), "--backup-root=" + root, "--source=" + src, "check"}, &out),
            0)
      << out;
  EXPECT_EQ(out, "");
}

TEST_F(CheckCommandTest, JsonHoldsTheSameDifferencesAndCounts) {
  keeping_mtime(src_, [&] {
    fs::remove(src_ + "/a.txt");
    write_file(src_ + "/new\tname", "n");
  });
  ASSERT_EQ(::chmod((src_ + "/sub/b.txt").c_str(), 0604), 0);
  std::string text;
  ASSERT_EQ(run({"check", src_}, &text), 1);
  std::string out;
  std::string err;
  ASSERT_EQ(run({"check", src_, "--json"}, &out, &err), 1) << err;
  const auto doc = nlohmann::json::parse(out);
  EXPECT_EQ(doc["current"], false);
  EXPECT_EQ(doc["total"], 3);
  EXPECT_EQ(doc["compared"], 6);
  EXPECT_EQ(doc["paths"], nlohmann::json::array({escape_bytes(src_)}));
  EXPECT_EQ(doc["counts"]["missing"], 1);
  EXPECT_EQ(doc["counts"]["extra"], 1);
  EXPECT_EQ(doc["counts"]["mode"], 1);
  EXPECT_EQ(doc["counts"]["size"], 0);
  std::vector<std::string> from_json;
  for (const auto& d : doc["differences"]) {
    from_json.push_back(fmt::format("{}\t{}\t{}\t{}", d["kind"].get<std::string>(),
                                    d["path"].get<std::string>(), d["archive"].get<std::string>(),
                                    d["disk"].get<std::string>()));
  }
  EXPECT_EQ(from_json, lines_of(text));
  // A current tree: an empty list.
  keeping_mtime(src_, [&] { fs::remove(src_ + "/new\tname"); });
  write_file(src_ + "/a.txt", "alpha");
  ASSERT_EQ(run({"check", src_ + "/sub/b.txt", "--json"}, &out), 1);
  ASSERT_EQ(run({"check", src_ + "/empty", "--json"}, &out), 0);
  EXPECT_EQ(nlohmann::json::parse(out)["differences"], nlohmann::json::array());
}

TEST_F(CheckCommandTest, AnUnreadableDirectoryIsAProblemNotMissingOrExtraEntries) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to switch to another user";
  // Everything readable by the other user but the locked directory.
  ASSERT_EQ(::chmod(dir_.path().c_str(), 0755), 0);
  for (const auto& entry : fs::recursive_directory_iterator(archive_)) {
    if (entry.is_directory()) ::chmod(entry.path().c_str(), 0755);
    if (entry.is_regular_file()) ::chmod(entry.path().c_str(), 0644);
  }
  ASSERT_EQ(::chmod(archive_.c_str(), 0755), 0);
  const std::string locked = src_ + "/sub";
  ASSERT_EQ(::chmod(locked.c_str(), 0700), 0);
  ASSERT_EQ(::chown(locked.c_str(), 0, 0), 0);
  std::string out;
  std::string err;
  int code = -1;
  {
    // The effective ids of another user, restored before anything else runs.
    ASSERT_EQ(::setegid(65534), 0);
    ASSERT_EQ(::seteuid(65534), 0);
    code = run({"check", src_}, &out, &err);
    ASSERT_EQ(::seteuid(0), 0);
    ASSERT_EQ(::setegid(0), 0);
  }
  EXPECT_EQ(code, 1) << err;
  EXPECT_EQ(lines_of(out),
            (std::vector<std::string>{line("mode", locked, "0755", "0700"),
                                      line("unreadable", locked, "-", "Permission denied")}))
      << err;
}

TEST_F(CheckCommandTest, APathGivenAsASymlinkToADirectoryIsResolvedLikeASourceDirectory) {
  const std::string alias = dir_ / "alias";
  ASSERT_EQ(::symlink(src_.c_str(), alias.c_str()), 0);
  std::string out;
  std::string err;
  EXPECT_EQ(run({"check", alias}, &out, &err), 0) << out << err;
  EXPECT_EQ(run({"check", "--source=" + alias}, &out, &err), 0) << out << err;
  // Inside a source, a link is an entry: checked as the link itself.
  EXPECT_EQ(run({"check", alias + "/link", "--json", "--source=" + alias}, &out, &err), 0)
      << out << err;
  EXPECT_EQ(nlohmann::json::parse(out)["paths"], nlohmann::json::array({src_ + "/link"}));
  EXPECT_EQ(nlohmann::json::parse(out)["compared"], 1);
  keeping_mtime(src_, [&] { write_file(src_ + "/later", "l"); });
  EXPECT_EQ(run({"check", alias}, &out), 1);
  EXPECT_EQ(lines_of(out), std::vector<std::string>{line("missing", src_ + "/later", "-", "file")});
}

TEST_F(CheckCommandTest, PathsDefaultToTheSourcesAndBadUsageExitsTwo) {
  std::string out;
  std::string err;
  EXPECT_EQ(run({"check", "--source=" + src_}, &out, &err), 0) << out << err;
  EXPECT_EQ(run({"check"}, &out, &err), 2);
  EXPECT_NE(err.find("no PATH given"), std::string::npos) << err;
  EXPECT_EQ(run({"check", dir_ / "never-was"}, &out, &err), 2);
  EXPECT_NE(err.find("not on disk and not in the archive"), std::string::npos) << err;
  EXPECT_EQ(run({"check", "--escaped", "bad%zz"}, &out, &err), 2);
  // An archive that cannot be opened.
  fs::create_directories(dir_ / "not-an-archive/x");
  Config config;
  EXPECT_EQ(
      test::run_command(
          {test::cli_exe(), "--backup-root=" + (dir_ / "not-an-archive"), "check", src_}, &out),
      2);
  // A source gone from disk whose archived state is extra, not a usage error.
  fs::rename(src_, dir_ / "moved");
  EXPECT_EQ(run({"check", src_}, &out, &err), 1) << err;
  EXPECT_EQ(lines_of(out).front(), line("extra", src_, "directory", "-"));
  EXPECT_EQ(lines_of(out).size(), 6u) << out;
}

TEST_F(CheckCommandTest, TheBuiltProgramPrintsLinesOnStdoutAndTheSummaryOnStderr) {
  keeping_mtime(src_, [&] { write_file(src_ + "/new\nfile", "n"); });
  std::string out;
  EXPECT_EQ(test::run_command({test::cli_exe(), "--backup-root=" + archive_, "check", src_}, &out),
            1);
  EXPECT_EQ(out, line("missing", src_ + "/new\nfile", "-", "file") + "\n");
}

}  // namespace
}  // namespace tw
