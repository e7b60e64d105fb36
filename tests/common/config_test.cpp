#include <CLI/CLI.hpp>

#include "common/config.hpp"
#include "common/folder_policy.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <stdexcept>
#include <variant>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "config_parse.hpp"
#include "support/test_support.hpp"

namespace tw {
namespace {

using test::parse;
using test::Parsed;

TEST(Config, FileKeysAndFlags) {
  test::TempDir dir;
  test::write_file(dir / "tw.toml",
                   "backup_root = \"/srv/archive\"\narchivers = 3\nbatch_size = 500\n"
                   "strategy = \"lifo\"\nsource_dirs = [\"/a\", \"/b\"]\ncoalesce = false\n");
  auto p = parse({"--config", (dir / "tw.toml").string(), "--batch-size", "7"});
  ASSERT_EQ(p.code, -1) << p.err;
  EXPECT_EQ(p.config.backup_root, "/srv/archive");
  EXPECT_EQ(p.config.archivers, 3);
  EXPECT_EQ(p.config.batch_size, 7);  // the flag wins over the file
  EXPECT_EQ(p.config.strategy, "lifo");
  EXPECT_EQ(p.config.source_dirs, (std::vector<std::string>{"/a", "/b"}));
  EXPECT_FALSE(p.config.coalesce);
}

TEST(Config, EnvironmentSitsBetweenFlagsAndFile) {
  test::TempDir dir;
  test::write_file(dir / "tw.toml", "archivers = 3\nbatch_size = 9\n");
  ::setenv("MAX_ARCHIVERS", "5", 1);
  ::setenv("SCHEDULER_BATCHSIZE", "11", 1);
  auto p = parse({"--config", (dir / "tw.toml").string(), "--batch-size", "12"});
  ::unsetenv("MAX_ARCHIVERS");
  ::unsetenv("SCHEDULER_BATCHSIZE");
  ASSERT_EQ(p.code, -1) << p.err;
  EXPECT_EQ(p.config.archivers, 5);    // environment over file
  EXPECT_EQ(p.config.batch_size, 12);  // flag over environment
}

TEST(Config, UnknownKeyIsNamedAndRefused) {
  test::TempDir dir;
  test::write_file(dir / "tw.toml", "archivers = 2\nbatch_sise = 10\n");
  auto p = parse({"--config", (dir / "tw.toml").string()});
  EXPECT_EQ(p.code, 2);
  EXPECT_NE(p.err.find("unknown configuration key 'batch_sise'"), std::string::npos) << p.err;
}

TEST(Config, BadValuesNameTheKeyAndWhatIsAllowed) {
  auto p = parse({"--archivers", "0"});
  EXPECT_EQ(p.code, 2);
  EXPECT_NE(p.err.find("--archivers"), std::string::npos) << p.err;
  EXPECT_NE(p.err.find("1 to 256"), std::string::npos) << p.err;

  p = parse({"--strategy", "random"});
  EXPECT_EQ(p.code, 2);
  EXPECT_NE(p.err.find("--strategy"), std::string::npos) << p.err;
  EXPECT_NE(p.err.find("fifo"), std::string::npos) << p.err;

  test::TempDir dir;
  test::write_file(dir / "tw.toml", "batch_size = \"lots\"\n");
  p = parse({"--config", (dir / "tw.toml").string()});
  EXPECT_EQ(p.code, 2);
  EXPECT_NE(p.err.find("batch"), std::string::npos) << p.err;
}

// A folder's own policy: "FOLDER: key=value ...", each mistake named with the key.
TEST(Config, AFolderPolicyIsCheckedWhenRead) {
  const auto p = parse({"--retention-folder", "/srv/db: keep_within=36h keep_daily=7",
                        "--retention-folder=/var/log/: keep_weekly=0"});
  ASSERT_EQ(p.code, -1) << p.err;
  ASSERT_EQ(p.config.retention_folder.size(), 2u);
  auto db = parse_folder_policy(p.config.retention_folder[0]);
  ASSERT_TRUE(db) << db.error();
  EXPECT_EQ(db->folder, "/srv/db");
  EXPECT_EQ(db->keep_within, 36 * 3600.0);
  EXPECT_EQ(db->keep_daily, 7);
  EXPECT_FALSE(db->keep_hourly);
  auto log = parse_folder_policy(p.config.retention_folder[1]);
  ASSERT_TRUE(log) << log.error();
  EXPECT_EQ(log->folder, "/var/log") << "no trailing slash";
  EXPECT_EQ(log->keep_weekly, 0);
  // A colon inside the folder's name is part of the name: the keys follow the last one.
  auto colon = parse_folder_policy("/srv/a:b: keep_yearly=2");
  ASSERT_TRUE(colon) << colon.error();
  EXPECT_EQ(colon->folder, "/srv/a:b");

  for (const auto& [entry, says] : std::vector<std::pair<std::string, std::string>>{
           {"/srv/db keep_daily=7", "not 'FOLDER: keep_daily=7"},
           {"srv/db: keep_daily=7", "absolute folder"},
           {"/srv/db:", "names no keep_* key"},
           {"/srv/db: keep_dayly=7", "unknown key 'keep_dayly'"},
           {"/srv/db: keep_daily=-1", "keep_daily=-1 is not a whole number"},
           {"/srv/db: keep_daily=7 keep_daily=8", "keep_daily is given twice"},
           {"/srv/db: keep_within=3y", "keep_within=3y is not a time"},
           {"/srv/db: keep_daily", "'keep_daily' is not key=value"}}) {
    const auto bad = parse({"--retention-folder", entry});
    EXPECT_EQ(bad.code, 2) << entry;
    EXPECT_NE(bad.err.find("retention"), std::string::npos) << bad.err;
    EXPECT_NE(bad.err.find(says), std::string::npos) << entry << ": " << bad.err;
  }
  test::TempDir dir;
  test::write_file(dir / "tw.toml", "retention_folder = [\"/srv: keep_hourly=x\"]\n");
  const auto file = parse({"--config", (dir / "tw.toml").string()});
  EXPECT_EQ(file.code, 2);
  EXPECT_NE(file.err.find("keep_hourly=x"), std::string::npos) << file.err;
}

TEST(Config, CompressionKeys) {
  auto p = parse({});
  ASSERT_EQ(p.code, -1) << p.err;
  EXPECT_EQ(p.config.compression_level, 2);
  EXPECT_EQ(p.config.compression_threads, 0);

  test::TempDir dir;
  test::write_file(dir / "tw.toml", "compression_level = -5\ncompression_threads = 3\n");
  p = parse({"--config", (dir / "tw.toml").string()});
  ASSERT_EQ(p.code, -1) << p.err;
  EXPECT_EQ(p.config.compression_level, -5);
  EXPECT_EQ(p.config.compression_threads, 3);

  ::setenv("TIMEWARP_COMPRESSION_LEVEL", "19", 1);
  p = parse({"--compression-threads", "1"});
  ::unsetenv("TIMEWARP_COMPRESSION_LEVEL");
  ASSERT_EQ(p.code, -1) << p.err;
  EXPECT_EQ(p.config.compression_level, 19);
  EXPECT_EQ(p.config.compression_threads, 1);

  p = parse({"--compression-level=-7"});
  ASSERT_EQ(p.code, -1) << p.err;
  EXPECT_EQ(p.config.compression_level, -7);
}

// Expects `args` refused (exit status 2) with a message holding every one of `needles`.
void expect_refused(const std::vector<std::string>& args,
                    std::initializer_list<std::string_view> needles) {
  const auto p = parse(args);
  EXPECT_EQ(p.code, 2) << fmt::format("{}", fmt::join(args, " "));
  for (const auto needle : needles) EXPECT_NE(p.err.find(needle), std::string::npos) << p.err;
}

TEST(Config, BadCompressionValuesNameTheKey) {
  for (const char* bad : {"20", "-8", "fast", "1.5"}) {
    expect_refused({fmt::format("--compression-level={}", bad)}, {"compression-level"});
  }
  expect_refused({"--compression-level=20"}, {"-7 to 19"});
  for (const char* bad : {"-1", "65", "all"}) {
    expect_refused({fmt::format("--compression-threads={}", bad)}, {"compression-threads"});
  }
  test::TempDir dir;
  test::write_file(dir / "tw.toml", "compression_threads = 100\n");
  expect_refused({"--config", (dir / "tw.toml").string()}, {"compression", "0 to 64"});
}

// A value for `key` from each of the three sources: the file, the environment, the flag.
struct Source {
  const char* name;
  std::function<Parsed(std::string_view key, const std::string& value)> parse;
};

std::vector<Source> sources(const test::TempDir& dir) {
  const auto file = [&dir](std::string_view key, const std::string& value) {
    const auto path = dir / "tw.toml";
    test::write_file(path, fmt::format("{} = {}\n", key, value));
    return parse({"--config", path.string()});
  };
  const auto env = [](std::string_view key, const std::string& value) {
    const auto keys = config_keys();
    const auto entry = std::find_if(keys.begin(), keys.end(),
                                    [key](const ConfigKey& k) { return k.name == key; });
    if (entry == keys.end()) throw std::invalid_argument(std::string(key));
    const std::string name = env_name(*entry);
    ::setenv(name.c_str(), value.c_str(), 1);
    auto p = parse({});
    ::unsetenv(name.c_str());
    return p;
  };
  const auto flag = [](std::string_view key, const std::string& value) {
    return parse({fmt::format("--{}={}", key, value)});
  };
  return {{"file", file}, {"environment", env}, {"flag", flag}};
}

// The key as messages name it: --batch-size for batch_size.
std::string flag_of(std::string_view key) {
  std::string flag = fmt::format("--{}", key);
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

// Expects `value` for `key` refused from every source, the message naming both.
void expect_refused_everywhere(std::string_view key, const std::string& value) {
  test::TempDir dir;
  for (const auto& source : sources(dir)) {
    const auto p = source.parse(key, value);
    EXPECT_EQ(p.code, 2) << key << " = " << value << " from the " << source.name;
    EXPECT_NE(p.err.find(flag_of(key)), std::string::npos) << source.name << ": " << p.err;
    EXPECT_NE(p.err.find(fmt::format("'{}'", value)), std::string::npos)
        << source.name << ": " << p.err;
    EXPECT_EQ(std::count(p.err.begin(), p.err.end(), '\n'), 1) << source.name << ": " << p.err;
  }
}

TEST(Config, FloatKeysRefuseNanAndInfinity) {
  for (const char* key : {"item_timeout", "lease_time", "retry_base_delay", "retry_max_delay",
                          "max_cpu_percent", "heartbeat_interval", "flush_interval",
                          "event_delay", "rescan_interval", "prune_age", "prune_interval"}) {
    for (const char* value : {"nan", "NaN", "-nan", "+NAN", "nan(0x1)", "inf", "-inf", "+Inf",
                              "INF", "infinity", "-Infinity", "1e999", "0x1p3"}) {
      expect_refused_everywhere(key, value);
    }
  }
}

TEST(Config, FloatKeysTakeDecimals) {
  test::TempDir dir;
  for (const auto& source : sources(dir)) {
    for (const auto& [value, expected] : std::vector<std::pair<std::string, double>>{
             {"2.5", 2.5}, {"1e2", 100.0}, {".5", 0.5}, {"7.", 7.0}, {"+3", 3.0}, {"012", 12.0}}) {
      const auto p = source.parse("item_timeout", value);
      ASSERT_EQ(p.code, -1) << value << " from the " << source.name << ": " << p.err;
      EXPECT_DOUBLE_EQ(p.config.item_timeout, expected) << value << " from the " << source.name;
    }
  }
}

TEST(Config, IntegersAreReadInBase10) {
  test::TempDir dir;
  for (const auto& source : sources(dir)) {
    auto p = source.parse("batch_size", "0100");  // not octal 64
    ASSERT_EQ(p.code, -1) << source.name << ": " << p.err;
    EXPECT_EQ(p.config.batch_size, 100) << source.name;
    p = source.parse("max_file_size", "010");
    ASSERT_EQ(p.code, -1) << source.name << ": " << p.err;
    EXPECT_EQ(p.config.max_file_size, 10u) << source.name;
    p = source.parse("compression_level", "-07");
    ASSERT_EQ(p.code, -1) << source.name << ": " << p.err;
    EXPECT_EQ(p.config.compression_level, -7) << source.name;
  }
  for (const char* key : {"batch_size", "archivers", "max_file_size", "backlog_warning"}) {
    for (const char* value : {"0x10", "1e2", "12.0", "1_000", "ten", "08x", "--5"}) {
      expect_refused_everywhere(key, value);
    }
  }
}

TEST(Config, IntegersBeyondTheirTypeOrRangeAreRefused) {
  for (const char* value : {"18446744073709551616", "99999999999999999999999"}) {
    expect_refused_everywhere("max_file_size", value);
    expect_refused_everywhere("max_bandwidth", value);
  }
  expect_refused_everywhere("backlog_warning", "9223372036854775808");
  expect_refused_everywhere("backlog_warning", "-9223372036854775809");
  expect_refused_everywhere("batch_size", "4294967396");  // 2^32 + 100 is not 100
  expect_refused_everywhere("archivers", "-4294967294");  // nor is -2^32 + 2 two
  expect_refused({"--max-file-size=18446744073709551616"}, {"0 to 18446744073709551615"});

  auto p = parse({"--max-file-size=18446744073709551615"});
  ASSERT_EQ(p.code, -1) << p.err;
  EXPECT_EQ(p.config.max_file_size, 18446744073709551615u);
}

TEST(Config, ABadEnvironmentValueNamesItsVariable) {
  ::setenv("SCHEDULER_BATCHSIZE", "0x10", 1);
  ::setenv("TIMEWARP_ITEM_TIMEOUT", "nan", 1);
  auto p = parse({});
  ::unsetenv("SCHEDULER_BATCHSIZE");
  EXPECT_EQ(p.code, 2);
  EXPECT_NE(p.err.find("--batch-size: value '0x10'"), std::string::npos) << p.err;
  EXPECT_NE(p.err.find("(from the environment: SCHEDULER_BATCHSIZE)"), std::string::npos) << p.err;
  p = parse({});
  ::unsetenv("TIMEWARP_ITEM_TIMEOUT");
  EXPECT_EQ(p.code, 2);
  EXPECT_NE(p.err.find("(from the environment: TIMEWARP_ITEM_TIMEOUT)"), std::string::npos)
      << p.err;
  p = parse({"--batch-size=0x10"});
  EXPECT_EQ(p.err.find("environment"), std::string::npos) << p.err;
}

TEST(Config, UnsignedKeysRefuseNegatives) {
  for (const char* key : {"max_file_size", "max_bandwidth"}) {
    for (const char* value : {"-1", "-0", "-18446744073709551615"}) {
      expect_refused_everywhere(key, value);
    }
  }
}

TEST(Config, ErrorsNeverShowADatabasePassword) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--databse=postgresql://ann:S3cretPw@db.example/tw"},
           {"--databse", "host=db password=S3cretPw"},
           {"--database=host=db password=S3cretPw", "--archivers=0x2"},
           {"postgres://ann:S3cretPw@db/tw"}}) {
    const auto p = parse(args);
    EXPECT_EQ(p.code, 2) << fmt::format("{}", fmt::join(args, " "));
    EXPECT_EQ(p.err.find("S3cretPw"), std::string::npos) << p.err;
  }
}

