// The archiver's input: newline-terminated request lines read from a descriptor (stdin),
// with a cap on a line's length, while waiting also for the store's group signal, a stop
// request and the quiet that lets the archive fold its catalog's journal.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>

#include "common/line_buffer.hpp"

namespace tw::archiver {

class LineReader {
 public:
  enum class Status { Line, Overlong, Eof, Stopped, Error };

  // The longest request line; of a longer one only kKeptOfOverlong bytes are kept: enough
  // for its id, not for its path.
  static constexpr std::size_t kMaxLine = 1 << 20;
  static constexpr std::size_t kKeptOfOverlong = 64;
  // How long without a request makes the archive quiet (on_quiet), and the first and the
  // longest wait between two tries when another process keeps the catalog busy (the other
  // archivers go quiet at the same moment and fold the same journal).
  static constexpr auto kQuiet = std::chrono::milliseconds(1000);
  static constexpr auto kFirstQuietRetry = std::chrono::milliseconds(250);
  static constexpr auto kMaxQuietRetry = std::chrono::milliseconds(64'000);

  struct Events {
    // Whether to stop; `stop_fd` is readable once it may have turned true.
    std::function<bool()> stopped;
    int stop_fd = -1;
    // Runs when no request came for kQuiet after the last one, and again each time it
    // returns false (not done): after kFirstQuietRetry, then twice as long each time, at
    // most kMaxQuietRetry apart. Optional.
    std::function<bool()> on_quiet;
    // Names a descriptor to wait on beside the input (-1: none); `on_group()` runs when it
    // is readable. Optional.
    std::function<int()> group_fd;
    std::function<void()> on_group;
  };

  LineReader(int fd, Events events) : fd_(fd), events_(std::move(events)) {}

  // The next line (without its newline), or why there is none; stops on EOF or a stop
  // request.
  Status next(std::string& line);

  // True when next() would not wait: a whole line (or the end of input) is here already,
  // after taking in whatever the descriptor holds now. Part of a line is not enough: its
  // rest may come only after the answers the caller is holding back.
  bool ready();

 private:
  Status read_next(std::string& line);
  // The wait after which the archive is quiet again, after one more on_quiet() try.
  void quiet_tried(bool done);
  // One read of what the descriptor holds into lines_ (at its end, eof_ is set); false on
  // a read error, errno telling which.
  bool take_in();

  int fd_;
  Events events_;
  bool quiet_due_ = false;  // a request came since on_quiet last returned true
  std::chrono::milliseconds quiet_wait_ = kQuiet;
  bool eof_ = false;  // the end of input was read
  LineBuffer lines_{kMaxLine, kKeptOfOverlong};
};

}  // namespace tw::archiver
