#include "cli/queue_commands.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "cli/status_commands.hpp"
#include "common/escape.hpp"
#include "common/filters.hpp"
#include "common/paths.hpp"
#include "common/time.hpp"
#include "db/connection.hpp"
#include "db/migrations.hpp"
#include "db/queue.hpp"

namespace tw::cli {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kEnqueueChunk = 10000;

struct EnqueueOptions {
  std::vector<std::string> paths;
  std::string op = "UPDATE";
  int priority = 0;
};

int run_migrate(const Config& config) {
  db::Connection conn(config.database);
  const auto applied = db::migrate(conn);
  for (const auto& name : applied) std::cout << "applied " << name << "\n";
  std::cout << "schema version " << db::schema_version(conn) << " (" << conn.describe() << ")\n";
  return 0;
}

// PATH as the archive knows it: its folder with links resolved, as the monitor resolves
// its source folders (the archiver takes a link among a path's ancestors to mean that the
// path is not in the tree, so a path spelled through a link would be tombstoned, not
// archived); the last component as given, since a link there is archived as a link.
fs::path archive_spelling(const std::string& given) {
  const fs::path absolute = absolute_path(given);
  if (!absolute.has_relative_path()) return absolute;
  return fs::path(resolve_source_dir(absolute.parent_path().native())) / absolute.filename();
}

int run_enqueue(const Config& config, const EnqueueOptions& options) {
  const Op op = parse_op(options.op).value_or(Op::Update);
  std::vector<fs::path> roots;
  for (const auto& dir : config.source_dirs) roots.push_back(resolve_source_dir(dir));

  db::Connection conn(config.database);
  db::Queue queue(conn, host_id(config));
  std::vector<db::NewItem> batch;
  std::size_t total = 0;
  int missing = 0;
  const auto flush = [&] {
    if (batch.empty()) return;
    total += queue.enqueue(batch).size();
    batch.clear();
  };
  const auto add = [&](const fs::path& path, const struct stat* st) {
    db::NewItem item;
    item.op = op;
    item.path = escape_bytes(path.native());
    item.source_root = escape_bytes(source_root_of(path, roots).native());
    item.priority = options.priority;
    if (st) {
      item.size = static_cast<std::int64_t>(st->st_size);
      item.mtime = timespec_seconds(st->st_mtim);
    }
    batch.push_back(std::move(item));
    if (batch.size() >= kEnqueueChunk) flush();
  };

  for (const auto& given : options.paths) {
    const fs::path path = archive_spelling(given);
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) {
      if (op == Op::Delete) {
        add(path, nullptr);
        continue;
      }
      std::cerr << "timewarp: cannot enqueue " << shown_path(path.native()) << ": "
                << std::strerror(errno) << "; nothing enqueued for it\n";
      ++missing;
      continue;
    }
    if (!S_ISDIR(st.st_mode) || op != Op::Update) {
      add(path, &st);
      continue;
    }
    // A directory: every entry below it, links not followed.
    std::error_code ec;
    for (fs::recursive_directory_iterator it(path, fs::directory_options::skip_permission_denied, ec), end;
         !ec && it != end; it.increment(ec)) {
      struct stat entry {};
      if (::lstat(it->path().c_str(), &entry) != 0 || S_ISDIR(entry.st_mode)) continue;
      add(it->path(), &entry);
    }
    if (ec) {
      std::cerr << "timewarp: while listing " << shown_path(path.native()) << ": " << ec.message()
                << "\n";
      ++missing;
    }
  }
  flush();
  std::cout << "enqueued " << total << " item" << (total == 1 ? "" : "s") << "\n";
  return missing == 0 ? 0 : 1;
}

}  // namespace

void add_queue_commands(CLI::App& app, Config& config, std::function<int()>& run) {
  auto* migrate = app.add_subcommand("migrate", "create or upgrade the database schema");
  migrate->callback([&] { run = [&] { return run_migrate(config); }; });

  auto options = std::make_shared<EnqueueOptions>();
  auto* enqueue = app.add_subcommand("enqueue", "queue paths for archiving (a directory: every file below it)");
  enqueue->add_option("paths", options->paths, "files or directories")->required();
  enqueue
      ->add_option("--op", options->op,
                   "UPDATE, STAT, DELETE, or SCAN (a directory and its entries, one item)")
      ->check(CLI::IsMember({"UPDATE", "STAT", "DELETE", "SCAN"}))
      ->capture_default_str();
  enqueue->add_option("--priority", options->priority, "higher runs first under the priority strategy")
      ->transform(number_in<int>())
      ->capture_default_str();
  enqueue->callback([&, options] { run = [&, options] { return run_enqueue(config, *options); }; });

  add_status_commands(app, config, run);
}

}  // namespace tw::cli