TEST(Config, MissingConfigFileIsAnError) {
  auto p = parse({"--config", "/nonexistent/tw.toml"});
  EXPECT_EQ(p.code, 2);
  EXPECT_NE(p.err.find("/nonexistent/tw.toml"), std::string::npos) << p.err;
}

TEST(Config, ArgsForAChildRoundTrip) {
  Config c;
  c.backup_root = "/srv/a b";
  c.source_dirs = {"/x", "/y"};
  c.archivers = 4;
  c.strategy = "priority";
  c.retry_base_delay = 0.25;
  c.compression_level = -3;
  c.compression_threads = 2;
  c.database = "password=secret";
  auto args = config_to_args(c);
  for (const auto& a : args) EXPECT_EQ(a.find("secret"), std::string::npos);
  auto p = parse(args);
  ASSERT_EQ(p.code, -1) << p.err;
  EXPECT_EQ(p.config.backup_root, c.backup_root);
  EXPECT_EQ(p.config.source_dirs, c.source_dirs);
  EXPECT_EQ(p.config.archivers, 4);
  EXPECT_EQ(p.config.strategy, "priority");
  EXPECT_DOUBLE_EQ(p.config.retry_base_delay, 0.25);
  EXPECT_EQ(p.config.compression_level, -3);
  EXPECT_EQ(p.config.compression_threads, 2);
}


