// What `timewarp versions`, `restore` and `verify` print: the exact JSON document scripts
// read, the table people read, and the progress line a terminal shows and a pipe never sees.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "archive/timefmt.hpp"
#include "archive_commands_fixture.hpp"
#include "common/escape.hpp"
#include "common/human.hpp"
#include "common/time.hpp"
#include "support/test_support.hpp"

namespace tw {
namespace {

using archive::test::write_file;
using Json = nlohmann::json;

// `versions --json -r` of `dir`, by escaped path.
std::map<std::string, Json> versions_by_path(const Json& doc) {
  std::map<std::string, Json> out;
  for (const auto& one : doc.at("paths")) out[one.at("path")] = one.at("versions");
  return out;
}

TEST_F(ArchiveCommandsTest, VersionsJsonDescribesAFileALinkADeletedAndAMovedPath) {
  const std::string file = dir_ / "src/file";
  const std::string link = dir_ / "src/link";
  const std::string gone = dir_ / "src/gone";
  const std::string from = dir_ / "src/from";
  const std::string to = dir_ / "src/to";
  write_file(file, "content");
  ASSERT_EQ(::chmod(file.c_str(), 0640), 0);
  archive_file(file);
  const std::string target = "odd\ntarget";  // escaped in JSON as every path is
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  archive_file(link);
  write_file(gone, "brief");
  archive_file(gone);
  ASSERT_EQ(::unlink(gone.c_str()), 0);
  archive_deletion(gone);
  write_file(from, "moving");
  archive_file(from);
  std::filesystem::rename(from, to);
  {
    auto store = archive::Store::open(archive_, archive::Store::Mode::ReadWrite);
    ASSERT_TRUE(store) << store.error();
    ASSERT_EQ(store->move(from, to).outcome, Outcome::Complete);
    ASSERT_TRUE(store->pin(file, 1, true));
  }
  std::string out;
  std::string err;
  ASSERT_EQ(run({"versions", "--json", "-r", dir_ / "src"}, &out, &err), 0) << err;
  const auto doc = Json::parse(out);
  EXPECT_EQ(doc.at("path"), escape_bytes(dir_ / "src"));
  EXPECT_EQ(doc.at("recursive"), true);
  auto by_path = versions_by_path(doc);

  ASSERT_EQ(by_path[file].size(), 1u) << out;
  const Json& f = by_path[file][0];
  struct stat st {};
  ASSERT_EQ(::lstat(file.c_str(), &st), 0);
  EXPECT_EQ(f.at("number"), 1);
  EXPECT_EQ(f.at("op"), "UPDATE");
  EXPECT_EQ(f.at("type"), "file");
  EXPECT_EQ(f.at("size"), 7);
  EXPECT_EQ(f.at("sha256"), "ed7002b439e9ac845f22357d822bac1444730fbdb6016d3ec9432297b9ec9f73");
  EXPECT_EQ(f.at("mode"), "0640");
  EXPECT_EQ(f.at("uid"), st.st_uid);
  EXPECT_EQ(f.at("gid"), st.st_gid);
  EXPECT_EQ(f.at("mtime_ns"), timespec_ns(st.st_mtim));
  EXPECT_EQ(f.at("mtime"), archive::format_time_ns(timespec_ns(st.st_mtim)));
  const std::int64_t archived_ns = f.at("archived_at_ns");
  EXPECT_EQ(f.at("archived_at"), archive::format_time_ns(archived_ns));
  EXPECT_LE(archived_ns, now_ns());
  EXPECT_EQ(f.at("link_target"), nullptr);
  EXPECT_EQ(f.at("moved_from"), nullptr);
  EXPECT_EQ(f.at("moved_to"), nullptr);
  EXPECT_EQ(f.at("pinned"), true);

  ASSERT_EQ(by_path[link].size(), 1u) << out;
  const Json& l = by_path[link][0];
  EXPECT_EQ(l.at("type"), "symlink");
  EXPECT_EQ(l.at("link_target"), escape_bytes(target));
  EXPECT_EQ(l.at("size"), target.size());
  EXPECT_EQ(l.at("pinned"), false);

  // A deletion is a tombstone: nothing was there, so no type, mode, owner or mtime.
  ASSERT_EQ(by_path[gone].size(), 2u) << out;
  const Json& d = by_path[gone][1];
  EXPECT_EQ(d.at("number"), 2);
  EXPECT_EQ(d.at("op"), "DELETE");
  for (const char* none : {"type", "sha256", "mode", "uid", "gid", "mtime", "mtime_ns"}) {
    EXPECT_EQ(d.at(none), nullptr) << none;
  }
  EXPECT_EQ(by_path[gone][0].at("type"), "file");

  // A move: a tombstone naming where it went, and a version naming where it came from.
  ASSERT_EQ(by_path[from].size(), 2u) << out;
  const Json& left = by_path[from][1];
  EXPECT_EQ(left.at("op"), "MOVE");
  EXPECT_EQ(left.at("moved_to"), escape_bytes(to));
  EXPECT_EQ(left.at("type"), nullptr);
  ASSERT_EQ(by_path[to].size(), 1u) << out;
  const Json& arrived = by_path[to][0];
  EXPECT_EQ(arrived.at("op"), "MOVE");
  EXPECT_EQ(arrived.at("moved_from"), escape_bytes(from));
  EXPECT_EQ(arrived.at("moved_to"), nullptr);
  EXPECT_EQ(arrived.at("type"), "file");
  EXPECT_EQ(arrived.at("size"), 6);
}

// For people: a header, columns aligned under it, local time to the second, 12 hex digits
// of the digest, a readable size, and what the other columns do not say after the path.
TEST_F(ArchiveCommandsTest, VersionsTableHasAHeaderAlignedColumnsAndReadableFields) {
  const std::string path = dir_ / "src/odd\tname";
  write_file(path, std::string(1536, 'x'));
  archive_file(path);
  write_file(path, "two!");
  archive_file(path);
  const std::string link = dir_ / "src/link";
  ASSERT_EQ(::symlink("odd\tname", link.c_str()), 0);
  archive_file(link);
  std::string out;
  ASSERT_EQ(run({"versions", "--json", path}, &out), 0);
  const auto versions = Json::parse(out).at("paths").at(0).at("versions");
  std::string err;
  ASSERT_EQ(run({"versions", path}, &out, &err), 0) << err;
  std::vector<std::string> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 3u) << out;  // the header, then a row per version
  const std::string& header = lines[0];
  EXPECT_EQ(header.rfind("VERSION  ARCHIVED", 0), 0u) << header;
  EXPECT_EQ(out.find('\t'), std::string::npos) << "no TAB: columns are aligned with spaces";
  const auto column = [&](std::string_view name) { return header.find(name); };
  for (std::size_t i = 0; i < 2; ++i) {
    const std::string& row = lines[1 + i];
    const Json& v = versions[i];
    const std::string sha = v.at("sha256");
    EXPECT_EQ(row.find(sha.substr(0, 12) + "  "), column("SHA256")) << row;
    EXPECT_EQ(row.find(sha.substr(0, 13)), std::string::npos) << "12 hex digits only";
    EXPECT_EQ(row.find(local_time_text(v.at("archived_at_ns"))), column("ARCHIVED")) << row;
    EXPECT_EQ(row.find("UPDATE"), column("OP")) << row;
    EXPECT_EQ(row.find(shown_path(path)), column("PATH")) << row;
    const std::string size = i == 0 ? "1.5 KiB" : "4 bytes";
    EXPECT_EQ(row.find(size) + size.size(), column("SIZE") + 4) << "right-aligned: " << row;
  }
  ASSERT_EQ(run({"versions", link}, &out, &err), 0) << err;
  EXPECT_NE(out.find("  symlink  "), std::string::npos) << out;
  EXPECT_NE(out.find(shown_path(link) + " -> odd%09name\n"), std::string::npos) << out;
}

// `timewarp args...` through the built program, stdout and stderr both in `out`; with
// `terminal`, run by script(1) with them on a pseudo-terminal.
int run_program(const std::vector<std::string>& args, bool terminal, std::string* out) {
  std::vector<std::string> argv;
  if (terminal) {
    std::string command = test::cli_exe();
    for (const auto& a : args) command += " '" + a + "'";
    argv = {"/usr/bin/script", "-qec", command, "/dev/null"};
  } else {
    argv = {"/bin/sh", "-c", "exec \"$0\" \"$@\" 2>&1", test::cli_exe()};
    argv.insert(argv.end(), args.begin(), args.end());
  }
  return test::run_command(argv, out);
}

// The progress line of restore and verify: on a terminal, drawn at once and cleared before
// the summary; through a pipe, never a carriage return or an escape sequence.
TEST_F(ArchiveCommandsTest, ProgressOnlyWhenStderrIsATerminal) {
  const std::string tree = dir_ / "src/tree";
  std::filesystem::create_directories(tree);
  write_file(tree + "/a", std::string(3000, 'a'));
  write_file(tree + "/b", "b");
  archive_file(tree + "/a");
  archive_file(tree + "/b");
  archive_file(tree);
  const std::string root = "--backup-root=" + archive_;
  std::string out;
  ASSERT_EQ(run_program({root, "restore", tree, "--to", dir_ / "piped"}, false, &out), 0) << out;
  // The summary's size is readable.
  EXPECT_NE(out.find("restored 2 files, 0 symlinks, 1 directories (2.9 KiB) to "),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find('\r'), std::string::npos) << escape_bytes(out);
  EXPECT_EQ(out.find("\x1b["), std::string::npos) << escape_bytes(out);
  EXPECT_EQ(out.find("restoring:"), std::string::npos) << escape_bytes(out);
  ASSERT_EQ(run_program({root, "verify"}, false, &out), 0) << out;
  EXPECT_EQ(out.find('\r'), std::string::npos) << escape_bytes(out);
  EXPECT_EQ(out.find("verifying:"), std::string::npos) << escape_bytes(out);
  // The same commands on a terminal draw the line: the pipe's silence is the pipe's doing.
  if (!std::filesystem::exists("/usr/bin/script")) GTEST_SKIP() << "no script(1) for a terminal";
  ASSERT_EQ(run_program({root, "restore", tree, "--to", dir_ / "shown"}, true, &out), 0) << out;
  EXPECT_EQ(out.find("\rrestoring: "), 0u) << escape_bytes(out);
  EXPECT_NE(out.find("\r\x1b[Krestored 2 files"), std::string::npos)
      << "the line cleared before the summary: " << escape_bytes(out);
  ASSERT_EQ(run_program({root, "verify"}, true, &out), 0) << out;
  EXPECT_EQ(out.find("\rverifying: "), 0u) << escape_bytes(out);
  EXPECT_NE(out.find("\r\x1b[Kverified "), std::string::npos) << escape_bytes(out);
}

}  // namespace
}  // namespace tw
