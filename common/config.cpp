#include "common/config.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include "common/archivers.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/folder_policy.hpp"
#include "common/host.hpp"
#include "common/mask_conninfo.hpp"
#include "common/version.hpp"

namespace tw {
namespace {

std::string dashed(std::string_view key) {
  std::string out(key);
  std::replace(out.begin(), out.end(), '_', '-');
  return out;
}

// Each key is reachable as --key-with-dashes and --key_with_underscores; the latter is
// the name CLI11 matches in the config file.
std::string flag_names(const ConfigKey& key) {
  std::string names = fmt::format("--{}", dashed(key.name));
  if (dashed(key.name) != key.name) names += fmt::format(",--{}", key.name);
  if (!key.extra_flag.empty()) names += fmt::format(",{}", key.extra_flag);
  return names;
}

constexpr std::string_view kLogLevels[] = {"trace", "debug",    "info", "warn",
                                           "error", "critical", "off"};

// A NumberKey for `field`, its range the whole of its type unless given.
template <ConfigNumber T>
constexpr KeyValue number(T Config::*field,
                          std::type_identity_t<T> lowest = std::numeric_limits<T>::lowest(),
                          std::type_identity_t<T> highest = std::numeric_limits<T>::max()) {
  return NumberKey<T>{field, lowest, highest};
}

constexpr double kDay = 86400.0;

std::string check_folder_policy(const std::string& item) {
  auto policy = parse_folder_policy(item);
  return policy ? std::string() : policy.error();
}

// One entry per key, one line each. README.md's table of keys is config_keys_markdown() of
// this table (tests/common/config_test.cpp checks it).
// clang-format off
constexpr ConfigKey kConfigKeys[] = {
    {.name = "backup_root", .value = TextKey{&Config::backup_root}, .description = "archive root directory", .env = "BACKUP_ROOT", .audience = Audience::Archiver, .more = "required by the monitor, the scheduler and the archiver"},
    {.name = "source_dirs", .value = ListKey{&Config::source_dirs}, .description = "source directories to watch", .env = "SOURCE_DIRS", .audience = Audience::Archiver, .extra_flag = "--source"},
    {.name = "archivers", .value = number(&Config::archivers, kMinArchivers, kMaxArchivers), .description = "archiver processes", .env = "MAX_ARCHIVERS"},
    {.name = "batch_size", .value = number(&Config::batch_size, 1, 100000), .description = "items claimed per batch", .env = "SCHEDULER_BATCHSIZE"},
    {.name = "strategy", .value = ChoiceKey{&Config::strategy, kStrategies}, .description = "claim order", .env = "SCHEDULER_STRATEGY"},
    {.name = "coalesce", .value = SwitchKey{&Config::coalesce}, .description = "archive several pending changes to one path once"},
    {.name = "host_id", .value = TextKey{&Config::host_id}, .description = "the queue this host's monitor fills and its scheduler takes from (empty: the host's name)", .more = "hosts sharing a database each have their own, unless they archive the same sources into one backup root; also `store_prefix`'s default"},
    {.name = "database", .value = TextKey{&Config::database}, .description = "libpq connection string or URI", .audience = Audience::None, .more = "when empty, libpq's defaults (`PG*` variables) apply; children get it in `TIMEWARP_DATABASE`, never as a flag"},
    {.name = "exclude", .value = ListKey{&Config::exclude}, .description = "glob of paths to ignore", .audience = Audience::Archiver},
    {.name = "include", .value = ListKey{&Config::include}, .description = "glob of paths to watch even when excluded", .audience = Audience::Archiver},
    {.name = "max_file_size", .value = number(&Config::max_file_size), .description = "largest file archived (0: no limit)", .audience = Audience::Archiver, .unit = "bytes"},
    {.name = "max_attempts", .value = number(&Config::max_attempts, 1, 1000), .description = "attempts before an item is FAILED"},
    {.name = "retry_base_delay", .value = number(&Config::retry_base_delay, 0.0, kDay), .description = "first retry delay, seconds", .unit = "s", .more = "retry backoff: `min(retry_max_delay, retry_base_delay·2^attempts)`, jittered to 50–100 %"},
    {.name = "retry_max_delay", .value = number(&Config::retry_max_delay, 0.0, 7 * kDay), .description = "longest retry delay, seconds", .unit = "s"},
    {.name = "max_cpu_percent", .value = number(&Config::max_cpu_percent, 0.0, 100000.0), .description = "archivers' CPU use, percent of one core (0: no limit)"},
    {.name = "max_bandwidth", .value = number(&Config::max_bandwidth), .description = "archive bytes per second (0: no limit)"},
    {.name = "item_timeout", .value = number(&Config::item_timeout, 0.1, 7 * kDay), .description = "seconds an archiver may spend on one item", .unit = "s"},
    {.name = "compression_level", .value = number(&Config::compression_level, -7, 19), .description = "zstd level of archived content (negative: faster, larger)", .audience = Audience::Archiver, .more = "a file under the smallest chunk (512 KiB; 256 KiB in archives made before chunk sizes were recorded) gets level 3 at least; content keeps its name whatever the level"},
    {.name = "compression_threads", .value = number(&Config::compression_threads, 0, 64), .description = "compression threads per archiver for large files (0: one per core, at most 4)", .audience = Audience::Archiver, .more = "a file of 4 MiB or more is large; 1: the archiver's own thread only; a large file takes no more of them than there are idle cores at the time (two archivers on two cores run one each)"},
    {.name = "lease_time", .value = number(&Config::lease_time, 1.0, kDay), .description = "seconds a claimed item stays held without heartbeat", .unit = "s"},
    {.name = "heartbeat_interval", .value = number(&Config::heartbeat_interval, 0.05, 3600.0), .description = "scheduler heartbeat, seconds", .unit = "s", .more = "renews leases, refreshes `timewarp.schedulers`"},
    {.name = "flush_interval", .value = number(&Config::flush_interval, 0.0, 60.0), .description = "seconds between completion writes", .unit = "s", .more = "completions are written in batches"},
    {.name = "backlog_warning", .value = number(&Config::backlog_warning, 1, std::int64_t{1} << 40), .description = "warn when this many claimable items keep waiting"},
    {.name = "event_delay", .value = number(&Config::event_delay, 0.0, 60.0), .description = "seconds file events are gathered before queueing", .unit = "s"},
    {.name = "rescan_interval", .value = number(&Config::rescan_interval, 0.0, 365 * kDay), .description = "seconds between the monitor's rescans of every source against the archive (0: never)", .unit = "s", .more = "86400 s is a day; a rescan goes in slices, at low priority"},
    {.name = "prune_age", .value = number(&Config::prune_age, 0.0, 3650 * kDay), .description = "remove COMPLETED items older than this, seconds", .unit = "s", .more = "604800 s is 7 days"},
    {.name = "prune_interval", .value = number(&Config::prune_interval, 0.0, 30 * kDay), .description = "seconds between prune passes (0: never)", .unit = "s"},
    {.name = "keep_within", .value = number(&Config::keep_within, 0.0, 3650 * kDay), .description = "keep every version archived this recently, seconds", .audience = Audience::None, .unit = "s", .more = "retention: a version is kept when it was its path's state at a kept moment, or is the latest; 3600 s is an hour"},
    {.name = "keep_hourly", .value = number(&Config::keep_hourly, 0, 1000000), .description = "keep the moments at the last N full hours", .audience = Audience::None},
    {.name = "keep_daily", .value = number(&Config::keep_daily, 0, 1000000), .description = "keep the moments at the last N midnights", .audience = Audience::None},
    {.name = "keep_weekly", .value = number(&Config::keep_weekly, 0, 1000000), .description = "keep the moments at the last N Mondays, midnight", .audience = Audience::None},
    {.name = "keep_monthly", .value = number(&Config::keep_monthly, 0, 1000000), .description = "keep the moments at the last N firsts of a month, midnight", .audience = Audience::None},
    {.name = "keep_yearly", .value = number(&Config::keep_yearly, 0, 1000000), .description = "keep the moments at the last N firsts of January, midnight", .audience = Audience::None},
    {.name = "retention_timezone", .value = TextKey{&Config::retention_timezone}, .description = "time zone of the retention calendar (empty: local)", .audience = Audience::None, .more = "a name under /usr/share/zoneinfo, e.g. `Europe/Berlin` or `UTC`; hours, midnights and Mondays are those of its clock, summer time included"},
    {.name = "retention_folder", .value = ListKey{&Config::retention_folder, check_folder_policy}, .description = "a folder's own retention policy, `FOLDER: keep_daily=7 ...`", .audience = Audience::None, .more = "keys keep_within (seconds, or with s, m, h, d, w) and keep_hourly … keep_yearly; a key left out has the archive's value; the deepest folder holding a path applies; its kept moments are its own (`restore --at` a moment it thinned leaves it out and says so)"},
    {.name = "retention_interval", .value = number(&Config::retention_interval, 0.0, 365 * kDay), .description = "seconds between the monitor's retention runs (0: never)", .audience = Audience::None, .unit = "s", .more = "a run is `timewarp forget` and its collection, at the lowest CPU and I/O priority; due this long after the archive's last collection, whoever ran it"},
    {.name = "store_endpoint", .value = TextKey{&Config::store_endpoint}, .description = "S3-compatible store the archive's packs are shipped to, http[s]://host[:port] (empty: none)", .audience = Audience::None, .more = "AWS S3, Ceph's radosgw, Garage, SeaweedFS, MinIO; path-style addresses, Signature Version 4; `timewarp ship` copies the packs there"},
    {.name = "store_bucket", .value = TextKey{&Config::store_bucket}, .description = "the store's bucket", .audience = Audience::None, .more = "3 to 63 characters: lower-case letters, digits, `.` and `-`; made when absent"},
    {.name = "store_prefix", .value = TextKey{&Config::store_prefix}, .description = "this archive's folder in the bucket (empty: host_id)", .audience = Audience::None, .more = "packs go to `<prefix>/packs/<name>`; hosts sharing a bucket each need their own"},
    {.name = "store_region", .value = TextKey{&Config::store_region}, .description = "the store's region, signed into each request", .audience = Audience::None, .more = "stores with one region accept any"},
    {.name = "store_access_key", .value = TextKey{&Config::store_access_key}, .description = "the store's access key", .audience = Audience::None, .more = "never shown; or from `store_credentials_file`", .secret = true},
    {.name = "store_secret_key", .value = TextKey{&Config::store_secret_key}, .description = "the store's secret key", .audience = Audience::None, .more = "never shown: better in the environment or in `store_credentials_file` than in a file others may read", .secret = true},
    {.name = "store_credentials_file", .value = TextKey{&Config::store_credentials_file}, .description = "file holding the store's keys (AWS credentials form)", .audience = Audience::None, .more = "`aws_access_key_id = …` and `aws_secret_access_key = …` of its `[default]` section (or of the file, without sections); a key set otherwise wins"},
    {.name = "ship_interval", .value = number(&Config::ship_interval, 0.0, 365 * kDay), .description = "seconds between the monitor's shipping runs (0: never)", .audience = Audience::None, .unit = "s", .more = "a run is `timewarp ship`, at the lowest CPU and I/O priority; the first one minute after the monitor starts; none without a `store_endpoint`"},
    {.name = "cache_dir", .value = TextKey{&Config::cache_dir}, .description = "where `--from-store` keeps the catalog and the packs it read, and readers the packs given back (empty: the user's cache)", .audience = Audience::None, .more = "`$XDG_CACHE_HOME/timewarp`, else `~/.cache/timewarp` (root: `/var/cache/timewarp`); a folder per store and prefix beneath"},
    {.name = "cache_size", .value = number(&Config::cache_size, std::uint64_t{64} << 20, std::uint64_t{1} << 50), .description = "bytes of packs a reader from the store keeps while it reads", .audience = Audience::None, .unit = "bytes", .more = "`--from-store`, and reads of packs given back (`local_packs_size`); blocks read longest ago are given back first; at least 64 MiB"},
    {.name = "local_packs_size", .value = number(&Config::local_packs_size, std::uint64_t{0}, std::uint64_t{1} << 60), .description = "bytes of shipped packs the backup root keeps (0: every pack)", .audience = Audience::None, .unit = "bytes", .more = "beyond it, each `timewarp ship` gives back the packs shipped longest ago (their files stay, empty); what is read of them is fetched from the store into `cache_dir`"},
    {.name = "log_level", .value = ChoiceKey{&Config::log_level, kLogLevels}, .description = "logging level", .audience = Audience::Archiver, .more = "`timewarp` itself logs at `warn` unless told otherwise"},
    {.name = "log_file", .value = TextKey{&Config::log_file}, .description = "also log to this file", .audience = Audience::Archiver, .more = "appended to, in a directory that must exist; logs go to stderr as well"},
};
// clang-format on

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
// Spelled out for clang 14, which does not deduce an aggregate's template arguments.
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

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

std::span<const ConfigKey> config_keys() { return kConfigKeys; }

std::string env_name(const ConfigKey& key) {
  if (!key.env.empty()) return std::string(key.env);
  std::string name = "TIMEWARP_";
  for (char c : key.name)
    name.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  return name;
}

std::string host_id(const Config& config) {
  return config.host_id.empty() ? hostname() : config.host_id;
}

std::string key_value(const ConfigKey& key, const Config& c) {
  return std::visit(
      Overloaded{[&](const SwitchKey& k) -> std::string { return c.*k.field ? "true" : "false"; },
                 [&](const auto& k) { return fmt::format("{}", c.*k.field); }},
      key.value);
}

namespace {

std::string with_unit(std::string text, std::string_view unit) {
  return unit.empty() ? text : fmt::format("{} {}", text, unit);
}

std::string code(std::string_view text) { return fmt::format("`{}`", text); }

// What `key` accepts, for the README.
std::string allowed(const ConfigKey& key) {
  return std::visit(Overloaded{[](const TextKey&) -> std::string { return "text"; },
                               [](const ListKey&) -> std::string { return "text, repeatable"; },
                               [](const SwitchKey&) -> std::string { return "`true`, `false`"; },
                               [](const ChoiceKey& k) {
                                 std::vector<std::string> choices;
                                 for (const auto choice : k.choices)
                                   choices.push_back(code(choice));
                                 return fmt::format("{}", fmt::join(choices, ", "));
                               },
                               [&]<class T>(const NumberKey<T>& k) {
                                 if (k.highest == std::numeric_limits<T>::max()) {
                                   return with_unit(fmt::format("{} or more", k.lowest), key.unit);
                                 }
                                 return with_unit(fmt::format("{} to {}", k.lowest, k.highest),
                                                  key.unit);
                               }},
                    key.value);
}

// The default of `key`, for the README.
std::string default_text(const ConfigKey& key) {
  const std::string value = key_value(key, Config{});
  const bool words = std::holds_alternative<TextKey>(key.value) ||
                     std::holds_alternative<ListKey>(key.value) ||
                     std::holds_alternative<ChoiceKey>(key.value);
  if (!words) return with_unit(value, key.unit);
  return value.empty() || value == "[]" ? "none" : code(value);
}

}  // namespace

std::string config_keys_markdown() {
  std::string out = "| key | environment | default | allowed | meaning |\n|---|---|---|---|---|\n";
  for (const ConfigKey& key : kConfigKeys) {
    std::string name = code(key.name);
    if (!key.extra_flag.empty()) name += fmt::format(" (also {})", code(key.extra_flag));
    std::string meaning(key.description);
    if (!key.more.empty()) meaning += fmt::format("; {}", key.more);
    out += fmt::format("| {} | {} | {} | {} | {} |\n", name, code(env_name(key)), default_text(key),
                       allowed(key), meaning);
  }
  return out;
}

std::string config_keys_text() {
  const auto plain = [](std::string text) {
    std::erase(text, '`');
    return text;
  };
  std::string out;
  for (const ConfigKey& key : kConfigKeys) {
    out += fmt::format("{}\n  {}", key.name, key.description);
    if (!key.more.empty()) out += fmt::format("; {}", plain(std::string(key.more)));
    out += fmt::format("\n  flag {}, environment {}; default {}; {}\n", flag_names(key),
                       env_name(key), plain(default_text(key)), plain(allowed(key)));
  }
  return out;
}

void add_config_options(CLI::App& app, Config& c) {
  app.set_config("--config", "",
                 "configuration file (TOML/INI); default: the first found of "
                 "TIMEWARP_CONFIG, ./.timewarp.toml, "
                 "~/.config/timewarp/timewarp.toml, /etc/timewarp/timewarp.toml");
  app.allow_config_extras(CLI::config_extras_mode::error);
  // Read by parse_command_line before CLI11 parses: no file unless --config names one.
  app.add_flag_function(
         "--no-config", [](std::int64_t) {}, "read no configuration file")
      ->configurable(false);
  app.set_version_flag(
      "--version", [&app] { return fmt::format("{} {}", app.get_name(), kVersion); },
      "print the version and exit");

  for (const ConfigKey& key : kConfigKeys) {
    const auto add = [&](auto& value) {
      return app.add_option(flag_names(key), value, std::string(key.description))
          ->envname(env_name(key))
          ->capture_default_str()
          ->group(std::string(kConfigGroup));
    };
    std::visit(Overloaded{[&](const ChoiceKey& k) {
                            add(c.*k.field)
                                ->check(CLI::IsMember(
                                    std::vector<std::string>(k.choices.begin(), k.choices.end())));
                          },
                          // Every number goes through number_in: none escapes its checks.
                          [&]<class T>(const NumberKey<T>& k) {
                            add(c.*k.field)->transform(number_in(k.lowest, k.highest));
                          },
                          [&](const ListKey& k) {
                            auto* option = add(c.*k.field);
                            if (k.check == nullptr) return;
                            option->check(CLI::Validator(
                                [check = k.check](std::string& item) { return check(item); }, "",
                                std::string(key.name)));
                          },
                          [&](const auto& k) { add(c.*k.field); }},
               key.value);
  }

  const auto internal = [&](const char* name, std::string& value) {
    return app.add_option(name, value)->group("")->configurable(false);
  };
  internal("--scheduler-exe", c.scheduler_exe);
  internal("--timewarp-exe", c.timewarp_exe);
  internal("--archiver-exe", c.archiver_exe);
  app.add_option("--archiver-arg", c.archiver_args)
      ->group("")
      ->configurable(false)
      ->allow_extra_args(false);
}

namespace {

// Whether argv holds `flag` (alone or as flag=value) before a "--".
bool has_flag(std::string_view flag, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg == flag || (arg.size() > flag.size() && arg.substr(0, flag.size()) == flag &&
                        arg[flag.size()] == '=')) {
      return true;
    }
  }
  return false;
}

bool given_on_command_line(const CLI::Option& option, int argc, char** argv) {
  const auto& names = option.get_lnames();
  return std::any_of(names.begin(), names.end(),
                     [&](const std::string& name) { return has_flag("--" + name, argc, argv); });
}

// A file found without being named is read only when nobody else could have put words in it
// (owned by this user or root, writable by no one else: a `./.timewarp.toml` in a shared
// folder must not steer a root's restore) and this user may read it. Nothing there: false,
// silently; there but not to be read: false, with a warning.
bool trusted_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  if ((st.st_uid != ::geteuid() && st.st_uid != 0) || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    std::cerr << fmt::format(
        "warning: ignoring configuration file {}: it belongs to another user or others may "
        "write it (name it with --config to read it anyway)\n",
        path);
    return false;
  }
  // The package's file is for root and the service's group: another user goes on without it.
  if (::access(path.c_str(), R_OK) != 0) {
    std::cerr << fmt::format(
        "warning: ignoring configuration file {}: {} (--no-config: "
        "look for none)\n",
        path, std::strerror(errno));
    return false;
  }
  return true;
}