// Every key set to a value other than its default (a fraction for a floating-point key, the
// end of its range for an integer, a path with a space for text), and the internal options.
Config changed_config() {
  Config c;
  for (const ConfigKey& key : config_keys()) {
    std::visit([&c]<class K>(const K& k) {
      auto& field = c.*k.field;
      if constexpr (std::same_as<K, TextKey>) {
        field = "/srv/a b";
      } else if constexpr (std::same_as<K, ListKey>) {
        field = {"/x", "/y z"};
        if (k.check != nullptr) field = {"/x: keep_daily=3", "/y z: keep_within=7200, keep_hourly=2"};
      } else if constexpr (std::same_as<K, SwitchKey>) {
        field = !field;
      } else if constexpr (std::same_as<K, ChoiceKey>) {
        field = std::string(k.choices.back() == field ? k.choices.front() : k.choices.back());
      } else if constexpr (std::floating_point<std::remove_cvref_t<decltype(field)>>) {
        field = k.lowest + (k.highest - k.lowest) / 3;
      } else {
        field = field == k.highest ? k.lowest : k.highest;
      }
    }, key.value);
  }
  c.archiver_exe = "/opt/tw/archiver";
  c.archiver_args = {"--delay-ms=5", "--record=/tmp/r"};
  return c;
}

