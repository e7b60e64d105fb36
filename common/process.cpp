#include "common/process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <boost/process.hpp>
#include <boost/process/extend.hpp>

#include "common/fd.hpp"
#include "common/line_buffer.hpp"

namespace bp = boost::process;

namespace tw {
namespace {

constexpr std::size_t kMaxLine = 1 << 20;  // a longer line is Overlong (process.hpp)

class BoostChild final : public ChildProcess {
 public:
  BoostChild(bp::child child, UniqueFd to_child, UniqueFd from_child)
      : child_(std::move(child)),
        to_child_(std::move(to_child)),
        from_child_(std::move(from_child)) {}

  ~BoostChild() override {
    if (!reaped_) terminate(std::chrono::seconds(2));
  }

  pid_t pid() const override { return child_.id(); }

  bool write_line(std::string_view line) override {
    if (!to_child_) return false;
    std::string buffer;
    buffer.reserve(line.size() + 1);
    buffer.append(line);
    buffer.push_back('\n');
    std::size_t done = 0;
    while (done < buffer.size()) {
      const ssize_t n = ::write(to_child_.get(), buffer.data() + done, buffer.size() - done);
      if (n < 0) {
        if (errno == EINTR) continue;
        return false;
      }
      done += static_cast<std::size_t>(n);
    }
    return true;
  }

  bool has_buffered_line() const override { return lines_.ready(); }

  ReadStatus read_line(std::string& line, std::chrono::milliseconds timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      // What is buffered comes first; the pipe is read only when no whole line is.
      if (const auto got = lines_.next(line); got != LineBuffer::Status::NeedMore) {
        return got == LineBuffer::Status::Line ? ReadStatus::Line : ReadStatus::Overlong;
      }
      if (eof_) return ReadStatus::Eof;
      const auto left =
          std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      pollfd pfd{from_child_.get(), POLLIN, 0};
      const int wait_ms = static_cast<int>(std::clamp<std::int64_t>(left.count(), 0, 1 << 30));
      const int ready = ::poll(&pfd, 1, wait_ms);
      if (ready < 0) {
        if (errno == EINTR) continue;
        eof_ = true;
        continue;
      }
      if (ready == 0) {
        if (std::chrono::steady_clock::now() >= deadline) return ReadStatus::Timeout;
        continue;
      }
      char chunk[65536];
      const ssize_t n = ::read(from_child_.get(), chunk, sizeof chunk);
      if (n < 0) {
        if (errno == EINTR || errno == EAGAIN) continue;
        eof_ = true;
      } else if (n == 0) {
        eof_ = true;
      } else {
        lines_.append(std::string_view(chunk, static_cast<std::size_t>(n)));
      }
    }
  }

  int stdout_fd() const override { return from_child_.get(); }

  void close_stdin() override { to_child_.reset(); }

  std::optional<int> wait_exit(std::chrono::milliseconds timeout) override {
    if (reaped_) return status_;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    auto pause = std::chrono::milliseconds(1);
    while (true) {
      std::error_code ec;
      if (!child_.running(ec)) {
        reaped_ = true;
        status_ = child_.native_exit_code();
        status_ = exit_status_code(status_);
        return status_;
      }
      if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
      std::this_thread::sleep_for(pause);  // bounded polling: waitpid(WNOHANG) each round
      pause = std::min(pause * 2, std::chrono::milliseconds(20));
    }
  }

  int terminate(std::chrono::milliseconds grace) override {
    if (reaped_) return status_;
    close_stdin();
    ::kill(child_.id(), SIGTERM);
    if (auto status = wait_exit(grace)) return *status;
    spdlog::warn("child {} did not exit within {} ms of SIGTERM; sending SIGKILL", child_.id(),
                 grace.count());
    ::kill(child_.id(), SIGKILL);
    if (auto status = wait_exit(std::chrono::seconds(30))) return *status;
    spdlog::error("child {} could not be reaped after SIGKILL", child_.id());
    child_.detach();
    reaped_ = true;
    return status_ = 128 + SIGKILL;
  }

