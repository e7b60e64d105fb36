// The `timewarp versions/restore/verify/forget` subcommands, parsed and run in-process
// against a real archive.
#include <unistd.h>

#include <algorithm>
#include <ctime>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "archive_commands_fixture.hpp"
#include "common/escape.hpp"
#include "format1_writer.hpp"

namespace tw {
namespace {

using archive::test::read_file;
using archive::test::write_file;

// The versions of a path in the form for scripts (the human table: archive_output_test).
TEST_F(ArchiveCommandsTest, VersionsListsEveryVersionWithTheEscapedPath) {
  const std::string path = dir_ / "src/odd\tname";
  write_file(path, "one");
  archive_file(path);
  write_file(path, "two!");
  archive_file(path);
  std::string out;
  std::string err;
  ASSERT_EQ(run({"versions", "--json", path}, &out, &err), 0) << err;
  const auto doc = nlohmann::json::parse(out);
  ASSERT_EQ(doc.at("paths").size(), 1u) << out;
  EXPECT_EQ(doc["paths"][0].at("path"), escape_bytes(path));
  const auto& versions = doc["paths"][0].at("versions");
  ASSERT_EQ(versions.size(), 2u) << out;
  for (std::uint64_t n = 1; n <= 2; ++n) {
    const auto& v = versions[n - 1];
    EXPECT_EQ(v.at("number"), n);
    EXPECT_EQ(v.at("archived_at").get<std::string>().size(), 30u);  // ...T10:00:00.000000000Z
    EXPECT_EQ(v.at("op"), "UPDATE");
    EXPECT_EQ(v.at("size"), n == 1 ? 3 : 4);
    EXPECT_EQ(v.at("sha256").get<std::string>().size(), 64u);
  }
  // The escaped form is accepted too.
  ASSERT_EQ(run({"versions", "--escaped", escape_bytes(path)}, &out), 0);
  EXPECT_NE(run({"versions", dir_ / "src/never"}, &out, &err), 0);
  EXPECT_NE(err.find("not in the archive"), std::string::npos) << err;
}

TEST_F(ArchiveCommandsTest, RestoreByVersionTimeAndDefault) {
  const std::string path = dir_ / "src/file";
  write_file(path, "first");
  archive_file(path);
  std::string out;
  ASSERT_EQ(run({"versions", "--json", path}, &out), 0);
  const std::string first_time =
      nlohmann::json::parse(out).at("paths").at(0).at("versions").at(0).at("archived_at");
  write_file(path, "second");
  archive_file(path);
  std::string err;
  ASSERT_EQ(run({"restore", path, "--to", dir_ / "latest"}, &out, &err), 0) << err;
  EXPECT_EQ(read_file(dir_ / "latest"), "second");
  ASSERT_EQ(run({"restore", path, "--version", "1", "--to", dir_ / "v1"}, &out, &err), 0) << err;
  EXPECT_EQ(read_file(dir_ / "v1"), "first");
  ASSERT_EQ(run({"restore", path, "--at", first_time, "--to", dir_ / "at"}, &out, &err), 0) << err;
  EXPECT_EQ(read_file(dir_ / "at"), "first");
  EXPECT_NE(run({"restore", path, "--at", "2001-01-01T00:00:00Z", "--to", dir_ / "x"}, &out, &err),
            0);
  EXPECT_NE(run({"restore", path, "--at", "not a time", "--to", dir_ / "x"}, &out, &err), 0);
  EXPECT_NE(run({"restore", path, "--at", first_time, "--version", "1"}), 0);
  // The original path exists: refused without --force.
  write_file(path, "local edit");
  EXPECT_EQ(run({"restore", path}, &out, &err), 1);
  EXPECT_EQ(read_file(path), "local edit");
  ASSERT_EQ(run({"restore", path, "--force"}, &out, &err), 0) << err;
  EXPECT_EQ(read_file(path), "second");
}

TEST_F(ArchiveCommandsTest, VerifyExitCodeFollowsTheArchive) {
  write_file(dir_ / "src/f", "data");
  archive_file(dir_ / "src/f");
  std::string out;
  ASSERT_EQ(run({"verify"}, &out), 0) << out;
  EXPECT_NE(out.find("OK"), std::string::npos) << out;
  // The same report as one document.
  ASSERT_EQ(run({"verify", "--json"}, &out), 0) << out;
  auto doc = nlohmann::json::parse(out);
  EXPECT_EQ(doc.at("ok"), true);
  EXPECT_EQ(doc.at("histories"), 1);
  EXPECT_EQ(doc.at("versions"), 1);
  EXPECT_GE(doc.at("objects"), 1);
  EXPECT_EQ(doc.at("removed_by_retention"), 0);
  EXPECT_EQ(doc.at("problems"), nlohmann::json::array());
  // Format 1 keeps content in objects/, format 2 in packs/.
  for (const char* content : {"/objects", "/packs"}) {
    if (!std::filesystem::exists(archive_ + content)) continue;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(archive_ + content)) {
      if (entry.is_regular_file()) std::filesystem::resize_file(entry.path(), 20);
    }
  }
  EXPECT_EQ(run({"verify"}, &out), 1);
  EXPECT_NE(out.find("damaged"), std::string::npos) << out;
  EXPECT_NE(out.find(escape_bytes(dir_ / "src/f") + " v1"), std::string::npos) << out;
  EXPECT_EQ(run({"verify", "--json"}, &out), 1);
  doc = nlohmann::json::parse(out);
  EXPECT_EQ(doc.at("ok"), false);
  ASSERT_FALSE(doc.at("problems").empty()) << out;
  const std::string problems = doc["problems"].dump();
  EXPECT_NE(problems.find("damaged"), std::string::npos) << out;
  EXPECT_NE(problems.find(escape_bytes(dir_ / "src/f") + " v1"), std::string::npos) << out;
}

// forget --dry-run lists what the policy would remove and removes nothing. The policy's
// choice of versions is tested in retention_test; here: the keys reach it, the clock can be
// set with --now, and the list is exact in JSON (paths escaped) and for a person.
TEST_F(ArchiveCommandsTest, ForgetDryRunListsWhatThePolicyWouldRemove) {
  const std::string kept = dir_ / "src/kept\nfile";
  const std::string gone = dir_ / "src/gone";
  for (const char* content : {"one", "two", "three"}) {
    write_file(kept, content);
    archive_file(kept);
  }
  write_file(gone, "brief");
  archive_file(gone);
  ASSERT_EQ(::unlink(gone.c_str()), 0);
  archive_deletion(gone);
  // A day later, with nothing but the last hour kept: every version but the latest of a
  // live path goes, and the deleted path whole.
  const std::vector<std::string> nothing_old = {"--keep-hourly=0", "--keep-daily=0",
                                                "--keep-weekly=0", "--retention-timezone=UTC"};
  std::vector<std::string> args = {"forget", "--dry-run", "--json",
                                   "--now=@" + std::to_string(std::time(nullptr) + 86400)};
  args.insert(args.end(), nothing_old.begin(), nothing_old.end());
  std::string out;
  std::string err;
  ASSERT_EQ(run(args, &out, &err), 0) << err;
  const auto json = nlohmann::json::parse(out);
  std::vector<std::pair<std::string, std::uint64_t>> removed;
  for (const auto& r : json["remove"]) removed.emplace_back(r["path"], r["version"]);
  const std::vector<std::pair<std::string, std::uint64_t>> expected = {{escape_bytes(gone), 1},
                                                                       {escape_bytes(gone), 2},
                                                                       {escape_bytes(kept), 1},
                                                                       {escape_bytes(kept), 2}};
  std::sort(removed.begin(), removed.end());
  EXPECT_EQ(removed, expected);
  EXPECT_EQ(json["versions"], 5);
  EXPECT_EQ(json["paths_removed_whole"], 1);
  EXPECT_EQ(json["content_bytes_removed"], 3 + 3 + 5);
  // Contents this small are stored as they are: what their removal frees is their bytes.
  EXPECT_EQ(json["bytes_freed"], 3 + 3 + 5);
  // Now, with the default policy, everything is recent: nothing would go.
  ASSERT_EQ(run({"forget", "--dry-run"}, &out, &err), 0) << err;
  EXPECT_NE(out.find("would remove 0 of 5 versions"), std::string::npos) << out;
  EXPECT_NE(out.find("would free about 0 bytes of pack space"), std::string::npos) << out;
  // Nothing was removed by either dry run.
  EXPECT_EQ(version_numbers(kept), (std::vector<std::uint64_t>{1, 2, 3}));
  // Without --dry-run, forget removes what it listed, then collects.
  args.erase(std::find(args.begin(), args.end(), "--dry-run"));
  ASSERT_EQ(run(args, &out, &err), 0) << err;
  const auto applied = nlohmann::json::parse(out);
  EXPECT_EQ(applied["versions_removed"], 4);
  EXPECT_EQ(applied["collection"]["blobs_removed"], 3) << out;
  EXPECT_EQ(version_numbers(kept), (std::vector<std::uint64_t>{3}));
  EXPECT_NE(run({"versions", gone}, &out, &err), 0) << "a deleted path's history went whole";
  // The kept path's two removed versions are told apart from damage; the deleted path's
  // history went whole, so nothing of it is counted.
  ASSERT_EQ(run({"verify"}, &out, &err), 0) << out;
  EXPECT_NE(out.find("(2 removed by retention): OK"), std::string::npos) << out;
  ASSERT_EQ(run({"restore", kept, "--to", dir_ / "kept"}, &out, &err), 0) << err;
  EXPECT_EQ(read_file(dir_ / "kept"), "three");
}

// What forget would free is counted after deduplication: content that a kept version of
// another path names too stays. A forget without the collection measures it before it
// removes anything; with the collection, the collection's figures say what went.
TEST_F(ArchiveCommandsTest, ForgetSaysWhatItWouldFreeAfterDeduplication) {
  const std::string shared(1500, 'x');  // compresses: stored in fewer bytes than it has
  const std::string x = dir_ / "src/x";
  const std::string y = dir_ / "src/y";
  write_file(x, shared);
  archive_file(x);
  write_file(x, "x, later");
  archive_file(x);
  write_file(y, shared);
  archive_file(y);  // the same content as x's first version: one blob for both
  const std::vector<std::string> a_day_later = {
      "--keep-hourly=0", "--keep-daily=0", "--keep-weekly=0", "--retention-timezone=UTC",
      "--now=@" + std::to_string(std::time(nullptr) + 86400)};
  std::vector<std::string> args = {"forget", "--dry-run", "--json"};
  args.insert(args.end(), a_day_later.begin(), a_day_later.end());
  std::string out;
  std::string err;
  ASSERT_EQ(run(args, &out, &err), 0) << err;
  auto json = nlohmann::json::parse(out);
  EXPECT_EQ(json["versions_removed"], 1) << "x's first version";
  EXPECT_EQ(json["content_bytes_removed"], shared.size());
  EXPECT_EQ(json["bytes_freed"], 0) << "y's version still names that content";
  args.erase(std::find(args.begin(), args.end(), "--json"));
  ASSERT_EQ(run(args, &out, &err), 0) << err;
  EXPECT_NE(out.find("would free about 0 bytes of pack space once collected (0 blobs"),
            std::string::npos)
      << out;
  // y goes from the disk and from the archive: now the shared content is freed too.
  ASSERT_EQ(::unlink(y.c_str()), 0);
  archive_deletion(y);
  args.emplace_back("--json");
  ASSERT_EQ(run(args, &out, &err), 0) << err;
  json = nlohmann::json::parse(out);
  EXPECT_EQ(json["versions_removed"], 3) << "x's first, and y whole";
  const std::uint64_t freed = json["bytes_freed"];
  EXPECT_GT(freed, 0u);
  EXPECT_LT(freed, shared.size()) << "stored bytes, compressed";
  // The real forget without the collection gives the same figure, measured first.
  args.erase(std::find(args.begin(), args.end(), "--dry-run"));
  args.emplace_back("--no-gc");
  ASSERT_EQ(run(args, &out, &err), 0) << err;
  json = nlohmann::json::parse(out);
  EXPECT_EQ(json["versions_removed"], 3);
  EXPECT_EQ(json["bytes_freed"], freed);
  EXPECT_FALSE(json.contains("collection"));
  // The collection then removes exactly that.
  ASSERT_EQ(run({"gc", "--json"}, &out, &err), 0) << err;
  EXPECT_EQ(nlohmann::json::parse(out)["bytes_removed"], freed) << out;
}

TEST_F(ArchiveCommandsTest, PinKeepsAVersionThroughForget) {
  const std::string path = dir_ / "src/pinned";
  for (const char* content : {"first", "second"}) {
    write_file(path, content);
    archive_file(path);
  }
  std::string out;
  std::string err;
  ASSERT_EQ(run({"pin", path, "--version", "1"}, &out, &err), 0) << err;
  EXPECT_EQ(run({"pin", path, "--version", "7"}, &out, &err), 1);
  EXPECT_NE(err.find("no version 7"), std::string::npos) << err;
  ASSERT_EQ(run({"forget", "--keep-within=0", "--keep-hourly=0", "--keep-daily=0",
                 "--keep-weekly=0", "--now=@" + std::to_string(std::time(nullptr) + 86400)},
                &out, &err),
            0)
      << err;
  EXPECT_EQ(version_numbers(path), (std::vector<std::uint64_t>{1, 2}));
  ASSERT_EQ(run({"restore", path, "--version", "1", "--to", dir_ / "v1"}, &out, &err), 0) << err;
  EXPECT_EQ(read_file(dir_ / "v1"), "first");
  ASSERT_EQ(run({"gc", "--json"}, &out, &err), 0) << err;
  EXPECT_EQ(nlohmann::json::parse(out)["blobs_removed"], 0) << out;
}

TEST_F(ArchiveCommandsTest, PurgeRemovesEveryVersionAndSaysWhenThePathIsStillOnDisk) {
  const std::string path = dir_ / "src/secret";
  for (const char* content : {"hunter2", "hunter3"}) {
    write_file(path, content);
    archive_file(path);
  }
  std::string out;
  std::string err;
  ASSERT_EQ(run({"purge", "--dry-run", "--json", path}, &out, &err), 0) << err;
  EXPECT_EQ(nlohmann::json::parse(out)["versions"], 2) << out;
  ASSERT_EQ(run({"versions", path}, &out, &err), 0) << "a dry run removes nothing";
  ASSERT_EQ(run({"purge", path}, &out, &err), 0) << err;
  EXPECT_NE(out.find("purged 2 versions of 1 paths"), std::string::npos) << out;
  EXPECT_NE(err.find("still on disk"), std::string::npos) << err;
  EXPECT_NE(run({"versions", path}, &out, &err), 0) << out;
  ASSERT_EQ(run({"verify"}, &out, &err), 0) << out;
}

TEST_F(ArchiveCommandsTest, AFormat1ArchiveSaysItIsNeverThinned) {
  archive::test::Format1Writer writer(archive_);
  write_file(dir_ / "src/old", "old");
  writer.update(dir_ / "src/old");
  std::string out;
  std::string err;
  for (const std::vector<std::string>& args : {std::vector<std::string>{"forget"},
                                               {"gc"},
                                               {"pin", dir_ / "src/old"},
                                               {"purge", dir_ / "src/old"}}) {
    EXPECT_EQ(run(args, &out, &err), 2) << args[0];
    EXPECT_NE(err.find("format-1 archive, which this release reads but no longer writes"),
              std::string::npos)
        << err;
  }
  // Listing what would go works: nothing would, as nothing is ever removed from it.
  ASSERT_EQ(run({"forget", "--dry-run"}, &out, &err), 0) << err;
}

TEST_F(ArchiveCommandsTest, ForgetNamesTheKeyOfAnUnknownTimeZone) {
  write_file(dir_ / "src/a", "a");
  archive_file(dir_ / "src/a");
  std::string out;
  std::string err;
  EXPECT_EQ(run({"forget", "--dry-run", "--retention-timezone=Mars/Olympus"}, &out, &err), 2);
  EXPECT_NE(err.find("retention_timezone"), std::string::npos) << err;
  EXPECT_NE(err.find("Mars/Olympus"), std::string::npos) << err;
}

// A folder's own policy reaches forget: its paths are thinned by it, the rest by the
// archive's, and the output names it (JSON "folders", a "policy of" line).
TEST_F(ArchiveCommandsTest, ForgetAppliesAFoldersOwnPolicyToItsPaths) {
  std::filesystem::create_directories(dir_ / "src/tmp");
  const std::string kept = dir_ / "src/kept";
  const std::string scratch = dir_ / "src/tmp/scratch";
  for (const char* content : {"one", "two"}) {
    for (const auto& path : {kept, scratch}) {
      write_file(path, content);
      archive_file(path);
    }
  }
  // A day later: the archive keeps the last two days whole, src/tmp nothing but its latest.
  const std::string folder = dir_ / "src/tmp";
  std::vector<std::string> args = {"forget", "--dry-run", "--json",
                                   "--now=@" + std::to_string(std::time(nullptr) + 86400),
                                   "--keep-within=172800", "--retention-timezone=UTC",
                                   "--retention-folder=" + folder +
                                       ": keep_within=0 keep_hourly=0 keep_daily=0 keep_weekly=0"};
  std::string out;
  std::string err;
  ASSERT_EQ(run(args, &out, &err), 0) << err;
  const auto json = nlohmann::json::parse(out);
  ASSERT_EQ(json["remove"].size(), 1u) << out;
  EXPECT_EQ(json["remove"][0]["path"], escape_bytes(scratch));
  EXPECT_EQ(json["remove"][0]["version"], 1);
  ASSERT_EQ(json["folders"].size(), 1u) << out;
  EXPECT_EQ(json["folders"][0]["folder"], escape_bytes(folder));
  EXPECT_EQ(json["folders"][0]["policy"]["keep_daily"], 0);
  EXPECT_EQ(json["policy"]["keep_within_s"], 172800);
  args.erase(std::find(args.begin(), args.end(), "--json"));
  ASSERT_EQ(run(args, &out, &err), 0) << err;
  EXPECT_NE(out.find("policy of " + folder + ": every version of the last 0 s"),
            std::string::npos)
      << out;
  // A bad entry is refused as the options are read (the message: config_test).
  EXPECT_EQ(run({"forget", "--dry-run", "--retention-folder=" + folder + ": keep_dayly=1"}, &out,
                &err),
            2);
}

}  // namespace
}  // namespace tw