const Config kDefaults;

TEST(ConfigKeys, ChangedConfigDiffersInEveryKey) {
  const Config c = changed_config();
  for (const ConfigKey& key : config_keys())
    EXPECT_NE(key_value(key, c), key_value(key, kDefaults)) << key.name;
}

TEST(ConfigKeys, NamesAndEnvironmentVariablesAreUnique) {
  std::set<std::string> names, envs;
  for (const ConfigKey& key : config_keys()) {
    EXPECT_TRUE(names.insert(std::string(key.name)).second) << key.name;
    EXPECT_TRUE(envs.insert(env_name(key)).second) << key.name;
  }
}

// ARCHITECTURE.md, "Configuration": the five environment names the suite has always used.
TEST(ConfigKeys, LegacyEnvironmentNames) {
  const std::map<std::string, std::string> legacy = {{"backup_root", "BACKUP_ROOT"},
                                                     {"source_dirs", "SOURCE_DIRS"},
                                                     {"archivers", "MAX_ARCHIVERS"},
                                                     {"batch_size", "SCHEDULER_BATCHSIZE"},
                                                     {"strategy", "SCHEDULER_STRATEGY"}};
  for (const ConfigKey& key : config_keys()) {
    std::string expected = "TIMEWARP_" + std::string(key.name);
    std::transform(expected.begin(), expected.end(), expected.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::toupper(ch)); });
    if (const auto it = legacy.find(std::string(key.name)); it != legacy.end()) expected = it->second;
    EXPECT_EQ(env_name(key), expected);
  }
}