std::string user_config_file() {
  const char* xdg = std::getenv("XDG_CONFIG_HOME");
  if (xdg != nullptr && *xdg == '/') return fmt::format("{}/timewarp/timewarp.toml", xdg);
  const char* home = std::getenv("HOME");
  if (home == nullptr || *home != '/') return {};
  return fmt::format("{}/.config/timewarp/timewarp.toml", home);
}

}  // namespace

std::optional<FoundConfig> find_config_file(ConfigSearch search) {
  if (search == ConfigSearch::Off) return std::nullopt;
  const char* named = std::getenv("TIMEWARP_CONFIG");
  if (named != nullptr && *named != '\0') return FoundConfig{named, "TIMEWARP_CONFIG"};
  char cwd[4096];
  const std::string here = ::getcwd(cwd, sizeof cwd) != nullptr ? cwd : "";
  const std::pair<std::string, const char*> candidates[] = {
      {here.empty() ? "" : (here == "/" ? "" : here) + "/.timewarp.toml", "project"},
      {user_config_file(), "user"},
      {"/etc/timewarp/timewarp.toml", "system"},
  };
  for (const auto& [file, how] : candidates) {
    if (!file.empty() && trusted_file(file)) return FoundConfig{file, how};
  }
  return std::nullopt;
}

