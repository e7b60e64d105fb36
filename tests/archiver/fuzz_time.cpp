// Fuzz target for tw::archive::parse_time_ns, the --at time text. Checks that every input
// is either refused with a message quoting it, or read as an instant that formats back to
// itself, whose UTC fields are those written (no overflow, no normalised February 31), whose
// zone offset shifts it by exactly that much, and whose local reading (TZ=UTC here) is the
// same instant as its UTC one.
//
// Built with -fsanitize=fuzzer under Clang (LLVMFuzzerTestOneInput); otherwise main()
// below hands mutated time texts to the standalone driver (tests/support/fuzz_driver).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "archive/timefmt.hpp"
#include "support/fuzz_driver.hpp"

namespace {

void check(bool condition, const char* what, std::string_view input) {
  tw::test::fuzz_check(condition, "fuzz_time", what, input);
}

bool digits_at(std::string_view text, std::size_t pos, std::size_t n) {
  if (pos + n > text.size()) return false;
  for (std::size_t i = pos; i < pos + n; ++i) {
    if (text[i] < '0' || text[i] > '9') return false;
  }
  return true;
}

// The length of "YYYY-MM-DD[T ]HH:MM[:SS]" at the start of `text`, or 0.
std::size_t date_time_length(std::string_view text) {
  if (!digits_at(text, 0, 4) || text.size() < 16 || text[4] != '-' || !digits_at(text, 5, 2) ||
      text[7] != '-' || !digits_at(text, 8, 2) || (text[10] != 'T' && text[10] != ' ') ||
      !digits_at(text, 11, 2) || text[13] != ':' || !digits_at(text, 14, 2)) {
    return 0;
  }
  return text.size() >= 19 && text[16] == ':' && digits_at(text, 17, 2) ? 19 : 16;
}

// The zone of a time text: its offset in seconds, or nothing when it names none.
struct Zone {
  std::size_t at;      // where the zone starts
  std::int64_t seconds;
};

std::optional<Zone> zone_of(std::string_view text, std::size_t from) {
  for (std::size_t i = from; i < text.size(); ++i) {
    const char c = text[i];
    if (c == 'Z' || c == 'z') return Zone{i, 0};
    if (c != '+' && c != '-') continue;
    if (!digits_at(text, i + 1, 2)) return std::nullopt;
    const std::int64_t hours = (text[i + 1] - '0') * 10 + (text[i + 2] - '0');
    std::size_t m = i + 3;
    if (m < text.size() && text[m] == ':') ++m;
    const std::int64_t minutes = digits_at(text, m, 2) ? (text[m] - '0') * 10 + (text[m + 1] - '0') : 0;
    return Zone{i, (hours * 3600 + minutes * 60) * (c == '+' ? 1 : -1)};
  }
  return std::nullopt;
}

constexpr std::int64_t kNs = 1'000'000'000;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const bool utc = [] {
    ::setenv("TZ", "UTC", 1);
    ::tzset();
    return true;
  }();
  (void)utc;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto parsed = tw::archive::parse_time_ns(text);
  if (!parsed) {
    check(parsed.error().rfind("bad time '", 0) == 0, "a refusal quotes the text", text);
    return 0;
  }
  const std::int64_t ns = *parsed;
  const std::string formatted = tw::archive::format_time_ns(ns);
  const auto again = tw::archive::parse_time_ns(formatted);
  check(again && *again == ns, "a formatted time parses back to itself", text);

  const std::size_t fields = date_time_length(text);
  if (fields == 0) return 0;
  const auto zone = zone_of(text, fields);
  if (!zone) {  // local time, and TZ is UTC: the same as with a Z
    const auto zoned = tw::archive::parse_time_ns(std::string(text) + "Z");
    check(zoned && *zoned == ns, "local time under TZ=UTC is UTC", text);
    return 0;
  }
  if (zone->seconds == 0) {  // the fields written are the UTC fields read
    std::string written(text.substr(0, fields));
    written[10] = 'T';
    check(formatted.compare(0, fields, written) == 0, "UTC fields survive", text);
    return 0;
  }
  // An offset shifts the instant by exactly that much.
  const auto as_utc = tw::archive::parse_time_ns(std::string(text.substr(0, zone->at)) + "Z");
  if (as_utc) check(*as_utc - ns == zone->seconds * kNs, "an offset shifts by itself", text);
  return 0;
}

#ifndef TW_LIBFUZZER
int main(int argc, char** argv) {
  const std::vector<std::string> seeds = {"2026-11-22T10:00:00Z",
                                          "2026-11-22T10:00:00.123456789+01:00",
                                          "2026-11-22 10:00",
                                          "2026-02-28",
                                          "2024-02-29T23:59:59-2359",
                                          "2100-02-28T00:00Z",
                                          "2300-01-01Z",
                                          "1795341600",
                                          "@1795341600.5",
                                          "-0.5",
                                          "2262-04-11T23:47:16.854775807Z",
                                          "1677-09-21T00:12:43.145224192Z",
                                          "9223372036.854775807",
                                          "1969-12-31T23:59:59,999+00:00"};
  const std::string alphabet = "0123456789-+:.,TZtz @9";
  return tw::test::fuzz_main(argc, argv, "fuzz_time", seeds, alphabet);
}
#endif