// `key`'s value in `c` as a config file writes it.
std::string file_value(const ConfigKey& key, const Config& c) {
  return std::visit(
      [&]<class K>(const K& k) -> std::string {
        if constexpr (std::same_as<K, TextKey> || std::same_as<K, ChoiceKey>) {
          return fmt::format("\"{}\"", c.*k.field);
        } else {
          return key_value(key, c);  // a list as ["a", "b"], as TOML writes it
        }
      },
      key.value);
}

// Each key from the file, its environment variable, both flags and its extra flag.
TEST(ConfigKeys, EveryKeyIsReadFromEverySource) {
  const Config c = changed_config();
  test::TempDir dir;
  for (const ConfigKey& key : config_keys()) {
    const std::string want = key_value(key, c);
    const bool list = std::holds_alternative<ListKey>(key.value);
    std::vector<std::vector<std::string>> flag_args;
    std::string dashed(key.name);
    std::replace(dashed.begin(), dashed.end(), '_', '-');
    for (std::string name : {dashed, std::string(key.name), std::string(key.extra_flag)}) {
      if (name.empty()) continue;
      if (name.front() != '-') name = "--" + name;
      std::vector<std::string> args;
      if (list) {
        for (const auto& item : c.*std::get<ListKey>(key.value).field) args.push_back(name + "=" + item);
      } else {
        args.push_back(name + "=" + want);
      }
      flag_args.push_back(args);
    }
    for (const auto& args : flag_args) {
      const auto p = parse(args);
      ASSERT_EQ(p.code, -1) << p.err;
      EXPECT_EQ(key_value(key, p.config), want) << fmt::format("{}", fmt::join(args, " "));
    }

    test::write_file(dir / "tw.toml", fmt::format("{} = {}\n", key.name, file_value(key, c)));
    auto p = parse({"--config", (dir / "tw.toml").string()});
    ASSERT_EQ(p.code, -1) << p.err;
    EXPECT_EQ(key_value(key, p.config), want) << key.name << " from the file";

    if (list) continue;  // an environment variable holds one item
    const std::string env = env_name(key);
    ::setenv(env.c_str(), want.c_str(), 1);
    p = parse({});
    ::unsetenv(env.c_str());
    ASSERT_EQ(p.code, -1) << p.err;
    EXPECT_EQ(key_value(key, p.config), want) << key.name << " from " << env;
  }
}

// What a child started with `args` reads.
Config child_config(const std::vector<std::string>& args) {
  const auto p = parse(args);
  EXPECT_EQ(p.code, -1) << p.err;
  return p.config;
}

