#include "archiver/signals.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <stdexcept>

namespace tw::archiver {
namespace {

std::atomic<bool> g_stop{false};
static_assert(std::atomic<bool>::is_always_lock_free);  // set in a signal handler
// Self-pipe: the handler writes a byte to it.
int g_wake_pipe[2] = {-1, -1};

void on_signal(int) {
  const int saved = errno;
  g_stop.store(true);
  [[maybe_unused]] const ssize_t n = ::write(g_wake_pipe[1], "x", 1);
  errno = saved;
}

}  // namespace

void install_signal_handlers() {
  if (::pipe2(g_wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0) throw std::runtime_error("pipe2 failed");
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;  // no SA_RESTART: a blocking read returns EINTR so we can stop
  sigaction(SIGTERM, &action, nullptr);
  // A Ctrl-C in the terminal reaches every process of the foreground group, archivers
  // included; they must keep working until the scheduler's orderly STOP ends them (it lets
  // each archiver finish its item, then closes its stdin), so SIGINT is ignored here as in
  // the scheduler. SIGTERM and EOF still stop the archiver.
  signal(SIGINT, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);
}

bool stop_requested() { return g_stop.load(); }

int stop_wake_fd() { return g_wake_pipe[0]; }

}  // namespace tw::archiver
