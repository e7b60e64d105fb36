// Configuration shared by every TimeWarp executable (ARCHITECTURE.md, "Configuration"). One
// file (TOML/INI, read by CLI11), every key also a command-line flag and an environment
// variable; flags win over the environment, which wins over the file, which wins over the
// defaults below. Every executable accepts every key, so one file serves the whole suite.
#pragma once

#include <concepts>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <CLI/CLI.hpp>

namespace tw {

// Each key's flags, environment variable, range and description are in its entry of
// config_keys() (config.cpp); add a field there too.
struct Config {
  std::string backup_root;
  std::vector<std::string> source_dirs;
  int archivers = 2;
  int batch_size = 100;
  std::string strategy = "fifo";
  bool coalesce = true;
  std::string database;  // libpq connection string or URI; empty: libpq's PG* defaults
  // The queue this host's monitor fills and its scheduler takes from (empty: the host's
  // name): hosts sharing a database keep apart by it (ARCHITECTURE.md, "Object store").
  std::string host_id;

  std::vector<std::string> exclude;  // globs
  std::vector<std::string> include;  // globs
  std::uint64_t max_file_size = 0;   // bytes, 0 = no limit

  int max_attempts = 5;
  double retry_base_delay = 1.0;   // seconds
  double retry_max_delay = 300.0;  // seconds

  double max_cpu_percent = 0;       // 0 = no limit
  std::uint64_t max_bandwidth = 0;  // archive bytes per second, 0 = no limit
  double item_timeout = 300.0;      // seconds one archiver may spend on one item

  int compression_level = 2;    // zstd level of archived content
  int compression_threads = 0;  // per archiver, for large files; 0 = one per core (at most 4)

  double lease_time = 60.0;               // seconds a DISPATCHED item stays ours without heartbeat
  double heartbeat_interval = 5.0;        // seconds
  double flush_interval = 0.05;           // seconds between writes of completions
  std::int64_t backlog_warning = 100000;  // claimable items that trigger a growth warning

  double event_delay = 0.1;          // seconds the monitor gathers file events before inserting
  double rescan_interval = 86400.0;  // seconds between the monitor's periodic rescans (0: never)

  double prune_age = 7 * 86400.0;  // COMPLETED rows older than this many seconds are removed
  double prune_interval = 600.0;   // seconds between the scheduler's prune passes (0: never)

  // Retention (archive/retention.hpp): every version of the last keep_within seconds, then
  // the moments at each of the last keep_hourly full hours, keep_daily midnights, ... of
  // retention_timezone (empty: the local zone).
  double keep_within = 3600.0;  // seconds
  int keep_hourly = 24;
  int keep_daily = 30;
  int keep_weekly = 52;
  int keep_monthly = 0;
  int keep_yearly = 0;
  std::string retention_timezone;
  std::vector<std::string> retention_folder;  // "FOLDER: keep_daily=7 ..." (folder_policy.hpp)
  double retention_interval = 3600.0;  // seconds between the monitor's forget runs (0: never)

  // The pack store (ARCHITECTURE.md, "Object store"): an S3-compatible bucket the archive's
  // sealed packs are shipped to; no endpoint: none.
  std::string store_endpoint;
  std::string store_bucket;
  std::string store_prefix;  // empty: host_id (this host's name unless set)
  std::string store_region = "us-east-1";
  std::string store_access_key;
  std::string store_secret_key;
  std::string store_credentials_file;  // the keys, in the AWS credentials file's form
  double ship_interval = 300.0;        // seconds between the monitor's shipping runs (0: never)
  // Reading from the store (`--from-store`, and packs given back): where the catalog and
  // the packs read are kept (empty: $XDG_CACHE_HOME/timewarp, ~/.cache/timewarp, or
  // /var/cache/timewarp for root), and how many bytes of packs at most.
  std::string cache_dir;
  std::uint64_t cache_size = std::uint64_t{1} << 30;
  // Bytes of shipped packs the backup root keeps (0: every pack); beyond them `timewarp
  // ship` gives back the packs shipped longest ago, which readers then fetch from the store.
  std::uint64_t local_packs_size = 0;

  std::string log_level = "info";
  std::string log_file;

  // Set by tests and the monitor, not meant for a config file.
  std::string scheduler_exe;               // default: timewarp-scheduler beside this executable
  std::string timewarp_exe;                // the monitor's retention runs; default: beside it
  std::string archiver_exe;                // default: timewarp-archiver beside this executable
  std::vector<std::string> archiver_args;  // extra arguments for every archiver

