#include "common/line_buffer.hpp"

#include <algorithm>

namespace tw {

void LineBuffer::append(std::string_view bytes) { buffer_.append(bytes); }

bool LineBuffer::skip_overlong_tail() {
  const auto newline = buffer_.find('\n');
  if (newline == std::string::npos) {
    buffer_.clear();
    return false;
  }
  buffer_.erase(0, newline + 1);
  discarding_ = false;
  return true;
}

LineBuffer::Status LineBuffer::next(std::string& line) {
  if (discarding_ && !skip_overlong_tail()) return Status::NeedMore;
  const auto newline = buffer_.find('\n', scanned_);
  if (newline == std::string::npos) {
    scanned_ = buffer_.size();
    if (buffer_.size() <= max_line_) return Status::NeedMore;
    line.assign(buffer_, 0, std::min(kept_, buffer_.size()));
    buffer_.clear();
    scanned_ = 0;
    discarding_ = true;
    return Status::Overlong;
  }
  const bool overlong = newline > max_line_;
  line.assign(buffer_, 0, overlong ? std::min(kept_, newline) : newline);
  buffer_.erase(0, newline + 1);
  scanned_ = 0;
  return overlong ? Status::Overlong : Status::Line;
}

bool LineBuffer::ready() const {
  std::size_t start = 0;  // where the next line begins
  std::size_t scan = scanned_;
  if (discarding_) {
    const auto end_of_tail = buffer_.find('\n');
    if (end_of_tail == std::string::npos) return false;
    start = scan = end_of_tail + 1;
  }
  return buffer_.find('\n', scan) != std::string::npos || buffer_.size() - start > max_line_;
}

bool LineBuffer::take_unterminated(std::string& line) {
  if (discarding_ || buffer_.empty()) return false;
  line = std::move(buffer_);
  buffer_.clear();
  scanned_ = 0;
  return true;
}

}  // namespace tw
