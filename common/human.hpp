// What the operator's tool shows people, beside the exact forms scripts read (--json): the
// archive's and the database's instants in local time to the second, with the zone's offset
// said once for a table when every row shares it, and a table's columns aligned. Byte counts
// for people are cli/archive_status.hpp's bytes_text. Pure functions (they read the local
// time zone, TZ), safe from any thread; ProgressLine says its own.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/mutex.hpp"

namespace tw {

// "2026-11-22 11:00:00": the local time of `ns` (nanoseconds since the epoch, UTC), to the
// second (a fraction is dropped, towards the past).
std::string local_time_text(std::int64_t ns);

// "+01:00", "-03:30": how far the local time of `ns` is ahead of UTC.
std::string zone_offset_text(std::int64_t ns);

// Instants for a column of a table. `zone` is the offset all of them share, for the
// column's header; when they differ (the rows span a change of daylight saving time), it is
// empty and each text ends with its own offset ("2026-03-29 01:59:59 +01:00"). An unknown
// instant is "-".
struct LocalTimes {
  std::vector<std::string> texts;
  std::string zone;
};
LocalTimes local_times(const std::vector<std::optional<std::int64_t>>& instants);
// The header of such a column: `title`, then the shared zone, "TIME (UTC+01:00)" ("TIME
// (UTC)" at offset zero), or `title` alone when each row says its own.
std::string zone_header(std::string_view title, const LocalTimes& times);

// Nanoseconds of the UTC text the database's status reads give
// ("2026-11-22T10:00:00.123Z"; the fraction and the "Z" may be missing); none when the text
// is not such a time.
std::optional<std::int64_t> utc_text_ns(std::string_view text);

// Rows of cells as lines of a table: each column as wide as its widest cell, columns two
// spaces apart; `right[i]` right-aligns column i (numbers). The last cell of a row is never
// padded, so it may hold text of any width (a path); the cells before it must be ASCII, as
// widths count bytes.
std::string table_text(const std::vector<std::vector<std::string>>& rows,
                       const std::vector<bool>& right);

// One line of progress on a terminal, from `text`: drawn as it is constructed, then
// rewritten in place ("\r", the text, the rest of the old line cleared) every `every` by a
// thread of its own, and cleared by stop(); nothing at all, no thread either, when `fd` is
// not a terminal, so a pipe or a log never sees it. `text` runs on that thread: what it
// reads must be safe to read there (atomics, or a mutex of its own). The line is cut to the
// terminal's width, so it never wraps. Construct, start the work, stop() (or destroy) before
// printing anything else to the terminal.
class ProgressLine {
 public:
  explicit ProgressLine(std::function<std::string()> text, int fd = STDERR_FILENO,
                        std::chrono::milliseconds every = std::chrono::milliseconds(250));
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  // Ends the redrawing and clears the line (if one was drawn). Idempotent.
  void stop() EXCLUDES(mutex_);
  // Whether `fd` is a terminal, i.e. whether a line is drawn at all.
  bool on_terminal() const { return thread_.joinable(); }

 private:
  void run() EXCLUDES(mutex_);
  void draw(const std::string& line) const;

  std::function<std::string()> text_;
  const int fd_;
  const std::chrono::milliseconds every_;
  Mutex mutex_;
  CondVar wake_;
  bool stopping_ GUARDED_BY(mutex_) = false;
  std::thread thread_;  // last: started once the rest is set
};

}  // namespace tw
