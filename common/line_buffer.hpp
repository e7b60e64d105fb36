// Splits a byte stream into newline-terminated lines with a cap on a line's length: the
// one line reader behind the archiver's stdin, the scheduler's signal pipe and
// ChildProcess::read_line. It only buffers; the caller reads the descriptor (poll, read,
// EOF) and appends what it got. Not thread-safe: one owner.
//
// A line longer than `max_line` bytes (newline not counted) is reported once as Overlong,
// as soon as that many bytes have come without a newline or when its newline shows it was
// too long, with only its first `kept_of_overlong` bytes; the rest of it, up to and
// including its newline, is dropped without being buffered.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tw {

class LineBuffer {
 public:
  enum class Status { Line, Overlong, NeedMore };

  explicit LineBuffer(std::size_t max_line, std::size_t kept_of_overlong = 0)
      : max_line_(max_line), kept_(kept_of_overlong) {}

  void append(std::string_view bytes);
  // The next line (newline removed) into `line`; NeedMore when none is complete yet.
  Status next(std::string& line);
  // True when next() would not answer NeedMore.
  bool ready() const;
  // At the end of the stream: the last line when it had no newline (and was not
  // overlong). False when nothing is left.
  bool take_unterminated(std::string& line);

 private:
  // Drops the rest of an overlong line; true once its newline was found.
  bool skip_overlong_tail();

  const std::size_t max_line_;
  const std::size_t kept_;
  std::string buffer_;
  std::size_t scanned_ = 0;  // buffer_[0, scanned_) holds no newline
  bool discarding_ = false;  // dropping the tail of an overlong line
};

}  // namespace tw
