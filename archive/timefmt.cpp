#include "archive/timefmt.hpp"

#include <time.h>

#include <cctype>
#include <charconv>
#include <initializer_list>
#include <optional>

#include <fmt/format.h>

#include "common/time.hpp"

namespace tw::archive {
namespace {

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

// One number of a date or a time: how many digits it has and where it goes.
struct Field {
  std::size_t width;
  int* value;
};

// Reads `fields` at text[pos], one `separator` between each two ("2026-11-22", "10:00").
bool read_fields(std::string_view text, std::size_t& pos, char separator,
                 std::initializer_list<Field> fields) {
  bool first = true;
  for (const Field& field : fields) {
    if (!first && !expect(text, pos, separator)) return false;
    first = false;
    const auto value = digits(text, pos, field.width);
    if (!value) return false;
    *field.value = *value;
  }
  return true;
}

// ".123" -> 123000000 ns; consumes the fraction digits (beyond nine, they are dropped).
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

// seconds * 10^9 + ns (0 <= ns < 10^9), or nothing when it does not fit in an int64.
std::optional<std::int64_t> to_ns(std::int64_t seconds, std::int64_t ns) {
  if (seconds < 0 && ns > 0) {  // the earliest instants: their whole second does not fit
    ++seconds;
    ns -= kNsPerSecond;
  }
  std::int64_t out = 0;
  if (__builtin_mul_overflow(seconds, kNsPerSecond, &out) ||
      __builtin_add_overflow(out, ns, &out)) {
    return std::nullopt;
  }
  return out;
}

Fault bad_time(std::string_view text) {
  return permanent(fmt::format(
      "bad time '{}': expected ISO-8601 like 2026-11-22T10:00:00 or 2026-11-22T10:00:00Z, "
      "or Unix seconds",
      text));
}

Fault out_of_range(std::string_view text) {
  return permanent(
      fmt::format("bad time '{}': out of range (the archive keeps nanoseconds since "
                  "1970 in 64 bits: {} to {})",
                  text, format_time_ns(INT64_MIN), format_time_ns(INT64_MAX)));
}

// "[-]seconds[.fraction]"; the sign applies to the fraction too ("-0.5" is half a second
// before the epoch). `original` is the text as given, for messages.
Expected<std::int64_t> parse_unix(std::string_view text, std::string_view original) {
  const bool negative = !text.empty() && text.front() == '-';
  if (negative) text.remove_prefix(1);
  std::string_view whole = text;
  std::string_view frac;
  if (const auto dot = text.find('.'); dot != std::string_view::npos) {
    whole = text.substr(0, dot);
    frac = text.substr(dot + 1);
  }
  std::int64_t seconds = 0;
  const auto [end, ec] = std::from_chars(whole.data(), whole.data() + whole.size(), seconds);
  if (ec == std::errc::result_out_of_range) return out_of_range(original);
  if (ec != std::errc{} || end != whole.data() + whole.size() || whole.empty()) {
    return bad_time(original);
  }
  const std::string frac_text = "." + std::string(frac);
  std::size_t fpos = 1;
  const std::int64_t ns = fraction_ns(frac_text, fpos);
  if (fpos != frac_text.size()) return bad_time(original);
  const auto total = negative ? to_ns(-seconds, 0) : to_ns(seconds, ns);
  if (!total) return out_of_range(original);
  if (!negative) return *total;
  if (*total < INT64_MIN + ns) return out_of_range(original);
  return *total - ns;
}

// Days from 1970-01-01 to year-month-day in the proleptic Gregorian calendar (Howard
// Hinnant's days_from_civil).
std::int64_t days_from_civil(std::int64_t y, int m, int d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const std::int64_t yoe = y - era * 400;
  const std::int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const std::int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

int days_in_month(int year, int month) {
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  return month == 2 && leap ? 29 : kDays[month - 1];
}

struct Fields {
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
};

// Why `f` names no instant (February 30, hour 24...), or nothing when it is a real one.
std::optional<std::string> impossible(const Fields& f) {
  if (f.month < 1 || f.month > 12) return fmt::format("there is no month {:02}", f.month);
  if (f.day < 1 || f.day > days_in_month(f.year, f.month)) {
    return fmt::format("{:04}-{:02} has no day {:02}", f.year, f.month, f.day);
  }
  if (f.hour > 23) return fmt::format("hour {:02} is not 00 to 23", f.hour);
  if (f.minute > 59) return fmt::format("minute {:02} is not 00 to 59", f.minute);
  if (f.second > 59) return fmt::format("second {:02} is not 00 to 59", f.second);
  return std::nullopt;
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

Expected<std::int64_t> parse_time_ns(std::string_view text) {
  const std::string_view original = text;
  const auto bad = [&] { return bad_time(original); };
  const auto refuse = [&](std::string_view why) {
    return permanent(fmt::format("bad time '{}': {}", original, why));
  };
  if (!text.empty() && text.front() == '@') text.remove_prefix(1);
  if (text.empty()) return bad();
  // Unix seconds: digits (and a dot) only, or a date would have a '-' after 4 digits.
  if (text.find_first_not_of("0123456789.") == std::string_view::npos ||
      (text.front() == '-' && text.size() > 1 &&
       text.substr(1).find_first_not_of("0123456789.") == std::string_view::npos)) {
    return parse_unix(text, original);
  }
  std::size_t pos = 0;
  Fields f;
  if (!read_fields(text, pos, '-', {{4, &f.year}, {2, &f.month}, {2, &f.day}})) return bad();
  std::int64_t frac = 0;
  if (pos < text.size() && (text[pos] == 'T' || text[pos] == 't' || text[pos] == ' ')) {
    ++pos;
    if (!read_fields(text, pos, ':', {{2, &f.hour}, {2, &f.minute}})) return bad();
    if (pos < text.size() && text[pos] == ':') {
      ++pos;
      if (!read_fields(text, pos, ':', {{2, &f.second}})) return bad();
      if (pos < text.size() && (text[pos] == '.' || text[pos] == ',')) {
        ++pos;
        const std::size_t first = pos;
        frac = fraction_ns(text, pos);
        if (pos == first) return bad();  // a dot needs a digit after it
      }
    }
  }
  if (const auto why = impossible(f)) return refuse(*why);
  std::int64_t seconds = 0;
  if (pos == text.size()) {  // no zone: local time
    struct tm tm {};
    tm.tm_year = f.year - 1900;
    tm.tm_mon = f.month - 1;
    tm.tm_mday = f.day;
    tm.tm_hour = f.hour;
    tm.tm_min = f.minute;
    tm.tm_sec = f.second;
    tm.tm_isdst = -1;
    tm.tm_wday = -1;  // mktime sets it on success (its -1 result is also a valid time)
    const time_t t = mktime(&tm);
    if (tm.tm_wday == -1) return out_of_range(original);
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
      if (*oh > 23 || *om > 59) {
        return refuse(
            fmt::format("zone offset {}{:02}:{:02} is not within -23:59 to +23:59", z, *oh, *om));
      }
      offset = (*oh * 3600 + *om * 60) * (z == '+' ? 1 : -1);
    }
    if (pos != text.size()) return bad();
    seconds = (days_from_civil(f.year, f.month, f.day) * 24 + f.hour) * 3600 + f.minute * 60 +
              f.second - offset;
  }
  const auto ns = to_ns(seconds, frac);
  if (!ns) return out_of_range(original);
  return *ns;
}

}  // namespace tw::archive