namespace {

// Where each key's value came from, once parsed.
void record_origins(const CLI::App& app, int argc, char** argv,
                    const std::vector<std::pair<std::string, std::string>>& from_env,
                    Config& config) {
  config.key_origins.clear();
  for (const ConfigKey& key : kConfigKeys) {
    const CLI::Option* option = app.get_option_no_throw("--" + dashed(key.name));
    if (option == nullptr) continue;
    std::string origin = "default";
    const std::string flag = "--" + option->get_lnames().front();
    const auto env = std::find_if(from_env.begin(), from_env.end(),
                                  [&](const auto& pair) { return pair.first == flag; });
    if (given_on_command_line(*option, argc, argv)) {
      origin = "command line";
    } else if (env != from_env.end()) {
      origin = "environment " + env->second;
    } else if (option->count() > 0) {
      origin = "file " + config.config_file;
    }
    config.key_origins.emplace(std::string(key.name), std::move(origin));
  }
}

// Each environment variable of a key not set on the command line, handed to CLI11 as a flag:
// precedence is flags, then environment, then file, and CLI11 reads the file before the
// environment. Returns (flag, variable) for each.
std::vector<std::pair<std::string, std::string>> env_as_flags(const CLI::App& app, int argc,
                                                              char** argv,
                                                              std::vector<std::string>& args) {
  std::vector<std::pair<std::string, std::string>> from_env;
  for (const CLI::Option* option : app.get_options()) {
    const std::string& env = option->get_envname();
    const char* value = env.empty() ? nullptr : std::getenv(env.c_str());
    if (value == nullptr || *value == '\0' || option->get_lnames().empty()) continue;
    if (given_on_command_line(*option, argc, argv)) continue;
    const std::string flag = "--" + option->get_lnames().front();
    args.insert(args.begin() + 1, fmt::format("{}={}", flag, value));
    from_env.emplace_back(flag, env);
  }
  return from_env;
}

}  // namespace

