// `timewarp diff`: a small tree archived with the real Store at a known clock, then each kind
// of change archived an hour later, and the built program naming each with its sigil, its
// JSON, and its exit code.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "archive/retention.hpp"
#include "archive/store.hpp"
#include "archive/timefmt.hpp"
#include "archive_test_util.hpp"
#include "common/escape.hpp"
#include "support/test_support.hpp"

namespace tw {
namespace {

namespace fs = std::filesystem;
using archive::test::write_file;

constexpr std::int64_t kMinute = 60LL * 1'000'000'000;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

class DiffCommandTest : public ::testing::Test {
 protected:
  // The tree at t0: files, a link, a folder with a subfolder, all archived.
  void SetUp() override {
    archive::StoreHooks hooks;
    hooks.now = [this] { return clock_; };
    auto opened = archive::Store::open(archive_, archive::Store::Mode::ReadWrite, hooks);
    ASSERT_TRUE(opened) << opened.error();
    store_.emplace(std::move(*opened));
    for (const char* name : {"keep.txt", "edit.txt", "meta.txt", "gone.txt", "typed", "moved.txt",
                             "again.txt", "old_dir/a.txt", "old_dir/sub/b.txt"}) {
      write_file(src(name), fmt::format("{} at first", name), 0644);
    }
    ASSERT_EQ(::symlink("keep.txt", src("link").c_str()), 0);
    std::vector<std::string> paths{src_};
    for (const auto& entry : fs::recursive_directory_iterator(src_)) {
      paths.push_back(entry.path().native());
    }
    for (const auto& path : paths) archive(path);
    clock_ += 60 * kMinute;
  }

  std::string src(const std::string& name) const { return src_ + "/" + name; }
  void archive(const std::string& path) {
    const auto result = store_->update(path);
    ASSERT_EQ(result.outcome, Outcome::Complete) << path << ": " << result.message;
  }
  void remove(const std::string& name) {
    fs::remove_all(src(name));
    ASSERT_EQ(store_->remove(src(name)).outcome, Outcome::Complete) << name;
  }
  void rename(const std::string& from, const std::string& to) {
    fs::rename(src(from), src(to));
    ASSERT_EQ(store_->move(src(from), src(to)).outcome, Outcome::Complete) << from;
  }

  // One change of each kind, archived at t0 + 1h.
  void change_each_kind() {
    write_file(src("edit.txt"), "edited, and longer");
    archive(src("edit.txt"));
    ASSERT_EQ(::chmod(src("meta.txt").c_str(), 0600), 0);
    archive(src("meta.txt"));
    remove("gone.txt");
    write_file(src("new.txt"), "new");
    archive(src("new.txt"));
    fs::remove(src("link"));
    ASSERT_EQ(::symlink("edit.txt", src("link").c_str()), 0);
    archive(src("link"));
    fs::remove(src("typed"));
    fs::create_directory(src("typed"));
    archive(src("typed"));
    rename("moved.txt", "moved2.txt");
    rename("old_dir", "new_dir");
  }

  // Runs the built `timewarp diff <args...>` with the test archive as backup root, here (a
  // relative PATH is taken from the working directory).
  int run(std::vector<std::string> args, std::string* out = nullptr, std::string* err = nullptr) {
    const std::string err_file = dir_ / "stderr";
    args.insert(args.begin(), {"/bin/sh", "-c", "f=$1; shift; exec \"$@\" 2>\"$f\"", "sh", err_file,
                               test::cli_exe(), "--backup-root=" + archive_, "diff"});
    std::string captured;
    const int code = test::run_command(args, &captured);
    if (out != nullptr) *out = captured;
    if (err != nullptr) *err = test::read_file(err_file);
    return code;
  }

  // The lines of `diff args...` (exit 0 expected), the summary line last.
  std::vector<std::string> diff_lines(std::vector<std::string> args) {
    std::string out;
    std::string err;
    EXPECT_EQ(run(std::move(args), &out, &err), 0) << out << err;
    EXPECT_EQ(err, "");
    return lines_of(out);
  }

  nlohmann::json diff_json(std::vector<std::string> args) {
    args.push_back("--json");
    std::string out;
    std::string err;
    EXPECT_EQ(run(std::move(args), &out, &err), 0) << out << err;
    return nlohmann::json::parse(out);
  }

  std::string at(std::int64_t ns) const { return archive::format_time_ns(ns); }

