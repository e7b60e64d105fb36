#include "common/config.hpp"

#include <CLI/CLI.hpp>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/mask_conninfo.hpp"

namespace tw {
namespace {

// Each key is reachable as --key-with-dashes and --key_with_underscores; the latter is
// the name CLI11 matches in the config file.
std::string flag_names(std::string_view key) {
  std::string dashed(key);
  for (char& c : dashed) {
    if (c == '_') c = '-';
  }
  if (dashed == key) return fmt::format("--{}", key);
  return fmt::format("--{},--{}", dashed, key);
}

constexpr std::string_view kStrategies[] = {"fifo", "lifo", "priority", "fair"};
constexpr std::string_view kLogLevels[] = {"trace", "debug", "info", "warn",
                                           "error", "critical", "off"};

std::string env_name(std::string_view key) {
  std::string name = "TIMEWARP_";
  for (char c : key) name.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  return name;
}

// A key with its flags and environment variable.
template <class T>
CLI::Option* key_option(CLI::App& app, std::string_view key, T& value, std::string description,
                        std::string_view env = {}, std::string_view extra_names = {}) {
  std::string names = flag_names(key);
  if (!extra_names.empty()) names = fmt::format("{},{}", names, extra_names);
  auto* option = app.add_option(names, value, std::move(description))
                     ->envname(env.empty() ? env_name(key) : std::string(env))
                     ->capture_default_str();
  option->group("Configuration (file key, flag or environment)");
  return option;
}

// Every key but a number. Numbers go through add_number, so none escapes its checks.
template <class T>
  requires(!ConfigNumber<T>)
CLI::Option* add_key(CLI::App& app, std::string_view key, T& value, std::string description,
                     std::string_view env = {}, std::string_view extra_names = {}) {
  return key_option(app, key, value, std::move(description), env, extra_names);
}

template <ConfigNumber T>
void add_number(CLI::App& app, std::string_view key, T& value, T lowest, T highest,
                std::string description, std::string_view env = {}) {
  key_option(app, key, value, std::move(description), env)->transform(number_in(lowest, highest));
}

template <ConfigNumber T>
void add_number(CLI::App& app, std::string_view key, T& value, std::string description,
                std::string_view env = {}) {
  add_number(app, key, value, std::numeric_limits<T>::lowest(), std::numeric_limits<T>::max(),
             std::move(description), env);
}

bool all_digits(std::string_view text) {
  return !text.empty() && text.find_first_not_of("0123456789") == std::string_view::npos;
}

// Removes a leading '+' or '-' from `text`; returns it, or '+' when there is none.
char take_sign(std::string_view& text) {
  if (text.empty() || (text.front() != '+' && text.front() != '-')) return '+';
  const char sign = text.front();
  text.remove_prefix(1);
  return sign;
}

std::string out_of_range(const std::string& value, auto lowest, auto highest) {
  return fmt::format("value '{}' is out of range ({} to {})", value, lowest, highest);
}

struct IntegerText {
  bool negative = false;
  std::optional<std::uint64_t> magnitude;  // nothing when it does not fit in 64 bits
};

// Reads `value` as [+-]digits in base 10, or nothing when it is not of that form.
std::optional<IntegerText> read_integer(std::string_view value) {
  IntegerText out;
  out.negative = take_sign(value) == '-';
  if (!all_digits(value)) return std::nullopt;
  std::uint64_t magnitude = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), magnitude);
  if (ec == std::errc{}) out.magnitude = magnitude;
  return out;
}

std::string not_integer(const std::string& value) {
  return fmt::format("value '{}' is not a whole number in base 10", value);
}

// [+-] digits [. digits] [(e|E) [+-] digits], with a digit on at least one side of the dot.
bool is_decimal(std::string_view text) {
  take_sign(text);
  const auto e = text.find_first_of("eE");
  if (e != std::string_view::npos) {
    std::string_view power = text.substr(e + 1);
    take_sign(power);
    if (!all_digits(power)) return false;
    text = text.substr(0, e);
  }
  const auto dot = text.find('.');
  const std::string_view whole = text.substr(0, dot);
  const std::string_view fraction =
      dot == std::string_view::npos ? std::string_view() : text.substr(dot + 1);
  return (whole.empty() || all_digits(whole)) && (fraction.empty() || all_digits(fraction)) &&
         !(whole.empty() && fraction.empty());
}

}  // namespace

CLI::Validator signed_in(std::int64_t lowest, std::int64_t highest) {
  return {[lowest, highest](std::string& value) -> std::string {
            const auto text = read_integer(value);
            if (!text) return not_integer(value);
            constexpr std::uint64_t kMostNegative = std::uint64_t{1} << 63;  // -INT64_MIN
            const std::uint64_t limit = text->negative ? kMostNegative : kMostNegative - 1;
            if (!text->magnitude || *text->magnitude > limit) {
              return out_of_range(value, lowest, highest);
            }
            const std::int64_t number = text->negative
                                            ? static_cast<std::int64_t>(0 - *text->magnitude)
                                            : static_cast<std::int64_t>(*text->magnitude);
            if (number < lowest || number > highest) return out_of_range(value, lowest, highest);
            value = fmt::format("{}", number);
            return {};
          },
          fmt::format("INT in [{} - {}]", lowest, highest)};
}