 private:
  bp::child child_;
  UniqueFd to_child_;
  UniqueFd from_child_;
  LineBuffer lines_{kMaxLine};
  bool eof_ = false;
  bool reaped_ = false;
  int status_ = -1;
};

// Runs in the child between fork and exec: a child starts with no blocked signals and
// default SIGPIPE/SIGTERM handling, whatever its parent set up for itself (signal masks
// and ignored signals survive exec).
struct ResetSignals : bp::extend::handler {
  template <class Executor>
  void on_exec_setup(Executor&) const {
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
  }
};

std::pair<UniqueFd, UniqueFd> cloexec_pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw std::runtime_error(fmt::format("pipe2 failed: {}", std::strerror(errno)));
  }
  return {UniqueFd(fds[0]), UniqueFd(fds[1])};
}

class BoostLauncher final : public Launcher {
 public:
  BoostLauncher() { std::signal(SIGPIPE, SIG_IGN); }

  std::unique_ptr<ChildProcess> launch(const LaunchSpec& spec) override {
    auto [in_read, in_write] = cloexec_pipe();
    auto [out_read, out_write] = cloexec_pipe();
    // The child's ends are handed to Boost.Process, which dup2()s them onto 0 and 1 in the
    // child (dup2 clears close-on-exec there) and closes them in the parent once started.
    bp::pipe child_stdin(in_read.release(), -1);
    bp::pipe child_stdout(-1, out_write.release());
    // A copy: this_process::environment() itself is the live environment of this process.
    bp::environment env = boost::this_process::environment();
    if (spec.inherit_env) {
      std::vector<std::string> dropped;
      for (const auto& entry : env) {
        if (!env_name_matches(entry.get_name(), *spec.inherit_env))
          dropped.push_back(entry.get_name());
      }
      for (const auto& name : dropped) env.erase(name);
    }
    // set(), not env[key] = value: Boost.Process 1.74's find() compares each variable with
    // `key=` over the length of `key=`, reading past the end of a shorter variable (ASan
    // and TSan report it; the monitor hands TIMEWARP_DATABASE to the scheduler this way).
    for (const auto& [key, value] : spec.env) env.set(key, value);
    try {
      bp::child child =
          spec.stderr_to_stdout
              ? bp::child(bp::exe = spec.executable, bp::args = spec.args,
                          bp::std_in<child_stdin, (bp::std_out & bp::std_err)> child_stdout, env,
                          ResetSignals{})
              : bp::child(bp::exe = spec.executable, bp::args = spec.args,
                          bp::std_in<child_stdin, bp::std_out> child_stdout, env, ResetSignals{});
      return std::make_unique<BoostChild>(std::move(child), std::move(in_write),
                                          std::move(out_read));
    } catch (const std::exception& e) {
      throw std::runtime_error(fmt::format("cannot start {}: {}", spec.executable, e.what()));
    }
  }
};

}  // namespace

std::shared_ptr<Launcher> make_process_launcher() { return std::make_shared<BoostLauncher>(); }

std::optional<int> drain_lines(ChildProcess& child,
                               const std::function<void(std::optional<std::string>)>& on_line) {
  while (true) {
    std::string line;
    switch (child.read_line(line, std::chrono::milliseconds(0))) {
      case ChildProcess::ReadStatus::Timeout:
        return std::nullopt;
      case ChildProcess::ReadStatus::Eof: {
        // A child that closed its stdout is exiting: it gets a moment before SIGTERM.
        const auto exited = child.wait_exit(std::chrono::seconds(5));
        return exited ? *exited : child.terminate(std::chrono::seconds(1));
      }
      case ChildProcess::ReadStatus::Overlong:
        on_line(std::nullopt);
        break;
      case ChildProcess::ReadStatus::Line:
        on_line(std::move(line));
        break;
    }
  }
}

bool env_name_matches(std::string_view name, const std::vector<std::string>& patterns) {
  return std::any_of(patterns.begin(), patterns.end(), [name](std::string_view pattern) {
    if (!pattern.empty() && pattern.back() == '*') {
      return name.substr(0, pattern.size() - 1) == pattern.substr(0, pattern.size() - 1);
    }
    return name == pattern;
  });
}

std::string sibling_executable(const std::string& name) {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto candidate = self.parent_path() / name;
    // With the effective ids and capabilities, as execve will use them: plain access()
    // checks the real ones and ignores a service's CAP_DAC_READ_SEARCH.
    if (::faccessat(AT_FDCWD, candidate.c_str(), X_OK, AT_EACCESS) == 0) return candidate.string();
  }
  return name;
}

int exit_status_code(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return wait_status;
}

}  // namespace tw
