#include "archiver/program.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>

#include "archive/disk.hpp"
#include "archive/store.hpp"
#include "archiver/group_commit.hpp"
#include "archiver/line_reader.hpp"
#include "archiver/request_handler.hpp"
#include "archiver/signals.hpp"
#include "common/config.hpp"
#include "common/logging.hpp"

namespace tw::archiver {
namespace {

// Writes `responses` to stdout, one line each, in one write; false when stdout is gone.
bool write_responses(const std::vector<Response>& responses) {
  std::string out;
  for (const auto& response : responses) {
    out += format_response(response);
    out += '\n';
  }
  if (archive::write_all(STDOUT_FILENO, out.data(), out.size()) == 0) return true;
  spdlog::error("cannot write the response: {}", std::strerror(errno));
  return false;
}

// The answer to a line longer than LineReader::kMaxLine, of which only the start was kept:
// its id, and nothing of it run (its path, cut short, could name another file or a whole
// directory).
Response refuse_overlong(const std::string& start) {
  Response response;
  response.id = request_id_of(start);
  response.outcome = Outcome::FailedPermanent;
  response.message = "malformed request: line longer than 1 MiB";
  spdlog::warn("request {} refused: line longer than 1 MiB", response.id);
  return response;
}

// Opens the archive for writing into `store`: -1, or the exit code when it cannot.
int open_store(const Config& config, ArchiverHooks hooks, std::optional<archive::Store>& store) {
  if (config.backup_root.empty()) {
    spdlog::error("backup_root is required (set --backup-root, BACKUP_ROOT or the config key)");
    return 2;
  }
  archive::StoreHooks store_hooks;
  store_hooks.before_write_step = std::move(hooks.before_write_step);
  store_hooks.now = std::move(hooks.now);
  store_hooks.cancelled = stop_requested;
  archive::CompressionOptions compression;
  compression.level = config.compression_level;
  compression.threads = config.compression_threads;
  auto opened = archive::Store::open(config.backup_root, archive::Store::Mode::ReadWrite,
                                     std::move(store_hooks), compression);
  if (!opened) {
    spdlog::error("{}", opened.error());
    return 1;
  }
  store.emplace(std::move(opened.value()));
  return -1;
}

// What a SCAN leaves alone among a directory's entries, into `filter`: what the monitor
// would not queue. An archiver given no source directories (run by hand) leaves nothing
// alone. -1, or the exit code when the configuration is refused.
int make_filter(const Config& config, std::optional<Filter>& filter) {
  if (config.source_dirs.empty()) return -1;
  try {
    filter.emplace(Filter::from_config(config));
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 2;
  }
  return -1;
}

// What the request loop waits for beside stdin: a stop, and with an archive, its group
// signal and its quiet (a quiet archive's catalog is one file: its journal is folded in a
// second after the last request, FORMAT.md "Format 2").
LineReader::Events reader_events(archive::Store* store, GroupCommit& answers) {
  LineReader::Events events;
  events.stopped = stop_requested;
  events.stop_fd = stop_wake_fd();
  if (store == nullptr) return events;
  events.on_quiet = [store]() {
    auto folded = store->fold_journal();
    if (!folded) spdlog::warn("{}", folded.error());
    return !folded || *folded;
  };
  events.group_fd = [store]() { return store->group_fd(); };
  events.on_group = [&answers]() { answers.on_store_signal(); };
  return events;
}

// Answers the requests on stdin until its end or a stop; returns the exit code.
int serve(archive::Store* store, const Filter* filter) {
  archive::RequestHandler handler(store, filter);
  std::optional<StoreGroups> groups;
  if (store != nullptr) groups.emplace(*store);
  GroupCommit answers(groups ? &*groups : nullptr, write_responses);
  LineReader reader(STDIN_FILENO, reader_events(store, answers));
  std::string line;
  while (true) {
    const auto status = reader.next(line);
    if (status == LineReader::Status::Eof) return answers.finish() ? 0 : 1;
    if (status == LineReader::Status::Stopped) break;
    if (status == LineReader::Status::Error) {
      spdlog::error("cannot read stdin: {}", std::strerror(errno));
      return 1;
    }
    answers.add(status == LineReader::Status::Overlong ? refuse_overlong(line)
                                                       : handler.handle_line(line));
    if (!answers.after_request(reader.ready(), stop_requested())) return 1;
    if (stop_requested()) break;
  }
  spdlog::info("stopping on a signal");
  return answers.finish() ? 0 : 1;
}

int run(int argc, char** argv, ArchiverHooks hooks) {
  CLI::App app{"timewarp-archiver: archives the items named on stdin, one response line each"};
  app.name("timewarp-archiver");
  Config config;
  bool null_mode = false;
  add_config_options(app, config);
  app.add_flag("--null", null_mode, "answer every request COMPLETE 0 0 without touching files")
      ->configurable(false);
  if (const int code = parse_command_line(app, argc, argv); code >= 0) return code;
  if (const int code = setup_logging("timewarp-archiver", config); code >= 0) return code;
  install_signal_handlers();
  std::optional<archive::Store> store;
  if (!null_mode) {
    if (const int code = open_store(config, std::move(hooks), store); code >= 0) return code;
  }
  spdlog::debug("ready ({})", null_mode ? "null mode" : config.backup_root);
  std::optional<Filter> filter;
  if (const int code = make_filter(config, filter); code >= 0) return code;
  return serve(store ? &*store : nullptr, filter ? &*filter : nullptr);
}

}  // namespace

int program_main(int argc, char** argv, ArchiverHooks hooks) {
  try {
    return run(argc, argv, std::move(hooks));
  } catch (const std::exception& e) {
    std::cerr << "timewarp-archiver: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace tw::archiver
