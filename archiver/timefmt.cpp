#include "archiver/timefmt.hpp"

#include <time.h>

#include <cctype>
#include <charconv>
#include <optional>

#include <fmt/format.h>

namespace tw::archive {
namespace {

constexpr std::int64_t kNsPerSecond = 1'000'000'000;

// Reads exactly `width` digits at text[pos].
std::optional<int> digits(std::string_view text, std::size_t& pos, std::size_t width) {
  if (pos + width > text.size()) return std::nullopt;
  int value = 0;
  for (std::size_t i = 0; i < width; ++i) {
    const char c = text[pos + i];
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
    value = value * 10 + (c - '0');
  }
  pos += width;
  return value;
}

bool expect(std::string_view text, std::size_t& pos, char c) {
  if (pos >= text.size() || text[pos] != c) return false;
  ++pos;
  return true;
}

// ".123" -> 123000000 ns; consumes the fraction digits.
std::int64_t fraction_ns(std::string_view text, std::size_t& pos) {
  std::int64_t ns = 0;
  std::int64_t scale = kNsPerSecond / 10;
  while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) {
    ns += (text[pos] - '0') * scale;
    scale /= 10;
    ++pos;
  }
  return ns;
}

Result<std::int64_t> parse_unix(std::string_view text) {
  std::string_view whole = text;
  std::string_view frac;
  if (const auto dot = text.find('.'); dot != std::string_view::npos) {
    whole = text.substr(0, dot);
    frac = text.substr(dot + 1);
  }
  std::int64_t seconds = 0;
  const auto [end, ec] = std::from_chars(whole.data(), whole.data() + whole.size(), seconds);
  if (ec != std::errc{} || end != whole.data() + whole.size() || whole.empty()) {
    return Error{"bad Unix time"};
  }
  const std::string frac_text = "." + std::string(frac);
  std::size_t fpos = 1;
  const std::int64_t ns = fraction_ns(frac_text, fpos);
  if (fpos != frac_text.size()) return Error{"bad Unix time"};
  if (seconds > (INT64_MAX / kNsPerSecond) - 1 || seconds < (INT64_MIN / kNsPerSecond) + 1) {
    return Error{"time out of range"};
  }
  return seconds * kNsPerSecond + (seconds < 0 ? -ns : ns);
}

}  // namespace

std::string format_time_ns(std::int64_t ns) {
  std::int64_t seconds = ns / kNsPerSecond;
  std::int64_t rest = ns % kNsPerSecond;
  if (rest < 0) {
    rest += kNsPerSecond;
    --seconds;
  }
  const time_t t = static_cast<time_t>(seconds);
  struct tm tm {};
  gmtime_r(&t, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:09}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, rest);
}

Result<std::int64_t> parse_time_ns(std::string_view text) {
  const auto bad = [&] {
    return Error{fmt::format(
        "bad time '{}': expected ISO-8601 like 2026-11-22T10:00:00 or 2026-11-22T10:00:00Z, "
        "or Unix seconds",
        text)};
  };
  if (!text.empty() && text.front() == '@') text.remove_prefix(1);
  if (text.empty()) return bad();
  // Unix seconds: digits (and a dot) only, or a date would have a '-' after 4 digits.
  if (text.find_first_not_of("0123456789.") == std::string_view::npos ||
      (text.front() == '-' && text.size() > 1 &&
       text.substr(1).find_first_not_of("0123456789.") == std::string_view::npos)) {
    auto unix_ns = parse_unix(text);
    if (!unix_ns) return bad();
    return unix_ns;
  }
  std::size_t pos = 0;
  struct tm tm {};
  const auto year = digits(text, pos, 4);
  if (!year || !expect(text, pos, '-')) return bad();
  const auto month = digits(text, pos, 2);
  if (!month || !expect(text, pos, '-')) return bad();
  const auto day = digits(text, pos, 2);
  if (!day) return bad();
  tm.tm_year = *year - 1900;
  tm.tm_mon = *month - 1;
  tm.tm_mday = *day;
  std::int64_t frac = 0;
  if (pos < text.size() && (text[pos] == 'T' || text[pos] == 't' || text[pos] == ' ')) {
    ++pos;
    const auto hour = digits(text, pos, 2);
    if (!hour || !expect(text, pos, ':')) return bad();
    const auto minute = digits(text, pos, 2);
    if (!minute) return bad();
    tm.tm_hour = *hour;
    tm.tm_min = *minute;
    if (pos < text.size() && text[pos] == ':') {
      ++pos;
      const auto second = digits(text, pos, 2);
      if (!second) return bad();
      tm.tm_sec = *second;
      if (pos < text.size() && (text[pos] == '.' || text[pos] == ',')) {
        ++pos;
        frac = fraction_ns(text, pos);
      }
    }
  }
  if (*month < 1 || *month > 12 || *day < 1 || *day > 31 || tm.tm_hour > 23 || tm.tm_min > 59 ||
      tm.tm_sec > 60) {
    return bad();
  }
  std::int64_t seconds = 0;
  if (pos == text.size()) {  // no zone: local time
    tm.tm_isdst = -1;
    const time_t t = mktime(&tm);
    if (t == static_cast<time_t>(-1)) return bad();
    seconds = t;
  } else {
    std::int64_t offset = 0;
    const char z = text[pos];
    if (z == 'Z' || z == 'z') {
      ++pos;
    } else if (z == '+' || z == '-') {
      ++pos;
      const auto oh = digits(text, pos, 2);
      if (!oh) return bad();
      if (pos < text.size() && text[pos] == ':') ++pos;
      auto om = std::optional<int>(0);
      if (pos < text.size()) om = digits(text, pos, 2);
      if (!om) return bad();
      offset = (*oh * 3600 + *om * 60) * (z == '+' ? 1 : -1);
    }
    if (pos != text.size()) return bad();
    seconds = static_cast<std::int64_t>(timegm(&tm)) - offset;
  }
  return seconds * kNsPerSecond + frac;
}

std::int64_t now_ns() {
  struct timespec ts {};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * kNsPerSecond + ts.tv_nsec;
}

}  // namespace tw::archive
