// Child processes driven over line pipes: the one place that knows the process library
// (Boost.Process). The scheduler talks to archivers and the monitor to the scheduler only
// through this interface, so tests can inject a launcher whose children misbehave.
//
// Guarantees: the child's stdin and stdout are pipes created close-on-exec (a sibling never
// inherits them and delays EOF); its stderr is the parent's stderr (no pipe to drain in
// lockstep); a child starts with no blocked signals and default SIGPIPE/SIGTERM handling; a
// child is always reaped; terminate() is SIGTERM, a bounded wait, then SIGKILL.
// One ChildProcess belongs to one thread at a time. Creating a launcher makes the process
// ignore SIGPIPE, so a write to a dead child returns an error instead of killing us.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/noncopyable.hpp"

namespace tw {

class ChildProcess : NonCopyable {
 public:
  enum class ReadStatus { Line, Timeout, Eof, Overlong };

  virtual ~ChildProcess() = default;

  virtual pid_t pid() const = 0;
  // Writes `line` and a newline. False when the child no longer reads its stdin.
  virtual bool write_line(std::string_view line) = 0;
  // Reads the next line (newline removed) within `timeout`. A line longer than 1 MiB is
  // reported as Overlong and discarded.
  virtual ReadStatus read_line(std::string& line, std::chrono::milliseconds timeout) = 0;
  // True when a complete line is already buffered (read_line will not block).
  virtual bool has_buffered_line() const = 0;
  // The read end of the child's stdout, to poll alongside other descriptors.
  virtual int stdout_fd() const = 0;
  // Closes the child's stdin (it sees EOF).
  virtual void close_stdin() = 0;
  // Waits up to `timeout` for the child to exit by itself. Returns its exit status (the exit
  // code, or 128 + signal number) once it has exited and been reaped.
  virtual std::optional<int> wait_exit(std::chrono::milliseconds timeout) = 0;
  // SIGTERM, up to `grace` to exit, then SIGKILL; always reaps. Returns the exit status.
  virtual int terminate(std::chrono::milliseconds grace) = 0;
};

struct LaunchSpec {
  std::string executable;
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;  // set on top of what is inherited
  // Which of our environment variables the child inherits: none given, all of them; else
  // only those named here (a name ending in '*' stands for every name with that prefix:
  // "LC_*"). A child that needs no credentials gets only what it uses, so a database
  // password in our environment never reaches it.
  std::optional<std::vector<std::string>> inherit_env{};
  // The child's stderr into the same pipe as its stdout (read_line() gets both), for a child
  // whose messages are logged line by line; otherwise it shares ours.
  bool stderr_to_stdout = false;
};

// True when environment variable `name` is one `patterns` (as in LaunchSpec::inherit_env)
// lets through.
bool env_name_matches(std::string_view name, const std::vector<std::string>& patterns);

class Launcher : NonCopyable {
 public:
  virtual ~Launcher() = default;
  // Starts the child. Throws std::runtime_error naming the executable when it cannot start.
  virtual std::unique_ptr<ChildProcess> launch(const LaunchSpec& spec) = 0;
};

// The real launcher. Safe to call from several threads at once.
std::shared_ptr<Launcher> make_process_launcher();

// Reads every line `child` has ready now, without waiting, handing each to `on_line`
// (nullopt for an over-long line, which is discarded); `on_line` must not destroy `child`.
// Returns nullopt once no more is ready. At EOF on the child's stdout, the child is given
// 5 s to exit, then terminated (1 s grace), and its exit status is returned.
std::optional<int> drain_lines(ChildProcess& child,
                               const std::function<void(std::optional<std::string>)>& on_line);

// `name` in the directory of the running executable, if it exists there; else `name`
// itself, to be found on PATH.
std::string sibling_executable(const std::string& name);

// Decodes a wait status into an exit code (or 128 + signal number).
int exit_status_code(int wait_status);

}  // namespace tw