  archive::test::TempDir dir_;
  std::string src_ = dir_ / "src";
  std::string archive_ = dir_ / "archive";
  std::int64_t t0_ = *archive::parse_time_ns("2024-01-01T00:00:00Z");
  std::int64_t clock_ = t0_;
  std::optional<archive::Store> store_;
};

TEST_F(DiffCommandTest, EachKindOfChangeIsOneLineWithItsSigil) {
  change_each_kind();
  const auto lines = diff_lines({at(t0_ + 30 * kMinute), src_});
  const std::vector<std::string> expected = {
      "M  " + src("edit.txt") + "  (size 17 -> 18)",
      "-  " + src("gone.txt"),
      "M  " + src("link") + "  (target keep.txt -> edit.txt)",
      "m  " + src("meta.txt") + "  (mode 0644 -> 0600)",
      "R  " + src("moved.txt") + " -> " + src("moved2.txt"),
      "+  " + src("new.txt"),
      "R  " + src("old_dir") + " -> " + src("new_dir") + "  (with 3 entries beneath)",
      "T  " + src("typed") + "  (file -> directory)",
  };
  ASSERT_EQ(lines.size(), expected.size() + 1) << ::testing::PrintToString(lines);
  EXPECT_EQ(std::vector<std::string>(lines.begin(), lines.end() - 1), expected);
  EXPECT_TRUE(
      lines.back().starts_with(fmt::format("8 changes from {} to ", at(t0_ + 30 * kMinute))))
      << lines.back();
  EXPECT_TRUE(lines.back().ends_with(fmt::format(
      " beneath {}: 1 added, 1 removed, 2 content, 1 metadata, 1 type, 2 renamed", src_)))
      << lines.back();
  // T2 given, and every source (no PATH): the same changes.
  const auto explicit_to = diff_lines({at(t0_ + 30 * kMinute), at(clock_ + kMinute)});
  EXPECT_EQ(std::vector<std::string>(explicit_to.begin(), explicit_to.end() - 1), expected);
  // Backwards, from the later instant to the earlier: each change the other way round.
  const auto backwards = diff_lines({"now", at(t0_ + 30 * kMinute), src_});
  EXPECT_EQ(backwards.front(), "M  " + src("edit.txt") + "  (size 18 -> 17)");
  EXPECT_NE(std::find(backwards.begin(), backwards.end(), "+  " + src("gone.txt")),
            backwards.end());
}

TEST_F(DiffCommandTest, AnEntryChangedInARenamedFolderHasItsOwnLine) {
  rename("old_dir/sub/b.txt", "elsewhere.txt");
  rename("old_dir", "new_dir");
  clock_ += kMinute;
  write_file(src("new_dir/a.txt"), "changed after the rename");
  archive(src("new_dir/a.txt"));
  const auto lines = diff_lines({at(t0_ + 30 * kMinute), src_});
  const std::vector<std::string> expected = {
      "R  " + src("old_dir/sub/b.txt") + " -> " + src("elsewhere.txt"),
      "R  " + src("old_dir") + " -> " + src("new_dir") + "  (with 1 entry beneath)",
      "RM " + src("old_dir/a.txt") + " -> " + src("new_dir/a.txt") + "  (size 22 -> 24)",
  };
  EXPECT_EQ(std::vector<std::string>(lines.begin(), lines.end() - 1), expected);
}

TEST_F(DiffCommandTest, AFileDeletedAndMadeAgainIsComparedByItsTwoStates) {
  const std::int64_t before = t0_ + 30 * kMinute;
  remove("again.txt");
  clock_ += kMinute;
  const std::int64_t while_gone = clock_;
  clock_ += kMinute;
  write_file(src("again.txt"), "again.txt at first");
  archive(src("again.txt"));
  // Same content, a new mtime: only the metadata.
  auto lines = diff_lines({at(before), src("again.txt")});
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_TRUE(lines[0].starts_with("m  " + src("again.txt") + "  (mtime ")) << lines[0];
  EXPECT_EQ(diff_lines({at(before), at(while_gone), src_})[0], "-  " + src("again.txt"));
  EXPECT_EQ(diff_lines({at(while_gone), src_})[0], "+  " + src("again.txt"));
  clock_ += kMinute;
  write_file(src("again.txt"), "different");
  archive(src("again.txt"));
  EXPECT_EQ(diff_lines({at(before), src_})[0], "M  " + src("again.txt") + "  (size 18 -> 9)");
}

TEST_F(DiffCommandTest, NoChangesExitsZeroWithTheSummaryAlone) {
  const auto lines = diff_lines({at(t0_ + 30 * kMinute), src_});
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_TRUE(lines[0].starts_with("no changes from " + at(t0_ + 30 * kMinute) + " to "))
      << lines[0];
  change_each_kind();
  EXPECT_EQ(diff_lines({"now", src_}).size(), 1u);
  EXPECT_EQ(diff_lines({at(t0_), at(t0_ + 30 * kMinute), src_}).size(), 1u);
}

TEST_F(DiffCommandTest, APathRestrictsTheDiffToWhatIsBeneathIt) {
  change_each_kind();
  write_file(src("new_dir/sub/c.txt"), "c");
  archive(src("new_dir/sub/c.txt"));
  // Beneath the new name nothing existed at T1: what is there now was added.
  const auto beneath = diff_lines({at(t0_ + 30 * kMinute), src("new_dir")});
  EXPECT_EQ(std::vector<std::string>(beneath.begin(), beneath.end() - 1),
            (std::vector<std::string>{"+  " + src("new_dir"), "+  " + src("new_dir/a.txt"),
                                      "+  " + src("new_dir/sub"), "+  " + src("new_dir/sub/b.txt"),
                                      "+  " + src("new_dir/sub/c.txt")}));
  const auto edit = diff_lines({at(t0_ + 30 * kMinute), "now", src("edit.txt")});
  EXPECT_EQ(edit.size(), 2u);
  EXPECT_EQ(edit[0], "M  " + src("edit.txt") + "  (size 17 -> 18)");
  // A relative PATH starting with '.' is taken from here.
  const auto cwd = fs::current_path();
  fs::current_path(src_);
  const auto relative = diff_lines({at(t0_ + 30 * kMinute), "./meta.txt"});
  fs::current_path(cwd);
  ASSERT_EQ(relative.size(), 2u);
  EXPECT_EQ(relative[0], "m  " + src("meta.txt") + "  (mode 0644 -> 0600)");
}

TEST_F(DiffCommandTest, JsonHoldsTheSameChangesWithBothVersions) {
  change_each_kind();
  const auto doc = diff_json({at(t0_ + 30 * kMinute), src_});
  EXPECT_EQ(doc["from"], at(t0_ + 30 * kMinute));
  EXPECT_EQ(doc["path"], escape_bytes(src_));
  EXPECT_EQ(doc["counts"], (nlohmann::json{{"added", 1},
                                           {"removed", 1},
                                           {"content", 2},
                                           {"metadata", 1},
                                           {"type", 1},
                                           {"renamed", 2}}));
  ASSERT_EQ(doc["changes"].size(), 8u);
  const auto& edit = doc["changes"][0];
  EXPECT_EQ(edit["kind"], "content");
  EXPECT_EQ(edit["path"], src("edit.txt"));
  EXPECT_EQ(edit["before"]["size"], 17);
  EXPECT_EQ(edit["after"]["size"], 18);
  EXPECT_NE(edit["before"]["sha256"], edit["after"]["sha256"]);
  EXPECT_EQ(doc["changes"][1]["kind"], "removed");
  EXPECT_FALSE(doc["changes"][1].contains("after"));
  EXPECT_EQ(doc["changes"][2]["after"]["link_target"], "edit.txt");
  EXPECT_EQ(doc["changes"][3]["before"]["mode"], "0644");
  EXPECT_EQ(doc["changes"][3]["after"]["mode"], "0600");
  const auto& folder = doc["changes"][6];
  EXPECT_EQ(folder["kind"], "renamed");
  EXPECT_EQ(folder["from_path"], src("old_dir"));
  EXPECT_EQ(folder["path"], src("new_dir"));
  EXPECT_EQ(folder["entries"], 3);
  EXPECT_EQ(folder["after"]["type"], "directory");
  EXPECT_EQ(doc["changes"][7]["before"]["type"], "file");
  EXPECT_EQ(doc["changes"][7]["after"]["type"], "directory");
}

TEST_F(DiffCommandTest, NamesAreEscapedForPeopleAndExactInJson) {
  const std::string odd = "tab\there\xff";
  write_file(src(odd), "odd");
  archive(src(odd));
  const auto lines = diff_lines({at(t0_ + 30 * kMinute), src_});
  EXPECT_EQ(lines[0], "+  " + shown_path(src(odd)));
  const auto doc = diff_json({at(t0_ + 30 * kMinute), src_});
  EXPECT_EQ(doc["changes"][0]["path"], escape_bytes(src(odd)));
}

TEST_F(DiffCommandTest, BadInputExitsTwoAndAThinnedMomentOne) {
  std::string err;
  EXPECT_EQ(run({"yesterday-ish"}, nullptr, &err), 2);
  EXPECT_NE(err.find("yesterday-ish"), std::string::npos) << err;
  EXPECT_EQ(run({at(t0_), "src"}, nullptr, &err), 2);
  EXPECT_NE(err.find("a PATH starts with / or ."), std::string::npos) << err;
  EXPECT_EQ(run({at(t0_), src_, "now"}, nullptr, &err), 2);
  EXPECT_EQ(run({at(t0_), src("never/archived")}, nullptr, &err), 2);
  EXPECT_NE(err.find("is not in the archive"), std::string::npos) << err;
  // Keep only the latest versions: the moment at t0 + 30 min is thinned.
  change_each_kind();
  clock_ += 24 * 60 * kMinute;
  const archive::RetentionPolicy latest_only{.keep_within_ns = kMinute,
                                             .keep_hourly = 0,
                                             .keep_daily = 0,
                                             .keep_weekly = 0,
                                             .keep_monthly = 0,
                                             .keep_yearly = 0};
  ASSERT_TRUE(store_->forget(archive::RetentionPolicies(latest_only), clock_, {}));
  EXPECT_EQ(run({at(t0_ + 30 * kMinute), src_}, nullptr, &err), 1);
  EXPECT_NE(err.find("retention policy thinned"), std::string::npos) << err;
}

}  // namespace
}  // namespace tw