TEST(ConfigKeys, EveryKeyRoundTripsToTheScheduler) {
  const Config c = changed_config();
  const auto args = config_to_args(c);
  const Config child = child_config(args);
  for (const ConfigKey& key : config_keys()) {
    const Config& expected = key.audience == Audience::None ? kDefaults : c;
    EXPECT_EQ(key_value(key, child), key_value(key, expected)) << key.name;
  }
  EXPECT_EQ(child.archiver_exe, c.archiver_exe);
  EXPECT_EQ(child.archiver_args, c.archiver_args);
  EXPECT_EQ(child.scheduler_exe, "");
  for (const auto& arg : args) EXPECT_EQ(arg.find("--database"), std::string::npos) << arg;
}

TEST(ConfigKeys, ArchiversGetExactlyTheKeysMarkedForThem) {
  const Config c = changed_config();
  const auto args = config_to_args(c, Audience::Archiver);
  std::set<std::string> flags, marked;
  for (const auto& arg : args) flags.insert(arg.substr(0, arg.find('=')));
  for (const ConfigKey& key : config_keys()) {
    if (key.audience != Audience::Archiver) continue;
    std::string flag = "--" + std::string(key.name);
    std::replace(flag.begin(), flag.end(), '_', '-');
    marked.insert(flag);
  }
  EXPECT_EQ(flags, marked);
  // The archiver, which reads them with add_config_options, has those and the defaults.
  const Config child = child_config(args);
  for (const ConfigKey& key : config_keys()) {
    const Config& expected = key.audience == Audience::Archiver ? c : kDefaults;
    EXPECT_EQ(key_value(key, child), key_value(key, expected)) << key.name;
  }
  EXPECT_TRUE(child.archiver_args.empty());
  EXPECT_TRUE(child.archiver_exe.empty());
  // What the archiver acts on (archiver/program.cpp) is among them.
  for (const char* flag : {"--backup-root", "--compression-level", "--compression-threads",
                           "--log-level", "--log-file"}) {
    EXPECT_TRUE(flags.count(flag)) << flag;
  }
}

// A list may hold an empty item (`exclude = ["", "*.tmp"]` in the file); passed on, it must
// neither vanish nor take the next flag as its value.
TEST(ConfigKeys, AnEmptyListItemRoundTrips) {
  Config c;
  c.source_dirs = {"/a", ""};
  c.exclude = {"", "*.tmp"};
  c.archivers = 7;
  const Config child = child_config(config_to_args(c));
  EXPECT_EQ(child.source_dirs, c.source_dirs);
  EXPECT_EQ(child.exclude, c.exclude);
  EXPECT_EQ(child.archivers, 7);
}

// An empty text key is left out: empty is the default of every text key.
TEST(ConfigKeys, AnEmptyTextKeyIsLeftOut) {
  for (const auto& arg : config_to_args(kDefaults, Audience::Archiver))
    EXPECT_EQ(arg.find("--backup-root"), std::string::npos) << arg;
  EXPECT_TRUE(config_to_args(kDefaults, Audience::None).empty());
}

// README.md's table of keys is config_keys_markdown(), between the comment that opens with
// kBegin and the line kEnd. With TIMEWARP_UPDATE_README=1 the test writes it there first.
TEST(ConfigKeys, ReadmeTableIsTheTableOfKeys) {
  constexpr std::string_view kBegin = "<!-- configuration keys";
  constexpr std::string_view kEnd = "<!-- end of configuration keys -->\n";
  std::string readme = test::read_file(TW_README);
  const auto marker = readme.find(kBegin);
  ASSERT_NE(marker, std::string::npos) << "no line " << kBegin << "... in " << TW_README;
  constexpr std::string_view kClose = "-->\n";
  const auto begin = readme.find(kClose, marker) + kClose.size();
  auto end = readme.find(kEnd, begin);
  ASSERT_NE(end, std::string::npos) << "no line " << kEnd << " after " << kBegin << "...";
  const std::string expected = config_keys_markdown();
  const char* update = std::getenv("TIMEWARP_UPDATE_README");
  if (update != nullptr && std::string_view(update) == "1") {
    readme.replace(begin, end - begin, expected);
    end = begin + expected.size();
    test::write_file(TW_README, readme);
  }
  EXPECT_EQ(readme.substr(begin, end - begin), expected)
      << "README.md's table of configuration keys differs from the table in common/config.cpp; "
         "run this test with TIMEWARP_UPDATE_README=1 to rewrite it";
}

}  // namespace
}  // namespace tw
