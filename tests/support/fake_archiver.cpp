// A fault-injecting archiver for scheduler tests. It speaks the real line protocol and
// acts on words in the request's path: "crash" exits without answering, "hang" never
// answers, "garbage" answers a malformed line, "retry" answers FAILED RETRY, "permanent"
// FAILED PERMANENT, "vanished" FAILED PERMANENT with a message starting "vanished:" (an
// outcome is never read from a message's text); anything else COMPLETE. Every request it
// finishes is appended to --record FILE, so tests can count how often an item ran.
// With --delay-ms N it spends N ms on each item; --bytes N reports N archive bytes added;
// --record-config FILE appends, at start, the archive settings it was given. A request whose
// path holds "held" is answered only once the next request has arrived (or after 2 s), as
// the real archiver holds answers until their group is durable; --record-held FILE gets
// one line per such request: 1 when the next came while it was held, 0 when none did.
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <iostream>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <CLI/CLI.hpp>

#include "common/config.hpp"
#include "common/protocol.hpp"

int main(int argc, char** argv) {
  std::signal(SIGINT, SIG_IGN);
  tw::Config config;
  std::string record;
  int delay_ms = 0;
  std::uint64_t bytes = 0;
  CLI::App app{"fake archiver"};
  tw::add_config_options(app, config);
  app.add_option("--record", record);
  app.add_option("--delay-ms", delay_ms);
  app.add_option("--bytes", bytes, "archive bytes reported for each completed item");
  std::string record_config;
  app.add_option("--record-config", record_config);
  std::string record_held;
  app.add_option("--record-held", record_held);
  app.add_flag("--null");
  if (const int code = tw::parse_command_line(app, argc, argv); code >= 0) return code;
  if (!record_config.empty()) {
    if (std::FILE* out = std::fopen(record_config.c_str(), "a")) {
      std::fprintf(out, "backup_root=%s compression_level=%d compression_threads=%d\n",
                   config.backup_root.c_str(), config.compression_level,
                   config.compression_threads);
      std::fclose(out);
    }
  }

  std::FILE* log = record.empty() ? nullptr : std::fopen(record.c_str(), "a");
  std::FILE* held_log = record_held.empty() ? nullptr : std::fopen(record_held.c_str(), "a");
  // Lines are read on a thread of their own, so that a held request can wait for the next.
  std::mutex mutex;
  std::condition_variable arrived;
  std::deque<std::string> lines;
  bool eof = false;
  std::thread([&] {
    std::string read;
    while (std::getline(std::cin, read)) {
      const std::lock_guard lock(mutex);
      lines.push_back(std::move(read));
      arrived.notify_all();
    }
    const std::lock_guard lock(mutex);
    eof = true;
    arrived.notify_all();
  }).detach();
  const auto next_line = [&]() -> std::optional<std::string> {
    std::unique_lock lock(mutex);
    arrived.wait(lock, [&] { return !lines.empty() || eof; });
    if (lines.empty()) return std::nullopt;
    std::string out = std::move(lines.front());
    lines.pop_front();
    return out;
  };
  const auto another_waits = [&](std::chrono::milliseconds wait) {
    std::unique_lock lock(mutex);
    return arrived.wait_for(lock, wait, [&] { return !lines.empty() || eof; }) && !lines.empty();
  };
  while (true) {
    auto next = next_line();
    if (!next) break;
    const std::string& line = *next;
    auto parsed = tw::parse_request(line);
    if (auto* error = std::get_if<tw::RequestParseError>(&parsed)) {
      tw::Response r{error->id, tw::Outcome::FailedPermanent, 0, 0, error->message};
      std::cout << tw::format_response(r) << std::endl;
      continue;
    }
    const auto& request = std::get<tw::Request>(parsed);
    const auto has = [&](const char* word) { return request.path.find(word) != std::string::npos; };
    if (delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    if (has("crash")) ::_exit(3);
    if (has("hang")) {
      while (true) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    if (has("held")) {
      const bool followed = another_waits(std::chrono::seconds(2));
      if (held_log != nullptr) {
        std::fprintf(held_log, "%d\n", followed ? 1 : 0);
        std::fflush(held_log);
      }
    }
    if (has("garbage")) {
      std::cout << "this is not a response" << std::endl;
      continue;
    }
    tw::Response r{request.id, tw::Outcome::Complete, bytes, 0, {}};
    if (has("retry")) r = {request.id, tw::Outcome::FailedRetry, 0, 0, "file busy"};
    if (has("permanent")) r = {request.id, tw::Outcome::FailedPermanent, 0, 0, "permission denied"};
    if (has("vanished"))
      r = {request.id, tw::Outcome::FailedPermanent, 0, 0, "vanished: no such file"};
    if (log) {
      std::fprintf(log, "%lld\n", static_cast<long long>(request.id));
      std::fflush(log);
    }
    std::cout << tw::format_response(r) << std::endl;
  }
  std::_Exit(0);  // the reader thread may still be blocked in getline
}
