#include "archiver/store.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <deque>
#include <filesystem>
#include <unordered_set>

#include <fmt/format.h>

#include "archiver/paths.hpp"
#include "archiver/sha256.hpp"
#include "archiver/store_impl.hpp"
#include "archiver/timefmt.hpp"
#include "common/dirs.hpp"
#include "common/escape.hpp"
#include "common/paths.hpp"

namespace tw::archive {
ArchiveResult to_archive_result(const Expected<std::uint64_t>& result) {
  if (result) return ArchiveResult{Outcome::Complete, *result, {}};
  return ArchiveResult{result.fault().outcome, 0, result.fault().message};
}

Store::Impl::Impl(std::string root_dir, Store::Mode open_mode, StoreHooks store_hooks,
                  CompressionOptions compress)
    : root(std::move(root_dir)),
      mode(open_mode),
      hooks(std::move(store_hooks)),
      compression(compress),
      disk(root, hooks.before_write_step, hooks.fail_write_step),
      objects(disk, hooks.cancelled, compress) {}

std::string Store::Impl::key_of(std::string_view path) { return sha256_hex(path); }

std::string Store::Impl::node_base(std::string_view key) const {
  return fmt::format("{}/nodes/{}/{}", root, key.substr(0, 2), key);
}

Result<History> Store::Impl::read_history_file(const std::string& file) {
  std::string text;
  {
    UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (!fd) {
      if (errno == ENOENT) return History{};
      return Error{fmt::format("cannot open history {}: {}", file, std::strerror(errno))};
    }
    char buffer[64 * 1024];
    while (true) {
      const long n = read_some(fd.get(), buffer, sizeof buffer);
      if (n < 0) {
        return Error{
            fmt::format("cannot read history {}: {}", file, std::strerror(static_cast<int>(-n)))};
      }
      if (n == 0) break;
      text.append(buffer, static_cast<std::size_t>(n));
    }
  }
  auto history = parse_history(text);
  if (!history) return Error{fmt::format("damaged history {}: {}", file, history.error())};
  return history;
}

Result<History> Store::Impl::read_history(std::string_view path) const {
  if (format == 2) {
    auto history = catalog_history(path, false);
    if (!history) return Error{history.fault().message};
    return std::move(history.value());
  }
  const std::string file = history_file(path);
  auto history = read_history_file(file);
  if (!history) return history;
  if (history->path.empty()) return History{std::string(path), {}};  // no history yet
  if (history->path != path) {
    return Error{fmt::format("damaged history {}: it is for {}, not {}", file,
                             shown_path(history->path), shown_path(path))};
  }
  return history;
}

std::optional<std::string> Store::Impl::path_of_key(std::string_view key) const {
  const std::string base = node_base(key);
  if (auto named = read_small_file(base + ".path", PATH_MAX * 4); named)
    return std::move(named.value());
  // Only the history's first two lines are needed for its name; verify checks the rest.
  UniqueFd fd(::open((base + ".history").c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return std::nullopt;
  std::string head;
  char buffer[16 * 1024];
  constexpr std::string_view kPathLine = "timewarp-history 1\npath\t";
  while (head.size() < 64 * 1024) {
    const long n = read_some(fd.get(), buffer, sizeof buffer);
    if (n <= 0) break;
    head.append(buffer, static_cast<std::size_t>(n));
    if (head.find('\n', kPathLine.size()) != std::string::npos) break;
  }
  const auto end = head.find('\n', kPathLine.size());
  if (head.compare(0, kPathLine.size(), kPathLine) != 0 || end == std::string::npos) {
    return std::nullopt;
  }
  auto path =
      unescape_bytes(std::string_view(head).substr(kPathLine.size(), end - kPathLine.size()));
  if (!path || path->empty() || (*path)[0] != '/' || key_of(*path) != key) return std::nullopt;
  return path;
}

Expected<History> Store::Impl::load_history(std::string_view path) const {
  if (format == 2) return catalog_history(path, true);
  auto history = read_history(path);
  if (!history) return retry("archive: " + history.error());
  return std::move(history.value());
}

Expected<std::uint64_t> Store::Impl::save_history(const History& history) {
  if (format == 2) return commit_version(history.path, history.versions.back());
  return disk.write_file(history_file(history.path), serialize_history(history));
}

std::string Store::Impl::marker_of(std::string_view path) const {
  return node_of(parent_path(path)) + ".children/" + key_of(path);
}

Expected<std::uint64_t> Store::Impl::ensure_node(std::string_view path, bool leaf) {
  if (format == 2) return std::uint64_t{0};  // the commit of a version adds its nodes
  const std::string base = node_of(path);
  const bool is_root = path == "/";
  const bool named = path_exists(base + ".history") || path_exists(base + ".path");
  const std::string marker = is_root ? std::string() : marker_of(path);
  if ((named || leaf) && (is_root || path_exists(marker))) return std::uint64_t{0};
  std::uint64_t bytes = 0;
  if (!is_root) {
    auto up = ensure_node(parent_path(path), false);
    if (!up) return up.fault();
    bytes += *up;
  }
  const std::string bucket = parent_path(base);
  if (!path_exists(bucket)) {
    if (auto made = disk.make_dir(bucket); !made) return made.fault();
  }
  if (!is_root && !path_exists(marker)) {
    const std::string children = parent_path(marker);
    if (!path_exists(children)) {
      if (auto made = disk.make_dir(children); !made) return made.fault();
    }
    if (auto made = disk.make_marker(marker + std::string(kPendingSuffix)); !made) {
      return made.fault();
    }
  }
  if (!leaf && !named) {
    auto written = disk.write_file(base + ".path", path);
    if (!written) return written.fault();
    bytes += *written;
  }
  if (!leaf) {
    if (auto linked = finish_link(path); !linked) return linked.fault();
  }
  return bytes;
}

Done Store::Impl::finish_link(std::string_view path) {
  if (path == "/" || format == 2) return Ok{};
  const std::string marker = marker_of(path);
  const std::string pending = marker + std::string(kPendingSuffix);
  if (!path_exists(pending)) return Ok{};
  return disk.rename_unsynced(pending, marker);
}

Expected<NodeLock> Store::Impl::lock_node(std::string_view path) {
  if (format == 2) {
    const off_t slot = static_cast<off_t>(std::stoull(lock_rank(path), nullptr, 16));
    const auto failed = [](int err) {
      return err == EINTR ? retry("cancelled")
                          : errno_fault(err, Side::Archive, "locking a path in locks");
    };
    if (!grouping) {
      if (const int err = lock_slot(slot, false); err != 0) return failed(err);
      return NodeLock(slot_fd(slot), slot);
    }
    if (group_slots.count(slot) == 0) {
      // A slot a closed group holds is this process's already.
      if (held_slots.count(slot) == 0) {
        int err = lock_slot(slot, true);
        if (err == EAGAIN) {
          // Never wait while holding the locks of staged versions: make them durable and
          // let their locks go first (FORMAT.md, "Format 2", Locks).
          if (auto flushed = flush_group(); !flushed) return flushed.fault();
          err = lock_slot(slot, false);
        }
        if (err != 0) return failed(err);
      }
      group_slots.insert(slot);
      ++held_slots[slot];
    }
    ++step_slots[slot];
    return NodeLock(&step_slots, slot);
  }
  const std::string base = node_of(path);
  const std::string bucket = parent_path(base);
  if (!path_exists(bucket)) {
    if (auto made = disk.make_dir(bucket); !made) return made.fault();
  }
  const std::string file = base + ".lock";
  while (true) {
    UniqueFd fd(::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644));
    if (!fd) return errno_fault(errno, Side::Archive, fmt::format("opening {}", shown_path(file)));
    while (::flock(fd.get(), LOCK_EX) != 0) {
      if (errno != EINTR)
        return errno_fault(errno, Side::Archive, fmt::format("locking {}", shown_path(file)));
      if (cancelled()) return retry("cancelled");
    }
    // The last holder may have removed the file (drop_if_unused) while we waited: then
    // the lock to hold is the one on the file now at that name.
    struct stat held {};
    struct stat named {};
    if (::fstat(fd.get(), &held) == 0 && ::stat(file.c_str(), &named) == 0 &&
        held.st_ino == named.st_ino && held.st_dev == named.st_dev) {
      return NodeLock(std::move(fd), file);
    }
  }
}

NodeLock::~NodeLock() {
  if (step_slots_ != nullptr) {
    // In a group: the slot stays locked until the flush; only the step lets go of it.
    const auto held = step_slots_->find(slot_);
    if (held != step_slots_->end() && --held->second == 0) step_slots_->erase(held);
    return;
  }
  if (range_fd_ >= 0) unlock_slot(range_fd_, slot_);
}

void NodeLock::drop_if_unused(const std::string& node_base) {
  if (!fd_ || path_exists(node_base + ".history") || path_exists(node_base + ".path") ||
      path_exists(node_base + ".children")) {
    return;
  }
  ::unlink(file_.c_str());
}

Result<std::vector<Store::Impl::ChildMarker>> Store::Impl::child_markers(
    std::string_view path) const {
  const std::string dir = node_of(path) + ".children";
  auto names = directory_names(dir);
  if (!names) {
    if (names.failure().value == ENOENT) return std::vector<ChildMarker>{};
    return Error{fmt::format("cannot list {}: {}", dir, std::strerror(names.failure().value))};
  }
  std::vector<ChildMarker> markers;
  for (std::string& name : *names) {
    const bool pending = name.size() > kPendingSuffix.size() &&
                         name.compare(name.size() - kPendingSuffix.size(), kPendingSuffix.size(),
                                      kPendingSuffix) == 0;
    if (pending) name.resize(name.size() - kPendingSuffix.size());
    if (is_sha256_hex(name)) markers.push_back({std::move(name), pending});
  }
  return markers;
}

namespace {

// A power cut may leave a node with both markers: each child is listed once, sorted.
std::vector<std::string> sorted_once(std::vector<std::string> paths) {
  std::sort(paths.begin(), paths.end());
  paths.erase(std::unique(paths.begin(), paths.end()), paths.end());
  return paths;
}

}  // namespace

Result<std::vector<std::string>> Store::Impl::children_except(
    std::string_view path, const std::vector<std::string>& except) const {
  if (format == 2) {
    auto children = catalog->children(path);
    if (!children) return children;
    for (auto& p : staged_within(path, true)) children->push_back(std::move(p));
    *children = sorted_once(std::move(*children));
    const std::unordered_set<std::string> skip(except.begin(), except.end());
    std::erase_if(*children,
                  [&](const std::string& child) { return skip.count(base_name(child)) > 0; });
    return children;
  }
  auto markers = child_markers(path);
  if (!markers) return Error{markers.error()};
  std::unordered_set<std::string> skip;
  for (const auto& name : except) skip.insert(key_of(join_path(path, name)));
  std::vector<std::string> children;
  for (const auto& marker : *markers) {
    if (skip.count(marker.key) > 0) continue;
    auto child = path_of_key(marker.key);
    // A child always lies directly beneath its parent; anything else is damage.
    if (child && parent_path(*child) == path && *child != path)
      children.push_back(std::move(*child));
  }
  return sorted_once(std::move(children));
}

Result<std::vector<std::string>> Store::Impl::child_paths(std::string_view path,
                                                          std::uint64_t* unnamed) const {
  auto markers = child_markers(path);
  if (!markers) return Error{markers.error()};
  std::vector<std::string> children;
  for (const auto& marker : *markers) {
    auto child = path_of_key(marker.key);
    // A pending marker whose node has no name yet was left by an interrupted first
    // archiving; a finished one means the node's name was lost.
    if (!child) {
      if (!marker.pending && unnamed != nullptr) ++*unnamed;
      continue;
    }
    children.push_back(std::move(*child));
  }
  return sorted_once(std::move(children));
}

Result<std::vector<std::string>> Store::Impl::paths_within(std::string_view dir,
                                                           std::uint64_t* unnamed) const {
  if (format == 2) {
    auto paths = catalog->paths_within(dir);
    if (!paths) return paths;
    for (auto& p : staged_within(dir, false)) paths->push_back(std::move(p));
    return sorted_once(std::move(*paths));
  }
  std::vector<std::string> paths;
  if (!path_exists(node_of(dir) + ".path") && !path_exists(node_of(dir) + ".history")) return paths;
  std::deque<std::string> pending{std::string(dir)};
  while (!pending.empty()) {
    std::string path = std::move(pending.front());
    pending.pop_front();
    auto children = child_paths(path, unnamed);
    if (!children) return Error{children.error()};
    for (auto& child : *children) {
      // A child always lies directly beneath its parent; anything else is damage.
      if (parent_path(child) == path && child != path) pending.push_back(std::move(child));
    }
    paths.push_back(std::move(path));
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

Result<Store> Store::open(const std::string& backup_root, Mode mode, StoreHooks hooks,
                          CompressionOptions compression, ArchiveFormat new_format) {
  if (backup_root.empty()) return Error{"backup_root is not set"};
  std::string root = backup_root;
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  const std::string format_file = root + "/FORMAT";
  if (mode == Mode::ReadWrite && !path_exists(format_file)) {
    std::error_code ec;
    std::filesystem::create_directories(root, ec);
    if (ec) return Error{fmt::format("cannot create backup root {}: {}", root, ec.message())};
    bool empty = true;
    for (const auto& entry : std::filesystem::directory_iterator(root, ec)) {
      const auto name = entry.path().filename().string();
      // What an interrupted creation may have left, in either format.
      static const std::unordered_set<std::string> kOwn = {"tmp",
                                                           "objects",
                                                           "nodes",
                                                           "FORMAT",
                                                           "packs",
                                                           "locks",
                                                           "slots",
                                                           "catalog.db",
                                                           "catalog.db-wal",
                                                           "catalog.db-shm",
                                                           "catalog.db-journal"};
      if (kOwn.count(name) == 0) empty = false;
    }
    if (ec) return Error{fmt::format("cannot read backup root {}: {}", root, ec.message())};
    if (!empty) {
      return Error{
          fmt::format("backup root {} is not empty and not a TimeWarp archive (no FORMAT "
                      "file); refusing to write into it",
                      root)};
    }
  }
  auto impl = std::make_unique<Impl>(root, mode, std::move(hooks), compression);
  if (mode == Mode::ReadWrite) {
    // FORMAT right after tmp/ (which writing it needs), so that a kill during creation
    // leaves either no archive or one that opens.
    if (auto made = impl->disk.make_dir(root + "/tmp"); !made) return Error{made.fault().message};
    if (!path_exists(format_file)) {
      const std::string text = new_format == ArchiveFormat::V1
                                   ? std::string(kFormatLine)
                                   : std::string(kFormat2Line) + chunk_sizes_line(ChunkSizes{});
      if (auto written = impl->disk.write_file(format_file, text); !written) {
        return Error{written.fault().message};
      }
    }
  }
  auto format = read_small_file(format_file, 4096);
  if (!format) {
    return Error{fmt::format("{} is not a TimeWarp archive (cannot read {})", root, format_file)};
  }
  if (*format == kFormatLine) {
    impl->format = 1;
  } else if (format->starts_with(kFormat2Line)) {
    auto sizes = parse_chunk_sizes(std::string_view(*format).substr(kFormat2Line.size()));
    if (!sizes) {
      return Error{fmt::format("{} is not a TimeWarp archive this version can read ({}: {})", root,
                               format_file, sizes.error())};
    }
    impl->format = 2;
    impl->chunk_sizes = *sizes;
  } else {
    return Error{fmt::format("{} is not a TimeWarp archive this version can read ({} holds '{}')",
                             root, format_file, shown_path(format->substr(0, 40)))};
  }
  if (impl->format == 2) {
    if (auto opened = impl->open_format2(); !opened) return Error{opened.error()};
  } else if (mode == Mode::ReadWrite) {
    for (const char* sub : {"objects", "nodes"}) {
      if (auto made = impl->disk.make_dir(root + "/" + sub); !made) {
        return Error{made.fault().message};
      }
    }
  }
  if (mode == Mode::ReadWrite) impl->disk.remove_stale_temps();
  return Store(std::move(impl));
}

ArchiveResult Store::update(std::string_view path, QueueOrder order) {
  impl_->order = order;
  return to_archive_result(impl_->reconcile(path, Op::Update));
}
ArchiveResult Store::stat(std::string_view path, QueueOrder order) {
  impl_->order = order;
  return to_archive_result(impl_->reconcile(path, Op::Stat));
}
ArchiveResult Store::remove(std::string_view path, QueueOrder order) {
  impl_->order = order;
  return to_archive_result(impl_->reconcile(path, Op::Delete));
}
ArchiveResult Store::move(std::string_view from, std::string_view to, QueueOrder order) {
  impl_->order = order;
  return to_archive_result(impl_->move(from, to));
}
ArchiveResult Store::scan(std::string_view path, QueueOrder order, const Filter* filter) {
  impl_->order = order;
  return to_archive_result(impl_->scan(path, filter));
}

Result<std::vector<Version>> Store::versions(std::string_view raw) const {
  auto path = normalize_path(raw);
  if (!path) return Error{path.error()};
  auto history = impl_->read_history(*path);
  if (!history) return Error{history.error()};
  return std::move(history->versions);
}

Result<std::vector<std::string>> Store::paths_within(std::string_view raw) const {
  auto path = normalize_path(raw);
  if (!path) return Error{path.error()};
  return impl_->paths_within(*path);
}

Result<std::vector<std::string>> Store::children(std::string_view raw,
                                                 const std::vector<std::string>& except) const {
  auto path = normalize_path(raw);
  if (!path) return Error{path.error()};
  return impl_->children_except(*path, except);
}

// --- Store -------------------------------------------------------------------------------

Store::Store(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Store::Store(Store&&) noexcept = default;
Store& Store::operator=(Store&&) noexcept = default;
Store::~Store() = default;

const std::string& Store::root() const { return impl_->root; }

void Store::begin_group() { impl_->grouping = impl_->format == 2; }

void Store::close_group(std::function<void(const Status&)> on_durable) {
  if (!impl_->grouping) {
    on_durable(Ok{});
    return;
  }
  impl_->close_group([on_durable = std::move(on_durable)](const Done& done) {
    on_durable(done ? Status(Ok{}) : Status(Error{done.fault().message}));
  });
  impl_->advance(false);
}

void Store::advance() {
  if (!impl_->grouping) return;
  if (impl_->worker) impl_->worker->clear_done();
  impl_->advance(false);
}

int Store::group_fd() const { return impl_->worker ? impl_->worker->done_fd() : -1; }

bool Store::syncing() const { return impl_->grouping && impl_->worker && !impl_->worker->idle(); }

Status Store::flush() {
  auto flushed = impl_->flush_group();
  if (!flushed) return Error{flushed.fault().message};
  return Ok{};
}

Result<bool> Store::fold_journal() {
  if (impl_->format != 2 || impl_->mode != Mode::ReadWrite) return true;
  if (!impl_->closed.empty()) return false;  // groups under way: a quiet archive later
  // A short wait: another archiver's commit is a reason to try later, not to block.
  return impl_->catalog->fold_journal(std::chrono::milliseconds(100));
}

std::size_t Store::staged_versions() const { return impl_->staged.version_count(); }
std::uint64_t Store::staged_bytes() const { return impl_->staged.blob_bytes(impl_->group_opened); }

ArchiveFormat Store::format() const {
  return impl_->format == 2 ? ArchiveFormat::V2 : ArchiveFormat::V1;
}

}  // namespace tw::archive
