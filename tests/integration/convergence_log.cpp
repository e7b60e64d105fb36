#include "integration/convergence_log.hpp"

#include <algorithm>
#include <chrono>
#include <fstream>

#include <fmt/format.h>

namespace tw::test::convergence {

std::int64_t wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

EventLog::EventLog() : start_ns_(wall_ns()) {}

void EventLog::add(const std::string& who, const std::string& what) {
  const std::int64_t now = wall_ns();
  std::lock_guard lock(mutex_);
  lines_.push_back({now, who, what});
}

void EventLog::merge_file(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  std::vector<Line> merged;
  while (std::getline(in, text)) {
    const auto a = text.find('\t');
    const auto b = a == std::string::npos ? a : text.find('\t', a + 1);
    if (b == std::string::npos) continue;
    try {
      merged.push_back(
          {std::stoll(text.substr(0, a)), text.substr(a + 1, b - a - 1), text.substr(b + 1)});
    } catch (const std::exception&) {
    }
  }
  std::lock_guard lock(mutex_);
  lines_.insert(lines_.end(), merged.begin(), merged.end());
}

std::string EventLog::render() const {
  std::vector<Line> lines;
  {
    std::lock_guard lock(mutex_);
    lines = lines_;
  }
  std::stable_sort(lines.begin(), lines.end(),
                   [](const Line& x, const Line& y) { return x.ns < y.ns; });
  std::string out;
  for (const auto& l : lines) {
    out += fmt::format("  +{:8.3f} {}: {}\n", static_cast<double>(l.ns - start_ns_) / 1e9, l.who,
                       l.what);
  }
  return out;
}

std::size_t EventLog::size() const {
  std::lock_guard lock(mutex_);
  return lines_.size();
}

}  // namespace tw::test::convergence
