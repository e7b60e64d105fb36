#include "common/human.hpp"

#include <sys/ioctl.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <utility>

#include <fmt/format.h>

#include "common/text.hpp"
#include "common/time.hpp"

namespace tw {
namespace {

// The local broken-down time of `ns`, whole seconds rounded towards the past (a time before
// 1970 too).
struct tm local_tm(std::int64_t ns) {
  std::int64_t seconds = ns / kNsPerSecond;
  if (ns % kNsPerSecond < 0) --seconds;
  const auto t = static_cast<time_t>(seconds);
  struct tm out {};
  ::localtime_r(&t, &out);
  return out;
}

// Everything written, or given up on an error (a terminal gone away is no reason to stop
// the work whose progress it showed).
void write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    text.remove_prefix(static_cast<std::size_t>(n));
  }
}

}  // namespace

std::string local_time_text(std::int64_t ns) {
  const struct tm t = local_tm(ns);
  return fmt::format("{:04d}-{:02d}-{:02d} {:02d}:{:02d}:{:02d}", t.tm_year + 1900, t.tm_mon + 1,
                     t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec);
}

std::string zone_offset_text(std::int64_t ns) {
  const long offset = local_tm(ns).tm_gmtoff;
  const long minutes = std::labs(offset) / 60;
  return fmt::format("{}{:02d}:{:02d}", offset < 0 ? '-' : '+', minutes / 60, minutes % 60);
}

LocalTimes local_times(const std::vector<std::optional<std::int64_t>>& instants) {
  LocalTimes out;
  bool shared = true;
  for (const auto& at : instants) {
    if (!at) continue;
    const std::string zone = zone_offset_text(*at);
    if (out.zone.empty()) out.zone = zone;
    shared = shared && zone == out.zone;
  }
  if (!shared) out.zone.clear();
  for (const auto& at : instants) {
    if (!at) {
      out.texts.emplace_back("-");
    } else {
      out.texts.push_back(local_time_text(*at) + (shared ? "" : " " + zone_offset_text(*at)));
    }
  }
  return out;
}

std::string zone_header(std::string_view title, const LocalTimes& times) {
  if (times.zone.empty()) return std::string(title);
  return fmt::format("{} (UTC{})", title, times.zone == "+00:00" ? "" : times.zone);
}

std::optional<std::int64_t> utc_text_ns(std::string_view text) {
  // YYYY-MM-DDTHH:MM:SS, then an optional fraction, then an optional Z.
  if (text.size() < 19 || text[4] != '-' || text[7] != '-' ||
      (text[10] != 'T' && text[10] != ' ') || text[13] != ':' || text[16] != ':') {
    return std::nullopt;
  }
  const auto year = parse_int<int>(text.substr(0, 4));
  const auto month = parse_int<int>(text.substr(5, 2));
  const auto day = parse_int<int>(text.substr(8, 2));
  const auto hour = parse_int<int>(text.substr(11, 2));
  const auto minute = parse_int<int>(text.substr(14, 2));
  const auto second = parse_int<int>(text.substr(17, 2));
  if (!year || !month || !day || !hour || !minute || !second) return std::nullopt;
  std::string_view rest = text.substr(19);
  std::int64_t fraction_ns = 0;
  if (!rest.empty() && rest.front() == '.') {
    rest.remove_prefix(1);
    std::int64_t scale = kNsPerSecond;
    std::size_t digits = 0;
    for (; digits < rest.size() && rest[digits] >= '0' && rest[digits] <= '9'; ++digits) {
      scale /= 10;
      fraction_ns += (rest[digits] - '0') * scale;
    }
    if (digits == 0) return std::nullopt;
    rest.remove_prefix(digits);
  }
  if (rest == "Z") rest.remove_prefix(1);
  if (!rest.empty()) return std::nullopt;
  struct tm t {};
  t.tm_year = *year - 1900;
  t.tm_mon = *month - 1;
  t.tm_mday = *day;
  t.tm_hour = *hour;
  t.tm_min = *minute;
  t.tm_sec = *second;
  const time_t seconds = ::timegm(&t);
  return static_cast<std::int64_t>(seconds) * kNsPerSecond + fraction_ns;
}

std::string table_text(const std::vector<std::vector<std::string>>& rows,
                       const std::vector<bool>& right) {
  std::vector<std::size_t> widths;
  for (const auto& row : rows) {
    // The last cell is never padded: it does not widen its column.
    for (std::size_t i = 0; i + 1 < row.size(); ++i) {
      if (widths.size() <= i) widths.resize(i + 1, 0);
      widths[i] = std::max(widths[i], row[i].size());
    }
  }
  std::string out;
  for (const auto& row : rows) {
    for (std::size_t i = 0; i < row.size(); ++i) {
      if (i > 0) out += "  ";
      if (i + 1 == row.size()) {
        out += row[i];
      } else if (i < right.size() && right[i]) {
        out += fmt::format("{:>{}}", row[i], widths[i]);
      } else {
        out += fmt::format("{:<{}}", row[i], widths[i]);
      }
    }
    out += "\n";
  }
  return out;
}

ProgressLine::ProgressLine(std::function<std::string()> text, int fd,
                           std::chrono::milliseconds every)
    : text_(std::move(text)), fd_(fd), every_(every) {
  if (::isatty(fd_) != 1) return;
  // Drawn at once, before the work starts: a terminal always shows what runs, however short.
  draw(text_());
  thread_ = std::thread([this] { run(); });
}

ProgressLine::~ProgressLine() { stop(); }

void ProgressLine::stop() {
  if (!thread_.joinable()) return;
  {
    MutexLock lock(&mutex_);
    stopping_ = true;
    wake_.SignalAll();
  }
  thread_.join();
  write_all(fd_, "\r\x1b[K");
}

void ProgressLine::run() {
  MutexLock lock(&mutex_);
  auto next = std::chrono::steady_clock::now() + every_;
  while (!stopping_) {
    if (wake_.WaitUntil(&mutex_, next) || stopping_) continue;
    if (std::chrono::steady_clock::now() < next) continue;  // woken early, for nothing
    draw(text_());
    next = std::chrono::steady_clock::now() + every_;
  }
}

void ProgressLine::draw(const std::string& line) const {
  std::string_view shown = line;
  winsize ws{};
  // One column short of the width: a line that fills it would wrap on some terminals.
  if (::ioctl(fd_, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1 && shown.size() >= ws.ws_col) {
    shown = shown.substr(0, ws.ws_col - 1U);
  }
  write_all(fd_, "\r" + std::string(shown) + "\x1b[K");
}

}  // namespace tw
