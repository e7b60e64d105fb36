// Fuzz target for the configuration parser (tw::add_config_options, tw::parse_command_line).
// Every input is a config file; its first line is also given as the value of a few numeric
// flags. Checks that nothing escapes parse_command_line but its exit codes, that a refusal
// is one line, that what is accepted lies within each key's range and reads integers in
// base 10, and that an accepted configuration passed on to a child (config_to_args) reads
// back the same.
//
// Built with -fsanitize=fuzzer under Clang (LLVMFuzzerTestOneInput); otherwise main()
// below hands mutated config files to the standalone driver (tests/support/fuzz_driver).
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "common/config.hpp"
#include "support/fuzz_driver.hpp"

namespace {

void check(bool condition, const char* what, std::string_view input) {
  tw::test::fuzz_check(condition, "fuzz_config", what, input);
}

// A scratch file for the config text, removed at exit.
struct Scratch {
  std::string file;
  Scratch() {
    std::string pattern = (std::filesystem::temp_directory_path() / "tw-fuzz-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) std::abort();
    file = pattern + "/tw.toml";
  }
  ~Scratch() {
    std::error_code ec;
    std::filesystem::remove_all(std::filesystem::path(file).parent_path(), ec);
  }
};

struct Outcome {
  int code;
  std::string err;
  tw::Config config;
};

Outcome parse(std::vector<std::string> args) {
  Outcome out{};
  CLI::App app{"fuzz"};
  app.name("fuzz");
  tw::add_config_options(app, out.config);
  args.insert(args.begin(), "fuzz");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  std::ostringstream err;
  std::ostringstream ignored;
  auto* old_err = std::cerr.rdbuf(err.rdbuf());
  auto* old_out = std::cout.rdbuf(ignored.rdbuf());
  out.code = tw::parse_command_line(app, static_cast<int>(argv.size()), argv.data());
  std::cerr.rdbuf(old_err);
  std::cout.rdbuf(old_out);
  out.err = err.str();
  return out;
}

bool in(double value, double lowest, double highest) {
  return std::isfinite(value) && value >= lowest && value <= highest;
}

// What every accepted configuration must hold (the ranges of common/config.cpp).
void check_ranges(const tw::Config& c, std::string_view input) {
  check(c.archivers >= 1 && c.archivers <= 256, "archivers in range", input);
  check(c.batch_size >= 1 && c.batch_size <= 100000, "batch_size in range", input);
  check(c.max_attempts >= 1 && c.max_attempts <= 1000, "max_attempts in range", input);
  check(c.compression_level >= -7 && c.compression_level <= 19, "compression_level", input);
  check(c.compression_threads >= 0 && c.compression_threads <= 64, "compression_threads", input);
  check(c.backlog_warning >= 1 && c.backlog_warning <= (std::int64_t{1} << 40), "backlog", input);
  check(in(c.retry_base_delay, 0, 86400) && in(c.retry_max_delay, 0, 7 * 86400.0),
        "retry delays in range", input);
  check(in(c.max_cpu_percent, 0, 100000), "max_cpu_percent in range", input);
  check(in(c.item_timeout, 0.1, 7 * 86400.0), "item_timeout in range", input);
  check(in(c.lease_time, 1, 86400) && in(c.heartbeat_interval, 0.05, 3600) &&
            in(c.flush_interval, 0, 60),
        "lease, heartbeat and flush in range", input);
  check(in(c.event_delay, 0, 60) && in(c.rescan_interval, 0, 365 * 86400.0) &&
            in(c.prune_age, 0, 3650 * 86400.0) && in(c.prune_interval, 0, 30 * 86400.0),
        "monitor and prune intervals in range", input);
}

// `text` as [+-]digits read in base 10, if it is one and fits.
std::optional<long long> base10(std::string_view text) {
  std::string digits(text);
  if (digits.empty() || digits.find_first_not_of("+-0123456789") != std::string::npos ||
      digits.find_first_of("+-", 1) != std::string::npos) {
    return std::nullopt;
  }
  errno = 0;
  const long long value = std::strtoll(digits.c_str(), nullptr, 10);
  if (errno != 0 || digits == "+" || digits == "-") return std::nullopt;
  return value;
}

void check_outcome(const Outcome& o, std::string_view input) {
  check(o.code == -1 || o.code == 0 || o.code == 2, "an exit code of parse_command_line", input);
  if (o.code == 2) {
    check(!o.err.empty() && o.err.find('\n') == o.err.size() - 1, "a refusal is one line", input);
  }
  if (o.code != -1) return;
  check_ranges(o.config, input);
  // Passed on to a child, the configuration reads back the same.
  const Outcome child = parse(tw::config_to_args(o.config));
  check(child.code == -1, "a child accepts its parent's configuration", input);
  for (const tw::ConfigKey& key : tw::config_keys()) {
    if (key.audience == tw::Audience::None) continue;  // the database goes by environment
    check(tw::key_value(key, o.config) == tw::key_value(key, child.config),
          "every key survives config_to_args", input);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static Scratch scratch;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  {
    std::ofstream file(scratch.file, std::ios::binary | std::ios::trunc);
    file.write(input.data(), static_cast<std::streamsize>(input.size()));
  }
  check_outcome(parse({"--config", scratch.file}), input);

  // The first line as the value of flags: an accepted integer is its base-10 reading, an
  // accepted float is finite.
  const std::string value(input.substr(0, input.find('\n')));
  if (value.find('\0') != std::string::npos) return 0;  // not a C string: no argv holds it
  const Outcome batch = parse({"--batch-size=" + value});
  check_outcome(batch, input);
  if (batch.code == -1) {
    check(base10(value) == batch.config.batch_size, "batch_size is read in base 10", input);
  }
  const Outcome size_flag = parse({"--max-file-size=" + value});
  check_outcome(size_flag, input);
  if (size_flag.code == -1) {
    check(value.find('-') == std::string::npos, "an unsigned key refuses a sign", input);
  }
  check_outcome(parse({"--item-timeout=" + value}), input);
  return 0;
}

#ifndef TW_LIBFUZZER
int main(int argc, char** argv) {
  const std::vector<std::string> seeds = {
      "batch_size = 0100\n",
      "item_timeout = nan\n",
      "lease_time = -Infinity\n",
      "archivers = 3\nstrategy = \"lifo\"\ncoalesce = false\n",
      "retry_base_delay = .5\nretry_max_delay = 1e2\n",
      "max_file_size = 18446744073709551615\n",
      "max_bandwidth = -1\n",
      "backlog_warning = 1099511627776\n",
      "compression_level = -07\ncompression_threads = 0x10\n",
      "source_dirs = [\"/a\", \"/b\"]\nexclude = \"*.tmp\"\n",
      "[timewarp]\nevent_delay = 0.1 # comment\n",
      "log_level = \"debug\"\nprune_age = 604800\n",
      "database = \"postgresql://u:pw@h/d\"\n",
      "7",
      "12.5e-1"};
  const std::string alphabet = "0123456789-+.eEx_ =\"'[]#\nnaifINFdz,";
  return tw::test::fuzz_main(argc, argv, "fuzz_config", seeds, alphabet);
}
#endif
