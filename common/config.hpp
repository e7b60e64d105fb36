// Configuration shared by every TimeWarp executable (DESIGN.md, "Configuration"). One
// file (TOML/INI, read by CLI11), every key also a command-line flag and an environment
// variable; flags win over the environment, which wins over the file, which wins over the
// defaults below. Every executable accepts every key, so one file serves the whole suite.
#pragma once

#include <concepts>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>


namespace tw {

struct Config {
  std::string backup_root;               // BACKUP_ROOT
  std::vector<std::string> source_dirs;  // SOURCE_DIRS
  int archivers = 2;                     // MAX_ARCHIVERS
  int batch_size = 100;                  // SCHEDULER_BATCHSIZE
  std::string strategy = "fifo";         // SCHEDULER_STRATEGY: fifo, lifo, priority, fair
  bool coalesce = true;
  std::string database;  // libpq connection string or URI; empty: libpq's PG* defaults

  std::vector<std::string> exclude;  // globs
  std::vector<std::string> include;  // globs
  std::uint64_t max_file_size = 0;   // bytes, 0 = no limit

  int max_attempts = 5;
  double retry_base_delay = 1.0;   // seconds
  double retry_max_delay = 300.0;  // seconds

  double max_cpu_percent = 0;      // 0 = no limit
  std::uint64_t max_bandwidth = 0;  // archive bytes per second, 0 = no limit
  double item_timeout = 300.0;      // seconds one archiver may spend on one item

  int compression_level = 1;    // zstd level of archived content (-7 to 19)
  int compression_threads = 0;  // per archiver, for large files; 0 = one per core (at most 4)

  double lease_time = 60.0;         // seconds a DISPATCHED item stays ours without heartbeat
  double heartbeat_interval = 5.0;  // seconds
  double flush_interval = 0.05;     // seconds between writes of completions
  std::int64_t backlog_warning = 100000;  // claimable items that trigger a growth warning

  double event_delay = 0.1;  // seconds the monitor gathers file events before inserting
  double rescan_interval = 86400.0;  // seconds between the monitor's periodic rescans (0: never)

  double prune_age = 7 * 86400.0;  // COMPLETED rows older than this many seconds are removed
  double prune_interval = 600.0;   // seconds between the scheduler's prune passes (0: never)

  std::string log_level = "info";
  std::string log_file;

  // Set by tests and the monitor, not meant for a config file.
  std::string scheduler_exe;  // default: timewarp-scheduler beside this executable
  std::string archiver_exe;   // default: timewarp-archiver beside this executable
  std::vector<std::string> archiver_args;  // extra arguments for every archiver
};

// Adds --config and a flag for every key of Config to `app`.
void add_config_options(CLI::App& app, Config& config);

// Parses the command line into `app`. Returns -1 when the program should go on, or an exit
// code (0 for --help, 2 for bad input) after printing one clear message that names the
// offending key or flag.
int parse_command_line(CLI::App& app, int argc, char** argv);

// The resolved configuration as command-line flags, for a child process. The database
// string is left out (it may hold a password): pass it through TIMEWARP_DATABASE.
std::vector<std::string> config_to_args(const Config& config);

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

// The environment variable that carries `database` to children.
inline constexpr const char* kDatabaseEnv = "TIMEWARP_DATABASE";

}  // namespace tw
