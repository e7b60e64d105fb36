#include "common/logging.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <vector>

#include <spdlog/sinks/base_sink.h>
// The compiled spdlog instantiates base_sink for its own mutexes only; this one is ours.
#include <spdlog/sinks/base_sink-inl.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "common/fd.hpp"
#include "common/mutex.hpp"
#include "common/thread_annotations.hpp"
#include "common/version.hpp"

namespace tw {
namespace {

// Appends each message to a log file this process opened itself: spdlog's own file sink
// would create missing directories (as root, anywhere a typo points) and throws from deep
// inside start-up when it cannot open the file. base_sink calls sink_it_ and flush_ with
// its mutex_ (a tw::Mutex) held, so one message's writes never interleave with another's.
class AppendFileSink final : public spdlog::sinks::base_sink<Mutex> {
 public:
  explicit AppendFileSink(UniqueFd fd) : fd_(std::move(fd)) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) REQUIRES(mutex_) override {
    spdlog::memory_buf_t formatted;
    formatter_->format(msg, formatted);
    const char* data = formatted.data();
    std::size_t left = formatted.size();
    while (left > 0) {  // O_APPEND: each write lands at the end, whoever else appends
      const ssize_t n = ::write(fd_.get(), data, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;  // a full disk must not stop the program; stderr still has it
      data += n;
      left -= static_cast<std::size_t>(n);
    }
  }
  void flush_() REQUIRES(mutex_) override {}

 private:
  // Protected by mutex_.
  UniqueFd fd_ GUARDED_BY(mutex_);
};

}  // namespace

int setup_logging(const std::string& program, const Config& config) {
  std::vector<spdlog::sink_ptr> sinks;
  sinks.push_back(std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  if (!config.log_file.empty()) {
    UniqueFd fd(::open(config.log_file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666));
    if (!fd) {
      const int error = errno;
      std::cerr << program << ": cannot open log file '" << config.log_file
                << "': " << std::strerror(error) << "\n";
      return 2;
    }
    sinks.push_back(std::make_shared<AppendFileSink>(std::move(fd)));
  }
  auto logger = std::make_shared<spdlog::logger>(program, sinks.begin(), sinks.end());
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %n[%P] %l: %v");
  logger->set_level(spdlog::level::from_str(config.log_level));
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(std::move(logger));
  // Each log begins with who writes it: which program of which release.
  spdlog::info("{} {}", program, kVersion);
  return -1;
}

}  // namespace tw
