#include "support/test_support.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "common/process.hpp"
#include "db/migrations.hpp"

namespace tw::test {
namespace {

std::string unique_suffix() {
  static std::atomic<int> counter{0};
  std::random_device rd;
  return fmt::format("{}_{}_{:x}", ::getpid(), counter++, rd() & 0xFFFFFF);
}

}  // namespace

bool TestDatabase::available() {
  const char* c = std::getenv("TIMEWARP_TEST_DATABASE");
  return c != nullptr && *c != '\0';
}

TestDatabase::TestDatabase() {
  if (!available()) throw std::runtime_error("TIMEWARP_TEST_DATABASE is not set");
  admin_conninfo_ = std::getenv("TIMEWARP_TEST_DATABASE");
  name_ = "tw_test_" + unique_suffix();
  db::Connection admin(admin_conninfo_);
  admin.exec("CREATE DATABASE " + name_);
  conninfo_ = admin_conninfo_ + " dbname=" + name_;
  db::Connection conn(conninfo_);
  db::migrate(conn);
}

TestDatabase::~TestDatabase() {
  try {
    db::Connection admin(admin_conninfo_);
    admin.exec("DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)");
  } catch (const std::exception&) {
  }
}

std::string TestDatabase::scalar(const std::string& sql) const {
  db::Connection conn(conninfo_);
  auto r = conn.exec(sql);
  if (r.rows() == 0 || r.is_null(0, 0)) return "";
  return std::string(r.text(0, 0));
}

TempDir::TempDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "tw-test-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

bool wait_until(const std::function<bool()>& condition, std::chrono::milliseconds timeout,
                std::chrono::milliseconds every) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (condition()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(every);
  }
}

namespace {
// TIMEWARP_TEST_<NAME>_EXE overrides a built path: the ThreadSanitizer stage of
// scripts/test runs these tests against its instrumented scheduler and monitor.
std::string exe(const char* env, const char* built) {
  const char* override_path = std::getenv(env);
  return override_path && *override_path ? override_path : built;
}
}  // namespace

std::string monitor_exe() { return exe("TIMEWARP_TEST_MONITOR_EXE", TW_MONITOR_EXE); }
std::string scheduler_exe() { return exe("TIMEWARP_TEST_SCHEDULER_EXE", TW_SCHEDULER_EXE); }
std::string archiver_exe() { return exe("TIMEWARP_TEST_ARCHIVER_EXE", TW_ARCHIVER_EXE); }
std::string cli_exe() { return exe("TIMEWARP_TEST_CLI_EXE", TW_CLI_EXE); }
std::string fake_archiver_exe() {
  return exe("TIMEWARP_TEST_FAKE_ARCHIVER_EXE", TW_FAKE_ARCHIVER_EXE);
}
std::string hooked_scheduler_exe() {
  return exe("TIMEWARP_TEST_HOOKED_SCHEDULER_EXE", TW_HOOKED_SCHEDULER_EXE);
}

void write_file(const std::filesystem::path& path, const std::string& content) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string noise(std::size_t size, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string out(size, '\0');
  for (auto& c : out) c = static_cast<char>(rng());
  return out;
}

int run_command(const std::vector<std::string>& argv, std::string* output,
                const std::vector<std::pair<std::string, std::string>>& env) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(pipe_fds[1], STDOUT_FILENO);
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(pipe_fds[1]);
  std::string out;
  char buffer[65536];
  ssize_t n;
  while ((n = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0)
    out.append(buffer, static_cast<std::size_t>(n));
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (output) *output = std::move(out);
  return exit_status_code(status);
}

}  // namespace tw::test