int parse_command_line(CLI::App& app, int argc, char** argv, ConfigSearch search, Config* config) {
  std::vector<std::pair<std::string, std::string>> from_env;  // flag, environment variable
  try {
    std::vector<std::string> args(argv, argv + argc);
    from_env = env_as_flags(app, argc, argv, args);
    std::string file;
    if (!has_flag("--config", argc, argv) && !has_flag("--no-config", argc, argv)) {
      if (const auto found = find_config_file(search)) {
        file = found->file;
        if (::access(file.c_str(), R_OK) != 0) {
          std::cerr << fmt::format("{}: configuration file {} (from {}) cannot be read: {}\n",
                                   app.get_name(), file, found->how, std::strerror(errno));
          return 2;
        }
        args.insert(args.begin() + 1, "--config=" + file);
      }
    }
    std::vector<char*> pointers;
    for (auto& arg : args) pointers.push_back(arg.data());
    app.parse(static_cast<int>(pointers.size()), pointers.data());
    if (config != nullptr) {
      const CLI::Option* named = app.get_option_no_throw("--config");
      config->config_file =
          named != nullptr && named->count() > 0 ? named->as<std::string>() : file;
      record_origins(app, argc, argv, from_env, *config);
    }
    return -1;
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
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

namespace {

// The flag (or flags) that give `key` its value of `c`, appended to `args`.
void key_args(const Config& c, const ConfigKey& key, std::vector<std::string>& args) {
  const auto put = [&args](std::string_view flag, const auto& value) {
    args.push_back(fmt::format("--{}={}", flag, value));
  };
  const std::string flag = dashed(key.name);
  std::visit(Overloaded{[&](const TextKey& k) {  // empty is every text key's default
                          if (!(c.*k.field).empty()) put(flag, c.*k.field);
                        },
                        [&](const ListKey& k) {
                          for (const auto& item : c.*k.field) {
                            if (!item.empty()) {
                              put(flag, item);
                              continue;
                            }
                            // CLI11 reads "--flag=" as the flag alone, which then takes
                            // the next argument as its value.
                            args.push_back("--" + flag);
                            args.emplace_back();
                          }
                        },
                        [&](const auto&) { put(flag, key_value(key, c)); }},
             key.value);
}

}  // namespace

std::vector<std::string> config_to_args(const Config& c, Audience audience) {
  std::vector<std::string> args;
  for (const ConfigKey& key : kConfigKeys) {
    // A key marked Archiver reaches the scheduler too: it passes the key on.
    if (audience == Audience::None || key.audience < audience) continue;
    key_args(c, key, args);
  }
  if (audience == Audience::Scheduler) {
    if (!c.archiver_exe.empty()) args.push_back("--archiver-exe=" + c.archiver_exe);
    for (const auto& arg : c.archiver_args) args.push_back("--archiver-arg=" + arg);
  }
  return args;
}

std::vector<std::string> config_to_args(const Config& c, std::span<const std::string_view> names) {
  std::vector<std::string> args;
  for (const ConfigKey& key : kConfigKeys) {
    if (std::find(names.begin(), names.end(), key.name) != names.end()) key_args(c, key, args);
  }
  return args;
}

}  // namespace tw