CLI::Validator unsigned_in(std::uint64_t lowest, std::uint64_t highest) {
  return {[lowest, highest](std::string& value) -> std::string {
            const auto text = read_integer(value);
            if (!text) return not_integer(value);
            if (text->negative) {
              return fmt::format("value '{}' is negative ({} to {})", value, lowest, highest);
            }
            if (!text->magnitude || *text->magnitude < lowest || *text->magnitude > highest) {
              return out_of_range(value, lowest, highest);
            }
            value = fmt::format("{}", *text->magnitude);
            return {};
          },
          fmt::format("UINT in [{} - {}]", lowest, highest)};
}

CLI::Validator finite_in(double lowest, double highest) {
  return {[lowest, highest](std::string& value) -> std::string {
            if (!is_decimal(value)) {
              return fmt::format("value '{}' is not a finite decimal number", value);
            }
            const double number = std::strtod(value.c_str(), nullptr);
            if (!std::isfinite(number) || number < lowest || number > highest) {
              return out_of_range(value, lowest, highest);
            }
            return {};
          },
          fmt::format("FLOAT in [{} - {}]", lowest, highest)};
}

void add_config_options(CLI::App& app, Config& c) {
  app.set_config("--config", "", "configuration file (TOML/INI)");
  app.allow_config_extras(CLI::config_extras_mode::error);

  add_key(app, "backup_root", c.backup_root, "archive root directory", "BACKUP_ROOT");
  add_key(app, "source_dirs", c.source_dirs, "source directories to watch (repeatable)",
          "SOURCE_DIRS", "--source");
  add_number(app, "archivers", c.archivers, 1, 256, "archiver processes", "MAX_ARCHIVERS");
  add_number(app, "batch_size", c.batch_size, 1, 100000, "items claimed per batch",
             "SCHEDULER_BATCHSIZE");
  add_key(app, "strategy", c.strategy, "claim order: fifo, lifo, priority or fair",
          "SCHEDULER_STRATEGY")
      ->check(CLI::IsMember(std::vector<std::string>(std::begin(kStrategies), std::end(kStrategies))));
  add_key(app, "coalesce", c.coalesce, "archive several pending changes to one path once");
  add_key(app, "database", c.database, "libpq connection string or URI");
  add_key(app, "exclude", c.exclude, "glob of paths to ignore (repeatable)");
  add_key(app, "include", c.include, "glob of paths to watch even when excluded (repeatable)");
  add_number(app, "max_file_size", c.max_file_size, "largest file archived, bytes (0: no limit)");
  add_number(app, "max_attempts", c.max_attempts, 1, 1000, "attempts before an item is FAILED");
  add_number(app, "retry_base_delay", c.retry_base_delay, 0.0, 86400.0,
             "first retry delay, seconds");
  add_number(app, "retry_max_delay", c.retry_max_delay, 0.0, 7.0 * 86400.0,
             "longest retry delay, seconds");
  add_number(app, "max_cpu_percent", c.max_cpu_percent, 0.0, 100000.0,
             "archivers' CPU use, percent of one core (0: no limit)");
  add_number(app, "max_bandwidth", c.max_bandwidth, "archive bytes per second (0: no limit)");
  add_number(app, "item_timeout", c.item_timeout, 0.1, 7.0 * 86400.0,
             "seconds an archiver may spend on one item");
  add_number(app, "compression_level", c.compression_level, -7, 19,
             "zstd level of archived content (negative: faster, larger)");
  add_number(app, "compression_threads", c.compression_threads, 0, 64,
             "compression threads per archiver for large files (0: one per core, at most 4)");
  add_number(app, "lease_time", c.lease_time, 1.0, 86400.0,
             "seconds a claimed item stays held without heartbeat");
  add_number(app, "heartbeat_interval", c.heartbeat_interval, 0.05, 3600.0,
             "scheduler heartbeat, seconds");
  add_number(app, "flush_interval", c.flush_interval, 0.0, 60.0,
             "seconds between completion writes");
  add_number(app, "backlog_warning", c.backlog_warning, std::int64_t{1}, std::int64_t{1} << 40,
             "warn when this many claimable items keep waiting");
  add_number(app, "event_delay", c.event_delay, 0.0, 60.0,
             "seconds file events are gathered before queueing");
  add_number(app, "rescan_interval", c.rescan_interval, 0.0, 365.0 * 86400.0,
             "seconds between the monitor's rescans of every source against the archive (0: never)");
  add_number(app, "prune_age", c.prune_age, 0.0, 3650.0 * 86400.0,
             "remove COMPLETED items older than this, seconds");
  add_number(app, "prune_interval", c.prune_interval, 0.0, 30.0 * 86400.0,
             "seconds between prune passes (0: never)");
  add_key(app, "log_level", c.log_level, "trace, debug, info, warn, error, critical or off")
      ->check(CLI::IsMember(std::vector<std::string>(std::begin(kLogLevels), std::end(kLogLevels))));
  add_key(app, "log_file", c.log_file, "also log to this file");

  const auto internal = [&](const char* name, std::string& value) {
    return app.add_option(name, value)->group("")->configurable(false);
  };
  internal("--scheduler-exe", c.scheduler_exe);
  internal("--archiver-exe", c.archiver_exe);
  app.add_option("--archiver-arg", c.archiver_args)->group("")->configurable(false)
      ->allow_extra_args(false);
}