  // Set by parse_command_line: the configuration file read (empty: none) and where each key's
  // value came from (ConfigOrigin), for `timewarp config` and for a child that must read the
  // same file.
  std::string config_file;
  std::map<std::string, std::string, std::less<>> key_origins;
};

// The table of configuration keys (config_keys()): one entry per key of Config, from which
// the options (file key, flags, environment variable, description, checks), the arguments
// for child processes and the README's table of keys are all derived. The internal options
// (scheduler_exe, timewarp_exe, archiver_exe, archiver_args) are not keys: no file sets
// them.

// What kind of value a key holds, with its field of Config and what it accepts.
struct TextKey {
  std::string Config::*field;
};
struct ListKey {  // repeatable flag, or a list in the file
  std::vector<std::string> Config::*field;
  // Checks one item: what is wrong with it, or empty. Null: any text.
  std::string (*check)(const std::string& item) = nullptr;
};
struct SwitchKey {
  bool Config::*field;
};
struct ChoiceKey {  // one of `choices`
  std::string Config::*field;
  std::span<const std::string_view> choices;
};
template <class T>
struct NumberKey {  // checked by number_in(lowest, highest)
  T Config::*field;
  T lowest;
  T highest;
};
using KeyValue = std::variant<TextKey, ListKey, SwitchKey, ChoiceKey, NumberKey<int>,
                              NumberKey<std::int64_t>, NumberKey<std::uint64_t>, NumberKey<double>>;

// The processes a key is passed to as a flag (config_to_args).
enum class Audience {
  None,       // none (database: it may hold a password, so it goes through kDatabaseEnv)
  Scheduler,  // the scheduler the monitor starts
  Archiver,   // the scheduler, and every archiver the scheduler starts
};

struct ConfigKey {
  std::string_view name;  // the file key; flags --name-with-dashes and --name_with_underscores
  KeyValue value;
  std::string_view description;  // --help and the README
  std::string_view env = {};     // empty: TIMEWARP_<NAME>
  Audience audience = Audience::Scheduler;
  std::string_view unit = {};        // of a number, in the README: "s", "bytes"
  std::string_view more = {};        // README only: what --help has no room for
  std::string_view extra_flag = {};  // one more flag name: "--source"
  bool secret = false;               // never shown: `timewarp config` says only that it is set
};

// Every key, in the order --help lists them.
std::span<const ConfigKey> config_keys();

// The configuration's host_id, or this host's name when it is empty.
std::string host_id(const Config& config);

// The environment variable of `key`.
std::string env_name(const ConfigKey& key);

// The value of `key` in `config` as text: what a flag would say (a list as ["a", "b"]).
std::string key_value(const ConfigKey& key, const Config& config);

// The keys as a Markdown table (key, environment, default, allowed, meaning): the README's.
std::string config_keys_markdown();
// The same for a terminal (`timewarp help config`): each key, what it means, its flags,
// environment variable, default and what it accepts.
std::string config_keys_text();

// The help group of every key's flag (a program may hide it from its --help).
inline constexpr std::string_view kConfigGroup = "Configuration (file key, flag or environment)";

// Adds --config, --no-config, --version and a flag for every key of Config to `app`.
void add_config_options(CLI::App& app, Config& config);

// Whether a program looks for a configuration file its command line does not name
// (ARCHITECTURE.md, "Configuration"): the programs people start do; the scheduler and the
// archivers, started with every key as a flag, read only a file named on their command line.
enum class ConfigSearch { Off, Search };

// Where a configuration file is looked for (ConfigSearch::Search), in order, when neither
// --config nor --no-config is given: TIMEWARP_CONFIG (which must exist), the project's
// `./.timewarp.toml` (owned by this user or root, writable by no one else, as `scripts/run`
// writes it), the user's `$XDG_CONFIG_HOME/timewarp/timewarp.toml` (default
// `~/.config/...`) and `/etc/timewarp/timewarp.toml`. The first that exists is read.
// Returns the file and how it was found ("TIMEWARP_CONFIG", "project", "user", "system"),
// or nothing; a found file that others may write is skipped with a warning on stderr.
struct FoundConfig {
  std::string file;
  std::string how;
};
std::optional<FoundConfig> find_config_file(ConfigSearch search);

// Parses the command line into `app` (the file found as find_config_file says, unless the
// command line names one or says --no-config). Returns -1 when the program should go on, or
// an exit code (0 for --help and --version, 2 for bad input) after printing one clear
// message that names the offending key or flag. `config` (optional; the one bound to `app`)
// gets config_file and key_origins.
int parse_command_line(CLI::App& app, int argc, char** argv,
                       ConfigSearch search = ConfigSearch::Off, Config* config = nullptr);

// The resolved configuration as command-line flags for a child process: for the scheduler,
// every key it reaches (Audience::Scheduler or Archiver) and the internal archiver_exe and
// archiver_args; for an archiver, the keys marked Audience::Archiver only. The database
// string is never among them (it may hold a password): pass it through kDatabaseEnv.
std::vector<std::string> config_to_args(const Config& config,
                                        Audience audience = Audience::Scheduler);
// The flags of the keys named in `names` only (a `timewarp` command the monitor runs).
std::vector<std::string> config_to_args(const Config& config,
                                        std::span<const std::string_view> names);

// How every number of the configuration is read, whether it comes from the file, the
// environment or the command line: integers in base 10 only (`0100` is 100, never octal;
// `0x10` is refused), unsigned ones never negative, floating-point values finite decimals
// (`nan`, `inf` and hex floats are refused), and all within [lowest, highest]. The
// validator refuses anything else with a message naming the value and the range, and
// rewrites an accepted integer to its plain form before CLI11 converts it (CLI11 alone
// would read `0100` as octal 64, `-1` as 2^64-1 and `nan` as a number in any range).
CLI::Validator signed_in(std::int64_t lowest, std::int64_t highest);
CLI::Validator unsigned_in(std::uint64_t lowest, std::uint64_t highest);
CLI::Validator finite_in(double lowest, double highest);

template <class T>
concept ConfigNumber = std::is_arithmetic_v<T> && !std::same_as<T, bool>;

// The validator above for a value of type T (an option's transform).
template <ConfigNumber T>
CLI::Validator number_in(T lowest = std::numeric_limits<T>::lowest(),
                         T highest = std::numeric_limits<T>::max()) {
  if constexpr (std::floating_point<T>) {
    return finite_in(lowest, highest);
  } else if constexpr (std::unsigned_integral<T>) {
    return unsigned_in(lowest, highest);
  } else {
    return signed_in(lowest, highest);
  }
}

// The claim orders of the `strategy` key, in the order of db::Strategy.
inline constexpr std::string_view kStrategies[] = {"fifo", "lifo", "priority", "fair"};

// The environment variable that carries `database` to children.
inline constexpr const char* kDatabaseEnv = "TIMEWARP_DATABASE";

}  // namespace tw
