// timewarp-fault-archiver: a proxy in front of the REAL timewarp-archiver that makes some
// items fail with FAILED RETRY, for tests that need the scheduler's retries to happen at
// random moments (tests/integration/convergence_*). The scheduler starts it in place of the
// archiver (`--archiver-exe`); it starts the real archiver as its child with every argument
// it was given except its own (`--fault-*`), forwards each request line and the answer, and
// by a seeded plan answers `<id> FAILED RETRY injected: ...` for chosen items: either
// without forwarding the request (the archiver never saw it) or after the archiver did the
// work (its answer is dropped), as both happen in real life.
//
// Its own arguments:
//   --fault-real=PATH        the real archiver (required)
//   --fault-seed=N           the plan's seed (default 1)
//   --fault-retry-permille=N share of items chosen, per thousand (default 0: pass through)
//   --fault-state=DIR        one marker file per failed item, so an item fails only on its
//                            first attempt whatever proxy gets it (without: no failures)
//   --fault-log=FILE         appends one line per injected failure (time, pid, id, mode)
//   --fault-retry-match=OP:TEXT  also fails, once and before forwarding, every item whose
//                            op is OP and whose (escaped) path contains TEXT: a chosen
//                            item retried after newer changes, for tests of one sequence
//   --fault-delay-ms=N       waits N ms before forwarding each request: a slow archiver, so
//                            that a test can act in the middle of a drain on any machine
//
// The real archiver never outlives the proxy: it gets SIGKILL when the proxy dies
// (PR_SET_PDEATHSIG); SIGTERM is passed on and the proxy exits once the archiver has
// answered and exited; EOF on stdin closes the archiver's stdin and waits for it. If the
// archiver dies, the proxy exits without answering (the scheduler sees a crash). One thread.
#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/protocol.hpp"

namespace {

volatile sig_atomic_t g_terminate = 0;
volatile pid_t g_child = 0;
// SIGTERM stays blocked except while a read waits in ppoll, so it is never missed between
// the check of g_terminate and the wait.
sigset_t g_wait_mask;

void on_sigterm(int) {
  g_terminate = 1;
  if (g_child > 0) ::kill(g_child, SIGTERM);
}

struct Settings {
  std::string real;
  std::uint64_t seed = 1;
  int retry_permille = 0;
  std::string state_dir;
  std::string log_file;
  std::string match_op;    // --fault-retry-match: the op...
  std::string match_text;  // ...and a part of the path
  int delay_ms = 0;
  std::vector<std::string> forwarded;  // everything that is not ours
};

std::optional<std::string> value_of(std::string_view arg, std::string_view flag) {
  if (arg.size() > flag.size() && arg.substr(0, flag.size()) == flag && arg[flag.size()] == '=') {
    return std::string(arg.substr(flag.size() + 1));
  }
  return std::nullopt;
}

Settings parse(int argc, char** argv) {
  Settings s;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (auto real = value_of(arg, "--fault-real")) {
      s.real = *real;
    } else if (auto seed = value_of(arg, "--fault-seed")) {
      s.seed = std::strtoull(seed->c_str(), nullptr, 10);
    } else if (auto permille = value_of(arg, "--fault-retry-permille")) {
      s.retry_permille = std::atoi(permille->c_str());
    } else if (auto state = value_of(arg, "--fault-state")) {
      s.state_dir = *state;
    } else if (auto log = value_of(arg, "--fault-log")) {
      s.log_file = *log;
    } else if (auto delay = value_of(arg, "--fault-delay-ms")) {
      s.delay_ms = std::atoi(delay->c_str());
    } else if (auto match = value_of(arg, "--fault-retry-match")) {
      const auto colon = match->find(':');
      s.match_op = match->substr(0, colon);
      if (colon != std::string::npos) s.match_text = match->substr(colon + 1);
    } else {
      s.forwarded.emplace_back(arg);
    }
  }
  return s;
}

// splitmix64: the plan is a pure function of (seed, item id, salt).
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

enum class Plan { Forward, FailBefore, FailAfter };

// True when the request is one --fault-retry-match names.
bool matches(const Settings& s, const std::string& request) {
  if (s.match_op.empty()) return false;
  const auto parsed = tw::parse_request(request);
  const auto* r = std::get_if<tw::Request>(&parsed);
  return r != nullptr && tw::to_string(r->op) == s.match_op &&
         r->path.find(s.match_text) != std::string::npos;
}