namespace {

bool given_on_command_line(const CLI::Option& option, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--") break;
    for (const auto& name : option.get_lnames()) {
      const std::string flag = "--" + name;
      if (arg == flag || (arg.size() > flag.size() && arg.substr(0, flag.size()) == flag &&
                          arg[flag.size()] == '=')) {
        return true;
      }
    }
  }
  return false;
}

}  // namespace

int parse_command_line(CLI::App& app, int argc, char** argv) {
  std::vector<std::pair<std::string, std::string>> from_env;  // flag, environment variable
  try {
    // Precedence is flags, then environment, then file. CLI11 reads the file before the
    // environment, so an environment value is handed to it as a flag unless the command
    // line already sets that key.
    std::vector<std::string> args(argv, argv + argc);
    for (const CLI::Option* option : app.get_options()) {
      const std::string& env = option->get_envname();
      const char* value = env.empty() ? nullptr : std::getenv(env.c_str());
      if (value == nullptr || *value == '\0' || option->get_lnames().empty()) continue;
      if (given_on_command_line(*option, argc, argv)) continue;
      const std::string flag = "--" + option->get_lnames().front();
      args.insert(args.begin() + 1, fmt::format("{}={}", flag, value));
      from_env.emplace_back(flag, env);
    }
    std::vector<char*> pointers;
    for (auto& arg : args) pointers.push_back(arg.data());
    app.parse(static_cast<int>(pointers.size()), pointers.data());
    return -1;
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ConfigError& e) {
    std::string what = e.what();
    constexpr std::string_view kPrefix = "INI was not able to parse ";
    if (what.rfind(kPrefix, 0) == 0) {
      what = fmt::format("unknown configuration key '{}' (allowed keys are listed by --help)",
                         what.substr(kPrefix.size()));
    }
    std::cerr << app.get_name() << ": configuration error: " << mask_conninfo(what) << "\n";
    return 2;
  } catch (const CLI::ParseError& e) {
    std::string what = e.what();
    for (const auto& [flag, env] : from_env) {  // "--batch-size: value ..." came from there
      if (what.rfind(flag + ":", 0) == 0) what += fmt::format(" (from the environment: {})", env);
    }
    // CLI11 echoes arguments it did not expect: a mistyped --database among them.
    std::cerr << app.get_name() << ": " << mask_conninfo(what) << "\n";
    return 2;
  }
}

std::vector<std::string> config_to_args(const Config& c) {
  std::vector<std::string> args;
  const auto put = [&args](std::string_view flag, const auto& value) {
    args.push_back(fmt::format("--{}={}", flag, value));
  };
  if (!c.backup_root.empty()) put("backup-root", c.backup_root);
  for (const auto& dir : c.source_dirs) put("source", dir);
  put("archivers", c.archivers);
  put("batch-size", c.batch_size);
  put("strategy", c.strategy);
  put("coalesce", c.coalesce ? "true" : "false");
  for (const auto& glob : c.exclude) put("exclude", glob);
  for (const auto& glob : c.include) put("include", glob);
  put("max-file-size", c.max_file_size);
  put("max-attempts", c.max_attempts);
  put("retry-base-delay", c.retry_base_delay);
  put("retry-max-delay", c.retry_max_delay);
  put("max-cpu-percent", c.max_cpu_percent);
  put("max-bandwidth", c.max_bandwidth);
  put("item-timeout", c.item_timeout);
  put("compression-level", c.compression_level);
  put("compression-threads", c.compression_threads);
  put("lease-time", c.lease_time);
  put("heartbeat-interval", c.heartbeat_interval);
  put("flush-interval", c.flush_interval);
  put("backlog-warning", c.backlog_warning);
  put("event-delay", c.event_delay);
  put("rescan-interval", c.rescan_interval);
  put("prune-age", c.prune_age);
  put("prune-interval", c.prune_interval);
  put("log-level", c.log_level);
  if (!c.log_file.empty()) put("log-file", c.log_file);
  if (!c.archiver_exe.empty()) put("archiver-exe", c.archiver_exe);
  for (const auto& arg : c.archiver_args) put("archiver-arg", arg);
  return args;
}

}  // namespace tw
