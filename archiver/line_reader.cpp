#include "archiver/line_reader.hpp"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string_view>

namespace tw::archiver {

LineReader::Status LineReader::next(std::string& line) {
  const Status status = read_next(line);
  if (status == Status::Line || status == Status::Overlong) {
    quiet_due_ = events_.on_quiet != nullptr;
    quiet_wait_ = kQuiet;
  }
  return status;
}

bool LineReader::ready() {
  while (!lines_.ready() && !eof_) {
    struct pollfd fd = {fd_, POLLIN, 0};
    if (::poll(&fd, 1, 0) <= 0) return false;
    if (!take_in()) return errno != EINTR && errno != EAGAIN;  // next() reports the error
  }
  return true;
}

LineReader::Status LineReader::read_next(std::string& line) {
  while (true) {
    // What is buffered comes first; the descriptors are polled only when no whole line is.
    if (const auto got = lines_.next(line); got != LineBuffer::Status::NeedMore) {
      return got == LineBuffer::Status::Line ? Status::Line : Status::Overlong;
    }
    if (eof_) return lines_.take_unterminated(line) ? Status::Line : Status::Eof;
    if (events_.stopped && events_.stopped()) return Status::Stopped;
    struct pollfd fds[3] = {{fd_, POLLIN, 0},
                            {events_.stop_fd, POLLIN, 0},
                            {events_.group_fd ? events_.group_fd() : -1, POLLIN, 0}};
    const int polled = ::poll(fds, 3, quiet_due_ ? static_cast<int>(quiet_wait_.count()) : -1);
    if (polled < 0) {
      if (errno == EINTR) continue;
      return Status::Error;
    }
    if (fds[2].revents != 0) {
      events_.on_group();
      if (fds[0].revents == 0) continue;
    }
    if (polled == 0) {
      quiet_tried(events_.on_quiet());
      continue;
    }
    if (fds[0].revents == 0) continue;  // woken by a signal
    if (!take_in() && errno != EINTR && errno != EAGAIN) return Status::Error;
  }
}

void LineReader::quiet_tried(bool done) {
  quiet_due_ = !done;
  quiet_wait_ =
      quiet_wait_ == kQuiet ? kFirstQuietRetry : std::min(2 * quiet_wait_, kMaxQuietRetry);
}

bool LineReader::take_in() {
  char chunk[64 * 1024];
  const ssize_t n = ::read(fd_, chunk, sizeof chunk);
  if (n < 0) return false;
  if (n == 0) {
    eof_ = true;
  } else {
    lines_.append(std::string_view(chunk, static_cast<std::size_t>(n)));
  }
  return true;
}

}  // namespace tw::archiver