Plan plan_for(const Settings& s, std::int64_t id, const std::string& request) {
  if (s.state_dir.empty() || id <= 0) return Plan::Forward;
  const bool matched = matches(s, request);
  const std::uint64_t h = mix(s.seed ^ mix(static_cast<std::uint64_t>(id)));
  if (!matched && static_cast<int>(h % 1000) >= s.retry_permille) return Plan::Forward;
  // Only the first attempt fails: the marker is created once, by whichever proxy gets it.
  const std::string marker = s.state_dir + "/" + std::to_string(id);
  const int fd = ::open(marker.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return Plan::Forward;
  ::close(fd);
  if (matched) return Plan::FailBefore;
  return (mix(h) & 1) ? Plan::FailAfter : Plan::FailBefore;
}

void log_injection(const Settings& s, std::int64_t id, const char* mode) {
  if (s.log_file.empty()) return;
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const long long ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now).count();
  char line[256];
  const int n = std::snprintf(line, sizeof line, "%lld\tproxy %d\titem %lld: FAILED RETRY %s\n", ns,
                              static_cast<int>(::getpid()), static_cast<long long>(id), mode);
  const int fd = ::open(s.log_file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  [[maybe_unused]] const ssize_t w = ::write(fd, line, static_cast<std::size_t>(n));
  ::close(fd);
}

// Reads lines from one descriptor; a SIGTERM while it waits is handed back as Interrupted.
class LineReader {
 public:
  explicit LineReader(int fd) : fd_(fd) {}
  enum class Status { Line, Eof, Interrupted };
  Status next(std::string& line) {
    while (true) {
      const auto nl = buffer_.find('\n');
      if (nl != std::string::npos) {
        line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return Status::Line;
      }
      pollfd p{fd_, POLLIN, 0};
      if (::ppoll(&p, 1, nullptr, &g_wait_mask) < 0) {
        if (errno == EINTR) return Status::Interrupted;
        return Status::Eof;
      }
      char chunk[65536];
      const ssize_t n = ::read(fd_, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return Status::Eof;
      buffer_.append(chunk, static_cast<std::size_t>(n));
    }
  }

 private:
  int fd_;
  std::string buffer_;
};

bool write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    text.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

bool write_line(int fd, const std::string& line) { return write_all(fd, line + "\n"); }

// Starts the real archiver with pipes for its stdin and stdout; stderr is shared.
pid_t start_real(const Settings& s, int& to_child, int& from_child) {
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) return -1;
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);
    ::dup2(in[0], STDIN_FILENO);
    ::dup2(out[1], STDOUT_FILENO);
    std::signal(SIGPIPE, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    std::vector<char*> args{const_cast<char*>(s.real.c_str())};
    for (const auto& a : s.forwarded) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(s.real.c_str(), args.data());
    std::fprintf(stderr, "timewarp-fault-archiver: cannot run %s: %s\n", s.real.c_str(),
                 std::strerror(errno));
    ::_exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  to_child = in[1];
  from_child = out[0];
  return pid;
}

int reap(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

std::int64_t id_of(const std::string& line) {
  std::int64_t id = 0;
  std::size_t i = 0;
  for (; i < line.size() && line[i] >= '0' && line[i] <= '9' && i < 18; ++i)
    id = id * 10 + (line[i] - '0');
  return (i > 0 && i < line.size() && line[i] == '\t') ? id : 0;
}

// After SIGTERM: passes on whatever the archiver still answers, then waits for it.
int finish_after_sigterm(LineReader& from_archiver, pid_t child) {
  std::string answer;
  while (true) {
    const auto status = from_archiver.next(answer);
    if (status == LineReader::Status::Eof) break;
    if (status == LineReader::Status::Line) write_line(STDOUT_FILENO, answer);
  }
  return reap(child);
}

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGINT, SIG_IGN);
  std::signal(SIGPIPE, SIG_IGN);
  const Settings settings = parse(argc, argv);
  if (settings.real.empty()) {
    std::fprintf(stderr, "timewarp-fault-archiver: --fault-real=PATH is required\n");
    return 2;
  }
  struct sigaction sa {};
  sa.sa_handler = on_sigterm;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, nullptr);
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  ::sigprocmask(SIG_BLOCK, &term, &g_wait_mask);
  sigdelset(&g_wait_mask, SIGTERM);

  int to_archiver = -1, from_archiver_fd = -1;
  const pid_t child = start_real(settings, to_archiver, from_archiver_fd);
  if (child < 0) {
    std::perror("timewarp-fault-archiver: cannot start the archiver");
    return 1;
  }
  g_child = child;
  LineReader from_scheduler(STDIN_FILENO);
  LineReader from_archiver(from_archiver_fd);

  std::string request, answer;
  while (true) {
    if (g_terminate) return finish_after_sigterm(from_archiver, child);
    const auto got = from_scheduler.next(request);
    if (got == LineReader::Status::Interrupted) continue;
    if (got == LineReader::Status::Eof) break;
    const std::int64_t id = id_of(request);
    const Plan plan = plan_for(settings, id, request);
    if (plan == Plan::FailBefore) {
      log_injection(settings, id, "before forwarding");
      const tw::Response r{id, tw::Outcome::FailedRetry, 0, 0, "injected: not forwarded"};
      if (!write_line(STDOUT_FILENO, tw::format_response(r))) break;
      continue;
    }
    if (settings.delay_ms > 0) ::usleep(static_cast<useconds_t>(settings.delay_ms) * 1000);
    if (!write_line(to_archiver, request)) {
      // The archiver is gone: die without answering, as it did.
      ::close(to_archiver);
      reap(child);
      return 1;
    }
    LineReader::Status status;
    while ((status = from_archiver.next(answer)) == LineReader::Status::Interrupted) {
    }
    if (status == LineReader::Status::Eof) {
      ::close(to_archiver);
      const int code = reap(child);
      return code == 0 ? 1 : code;
    }
    if (plan == Plan::FailAfter) {
      log_injection(settings, id, "after the archiver's answer");
      const tw::Response r{id, tw::Outcome::FailedRetry, 0, 0,
                           "injected: archiver answered " + answer};
      answer = tw::format_response(r);
    }
    if (!write_line(STDOUT_FILENO, answer)) break;
    if (g_terminate) return finish_after_sigterm(from_archiver, child);
  }
  ::close(to_archiver);
  return reap(child);
}
