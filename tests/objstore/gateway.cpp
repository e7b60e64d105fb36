#include "objstore/gateway.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>
#include <vector>

#include <fmt/format.h>

namespace tw::objstore {

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

bool store_configured() { return !env("TW_S3_ENDPOINT").empty(); }

BucketConfig gateway(const std::string& bucket) {
  BucketConfig config;
  config.endpoint = env("TW_S3_ENDPOINT");
  config.bucket = bucket;
  if (!env("TW_S3_REGION").empty()) config.region = env("TW_S3_REGION");
  config.access_key = env("TW_S3_ACCESS_KEY");
  config.secret_key = env("TW_S3_SECRET_KEY");
  return config;
}

Bucket fresh_bucket() {
  static std::atomic<int> counter{0};
  const std::string name = fmt::format("tw-test-{}-{}", ::getpid(), ++counter);
  auto bucket = Bucket::open(gateway(name));
  EXPECT_TRUE(bucket) << (bucket ? "" : bucket.error());
  auto made = bucket->create();
  EXPECT_TRUE(made) << (made ? "" : made.failure().message);
  return std::move(bucket.value());
}

std::map<std::string, std::string> local_packs(const std::string& root) {
  std::map<std::string, std::string> out;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root + "/packs")) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    out[entry.path().stem().string()] =
        std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  return out;
}

std::map<std::string, std::string> bucket_packs(Bucket& bucket, const std::string& prefix) {
  std::map<std::string, std::string> out;
  const std::string under = prefix + "/packs/";
  auto listed = bucket.list(under);
  if (!listed) return out;
  for (const auto& object : *listed) {
    auto bytes = bucket.get(object.key);
    if (bytes) out[object.key.substr(under.size())] = *bytes;
  }
  return out;
}

namespace {

// The NUL-separated strings of /proc/PID/<what>.
std::vector<std::string> proc_strings(const std::string& pid, const char* what) {
  std::ifstream in("/proc/" + pid + "/" + what, std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> out;
  for (std::size_t at = 0; at < all.size();) {
    const std::size_t end = all.find('\0', at);
    out.push_back(all.substr(at, end - at));
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return out;
}

struct GatewayProcess {
  pid_t pid = 0;
  std::vector<std::string> args;
  std::vector<std::string> environment;
  std::string cwd;
};

std::optional<GatewayProcess> find_gateway() {
  std::string endpoint = env("TW_S3_ENDPOINT");
  if (const auto at = endpoint.find("://"); at != std::string::npos) endpoint.erase(0, at + 3);
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string pid = entry.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    auto args = proc_strings(pid, "cmdline");
    if (args.empty() || std::filesystem::path(args[0]).filename() != "radosgw") continue;
    bool ours = false;
    for (const auto& arg : args)
      ours = ours || arg.find("endpoint=" + endpoint) != std::string::npos;
    if (!ours) continue;
    std::error_code ec;
    const auto cwd = std::filesystem::read_symlink(entry.path() / "cwd", ec);
    return GatewayProcess{static_cast<pid_t>(std::stol(pid)), std::move(args),
                          proc_strings(pid, "environ"), ec ? "/" : cwd.string()};
  }
  return std::nullopt;
}

bool gone_within(pid_t pid, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// Starts `gateway` again, a grandchild in a session of its own (nobody's zombie here).
void respawn(const GatewayProcess& gateway) {
  std::vector<char*> argv;
  std::vector<char*> envp;
  for (const auto& arg : gateway.args) argv.push_back(const_cast<char*>(arg.c_str()));
  for (const auto& var : gateway.environment) envp.push_back(const_cast<char*>(var.c_str()));
  argv.push_back(nullptr);
  envp.push_back(nullptr);
  const pid_t child = ::fork();
  if (child == 0) {
    ::setsid();
    if (::fork() != 0) ::_exit(0);
    const int null = ::open("/dev/null", O_RDWR);
    for (int fd = 0; fd < 3; ++fd) ::dup2(null, fd);
    if (::chdir(gateway.cwd.c_str()) != 0) ::_exit(127);
    ::execvpe(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  if (child > 0) ::waitpid(child, nullptr, 0);
}

}  // namespace

std::string restart_gateway(std::chrono::milliseconds down) {
  const auto process = find_gateway();
  if (!process) return "no radosgw serves " + env("TW_S3_ENDPOINT");
  ::kill(process->pid, SIGTERM);
  if (!gone_within(process->pid, std::chrono::seconds(10))) {
    ::kill(process->pid, SIGKILL);
    if (!gone_within(process->pid, std::chrono::seconds(5))) return "radosgw did not stop";
  }
  std::this_thread::sleep_for(down);  // the outage itself
  respawn(*process);
  auto probe = Bucket::open(gateway("tw-probe"));
  if (!probe) return probe.error();
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < until) {
    auto listed = probe->list("");
    if (listed || listed.failure().kind != Failure::Retry) return "";
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return "the gateway did not answer within 30 s of its start";
}

}  // namespace tw::objstore
