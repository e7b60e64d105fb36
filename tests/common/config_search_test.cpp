// Where the programs people start find their configuration file (ARCHITECTURE.md,
// "Configuration"), where each key's value came from, and --version.
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include "common/config.hpp"
#include "common/version.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "config_parse.hpp"
#include "support/test_support.hpp"

namespace tw {
namespace {

// A command line of a program that searches for its file (timewarp, timewarp-monitor).
test::Parsed parse(std::vector<std::string> args) {
  return test::parse(std::move(args), ConfigSearch::Search);
}

// Sets (or with nullopt unsets) an environment variable for the life of the object.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, const std::optional<std::string>& value) : name_(std::move(name)) {
    if (const char* old = std::getenv(name_.c_str())) old_ = old;
    if (value) {
      ::setenv(name_.c_str(), value->c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// A project folder as the working directory, a user's config folder, and none of the
// environment that would name a file, for the life of the object.
class SearchPlaces : public testing::Test {
 protected:
  void SetUp() override {
    char cwd[4096];
    ASSERT_NE(::getcwd(cwd, sizeof cwd), nullptr);
    old_cwd_ = cwd;
    ASSERT_EQ(::chdir((dir_ / "project").c_str()), 0);
  }
  void TearDown() override { ASSERT_EQ(::chdir(old_cwd_.c_str()), 0); }

  std::string write(const std::string& relative, const std::string& root) {
    const auto path = dir_ / relative;
    test::write_file(path, "backup_root = \"" + root + "\"\n");
    ::chmod(path.c_str(), 0600);
    return path.string();
  }
  std::string project_file() { return (dir_ / "project/.timewarp.toml").string(); }

  test::TempDir dir_;
  bool made_ = (std::filesystem::create_directories(dir_ / "project"), true);
  ScopedEnv xdg_{"XDG_CONFIG_HOME", (dir_ / "xdg").string()};
  ScopedEnv named_{"TIMEWARP_CONFIG", std::nullopt};
  ScopedEnv root_{"BACKUP_ROOT", std::nullopt};
  std::string old_cwd_;
};

TEST_F(SearchPlaces, TheFirstFileFoundInOrderIsRead) {
  const auto named = write("named.toml", "/from/named");
  write("project/.timewarp.toml", "/from/project");
  const auto user = write("xdg/timewarp/timewarp.toml", "/from/user");
  {
    ScopedEnv env("TIMEWARP_CONFIG", named);
    auto p = parse({});
    ASSERT_EQ(p.code, -1) << p.err;
    EXPECT_EQ(p.config.backup_root, "/from/named");
    EXPECT_EQ(p.config.config_file, named);
  }
  auto p = parse({});
  ASSERT_EQ(p.code, -1) << p.err;
  EXPECT_EQ(p.config.backup_root, "/from/project");
  EXPECT_EQ(p.config.config_file, project_file());
  ASSERT_EQ(::unlink(project_file().c_str()), 0);
  p = parse({});
  ASSERT_EQ(p.code, -1) << p.err;
  EXPECT_EQ(p.config.backup_root, "/from/user");
  EXPECT_EQ(p.config.config_file, user);
}

TEST_F(SearchPlaces, TheCommandLineDecidesFirst) {
  write("project/.timewarp.toml", "/from/project");
  const auto other = write("other.toml", "/from/other");
  auto p = parse({"--config", other});
  ASSERT_EQ(p.code, -1) << p.err;
  EXPECT_EQ(p.config.backup_root, "/from/other");
  p = parse({"--no-config"});
  ASSERT_EQ(p.code, -1) << p.err;
  EXPECT_EQ(p.config.backup_root, "");
  EXPECT_EQ(p.config.config_file, "");
}

TEST_F(SearchPlaces, TheSchedulerAndArchiversReadOnlyAFileTheyAreGiven) {
  const auto named = write("named.toml", "/from/named");
  write("project/.timewarp.toml", "/from/project");
  ScopedEnv env("TIMEWARP_CONFIG", named);
  auto p = test::parse({});
  ASSERT_EQ(p.code, -1) << p.err;
  EXPECT_EQ(p.config.backup_root, "");
  EXPECT_EQ(p.config.config_file, "");
}

TEST_F(SearchPlaces, AFileOthersMayWriteIsSkippedAndNamed) {
  write("project/.timewarp.toml", "/from/project");
  ASSERT_EQ(::chmod(project_file().c_str(), 0666), 0);
  write("xdg/timewarp/timewarp.toml", "/from/user");
  auto p = parse({});
  ASSERT_EQ(p.code, -1) << p.err;
  EXPECT_EQ(p.config.backup_root, "/from/user");
  EXPECT_NE(p.err.find(project_file()), std::string::npos) << p.err;
  EXPECT_NE(p.err.find("others may write"), std::string::npos) << p.err;
}

TEST_F(SearchPlaces, AMissingNamedFileIsAnError) {
  ScopedEnv env("TIMEWARP_CONFIG", (dir_ / "absent.toml").string());
  auto p = parse({});
  EXPECT_EQ(p.code, 2);
  EXPECT_NE(p.err.find("absent.toml"), std::string::npos) << p.err;
}

TEST_F(SearchPlaces, EachKeySaysWhereItsValueCameFrom) {
  const auto file = write("project/.timewarp.toml", "/from/project");
  test::write_file(file, "backup_root = \"/from/project\"\nbatch_size = 7\narchivers = 3\n");
  ScopedEnv env("SCHEDULER_BATCHSIZE", "9");
  auto p = parse({"--archivers", "4"});
  ASSERT_EQ(p.code, -1) << p.err;
  EXPECT_EQ(p.config.key_origins.at("backup_root"), "file " + project_file());
  EXPECT_EQ(p.config.key_origins.at("batch_size"), "environment SCHEDULER_BATCHSIZE");
  EXPECT_EQ(p.config.key_origins.at("archivers"), "command line");
  EXPECT_EQ(p.config.key_origins.at("strategy"), "default");
  EXPECT_EQ(p.config.key_origins.size(), config_keys().size());
}

TEST(ConfigVersion, EveryProgramAnswersVersion) {
  auto p = test::parse({"--version"});
  EXPECT_EQ(p.code, 0) << p.err;
  EXPECT_EQ(p.out, "test " + std::string(kVersion) + "\n");
  EXPECT_FALSE(kVersion.empty());
}

}  // namespace
}  // namespace tw
