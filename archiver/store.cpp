#include "archiver/store.hpp"

#include <dirent.h>
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

#include <fmt/format.h>

#include "archiver/paths.hpp"
#include "archiver/sha256.hpp"
#include "archiver/store_impl.hpp"
#include "archiver/timefmt.hpp"
#include "common/escape.hpp"

namespace tw::archive {
namespace {

std::int64_t to_ns(const struct timespec& ts) {
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

const char* type_name(mode_t mode) {
  if (S_ISFIFO(mode)) return "fifo";
  if (S_ISSOCK(mode)) return "socket";
  if (S_ISCHR(mode)) return "character device";
  if (S_ISBLK(mode)) return "block device";
  return "unknown type";
}

void take_metadata(Version& v, const struct stat& st) {
  v.mode = st.st_mode;
  v.uid = st.st_uid;
  v.gid = st.st_gid;
  v.mtime_ns = to_ns(st.st_mtim);
}

bool same_file_state(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino && a.st_size == b.st_size &&
         to_ns(a.st_mtim) == to_ns(b.st_mtim) && to_ns(a.st_ctim) == to_ns(b.st_ctim);
}

Fault changed_fault(const std::string& name) {
  return retry(fmt::format("changed while being read: {}", name));
}

// Appends a version to `history`, numbering it and keeping archive times in order.
void append_version(History& history, Version v) {
  const Version* last = history.latest();
  v.number = last != nullptr ? last->number + 1 : 1;
  v.archived_at_ns = std::max(now_ns(), last != nullptr ? last->archived_at_ns : INT64_MIN);
  history.versions.push_back(std::move(v));
}

}  // namespace

ArchiveResult to_archive_result(const Expected<std::uint64_t>& result) {
  if (result) return ArchiveResult{Outcome::Complete, *result, {}};
  return ArchiveResult{result.fault().outcome, 0, result.fault().message};
}

Store::Impl::Impl(std::string root_dir, Store::Mode open_mode, StoreHooks store_hooks,
                  CompressionOptions compression)
    : root(std::move(root_dir)),
      mode(open_mode),
      hooks(std::move(store_hooks)),
      disk(root, hooks.before_write_step),
      objects(disk, hooks.cancelled, compression) {}

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
  const std::string file = history_file(path);
  auto history = read_history_file(file);
  if (!history) return history;
  if (history->path.empty()) return History{std::string(path), {}};  // no history yet
  if (history->path != path) {
    return Error{fmt::format("damaged history {}: it is for {}, not {}", file, shown(history->path),
                             shown(path))};
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
  auto path = unescape_bytes(std::string_view(head).substr(kPathLine.size(), end - kPathLine.size()));
  if (!path || path->empty() || (*path)[0] != '/' || key_of(*path) != key) return std::nullopt;
  return path;
}

Expected<History> Store::Impl::load_history(std::string_view path) const {
  auto history = read_history(path);
  if (!history) return retry("archive: " + history.error());
  return std::move(history.value());
}

Expected<std::uint64_t> Store::Impl::save_history(const History& history) {
  return disk.write_file(history_file(history.path), serialize_history(history));
}

Expected<std::uint64_t> Store::Impl::ensure_node(std::string_view path, bool leaf) {
  const std::string base = node_of(path);
  const bool is_root = path == "/";
  const std::string parent = parent_path(path);
  const std::string marker =
      is_root ? std::string() : node_of(parent) + ".children/" + key_of(path);
  const bool named = path_exists(base + ".history") || path_exists(base + ".path");
  if ((named || leaf) && (is_root || path_exists(marker))) return std::uint64_t{0};
  std::uint64_t bytes = 0;
  if (!is_root) {
    auto up = ensure_node(parent, false);
    if (!up) return up.fault();
    bytes += *up;
  }
  const std::string bucket = dir_of(base);
  if (!path_exists(bucket)) {
    if (auto made = disk.make_dir(bucket); !made) return made.fault();
  }
  if (!leaf && !named) {
    auto written = disk.write_file(base + ".path", path);
    if (!written) return written.fault();
    bytes += *written;
  }
  if (!is_root) {
    const std::string children = node_of(parent) + ".children";
    if (!path_exists(children)) {
      if (auto made = disk.make_dir(children); !made) return made.fault();
    }
    if (auto made = disk.make_marker(marker); !made) return made.fault();
  }
  return bytes;
}

Expected<NodeLock> Store::Impl::lock_node(std::string_view path) {
  const std::string bucket = dir_of(node_of(path));
  if (!path_exists(bucket)) {
    if (auto made = disk.make_dir(bucket); !made) return made.fault();
  }
  const std::string file = node_of(path) + ".lock";
  UniqueFd fd(::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644));
  if (!fd) return errno_fault(errno, Side::Archive, fmt::format("opening {}", shown(file)));
  while (::flock(fd.get(), LOCK_EX) != 0) {
    if (errno != EINTR)
      return errno_fault(errno, Side::Archive, fmt::format("locking {}", shown(file)));
    if (cancelled()) return retry("cancelled");
  }
  return NodeLock(std::move(fd));
}

Result<std::vector<std::string>> Store::Impl::child_paths(std::string_view path) const {
  std::vector<std::string> children;
  const std::string dir = node_of(path) + ".children";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return children;
    return Error{fmt::format("cannot list {}: {}", dir, std::strerror(errno))};
  }
  std::unique_ptr<DIR, int (*)(DIR*)> closer(d, ::closedir);
  while (const dirent* entry = ::readdir(d)) {
    const std::string_view key = entry->d_name;
    if (!is_sha256_hex(key)) continue;
    // A marker whose node has no name yet was left by an interrupted first archiving.
    if (auto child = path_of_key(key)) children.push_back(std::move(*child));
  }
  return children;
}

Expected<std::uint64_t> Store::Impl::record(const std::string& path, Version version) {
  auto node_bytes = ensure_node(path, true);
  if (!node_bytes) return node_bytes.fault();
  auto lock = lock_node(path);
  if (!lock) return lock.fault();
  auto history = load_history(path);
  if (!history) return history.fault();
  if (const Version* live = history->live(); live != nullptr && same_state(*live, version)) {
    return *node_bytes;  // identical to the latest version: nothing new to store
  }
  append_version(*history, std::move(version));
  auto saved = save_history(*history);
  if (!saved) return saved.fault();
  return *node_bytes + *saved;
}

Expected<std::uint64_t> Store::Impl::archive(std::string_view raw, Op op) {
  auto normalized = normalize_path(raw);
  if (!normalized) return permanent(normalized.error());
  const std::string& path = *normalized;
  const std::string name = shown(path);
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return errno_fault(errno, Side::Source, name);
  auto history = load_history(path);
  if (!history) return history.fault();
  const Version* live = history->live();

  Version v;
  v.op = op;
  take_metadata(v, st);
  std::uint64_t object_bytes = 0;
  if (S_ISREG(st.st_mode)) {
    v.size = static_cast<std::uint64_t>(st.st_size);
    if (op == Op::Stat && live != nullptr && live->is_file() && live->size == v.size) {
      v.sha256 = live->sha256;  // metadata-only version: the content is the previous one
    } else {
      v.op = Op::Update;
      const int flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY;
      UniqueFd fd(::open(path.c_str(), flags | O_NOATIME));
      if (!fd && errno == EPERM) fd.reset(::open(path.c_str(), flags));
      if (!fd) {
        if (errno == ELOOP) return changed_fault(name);  // replaced by a link meanwhile
        return errno_fault(errno, Side::Source, fmt::format("opening {}", name));
      }
      struct stat before {};
      if (::fstat(fd.get(), &before) != 0) {
        return errno_fault(errno, Side::Source, fmt::format("reading {}", name));
      }
      if (!S_ISREG(before.st_mode) || before.st_ino != st.st_ino || before.st_dev != st.st_dev) {
        return changed_fault(name);
      }
      take_metadata(v, before);
      v.size = static_cast<std::uint64_t>(before.st_size);
      const auto unchanged = [&]() -> Done {
        if (hooks.after_content_read) hooks.after_content_read();
        struct stat after {};
        struct stat now {};
        if (::fstat(fd.get(), &after) != 0 || !same_file_state(before, after)) {
          return changed_fault(name);
        }
        if (::lstat(path.c_str(), &now) != 0 || now.st_ino != before.st_ino ||
            now.st_dev != before.st_dev) {
          return changed_fault(name);
        }
        return Ok{};
      };
      // Same size and metadata as the latest version: hash first, compress only if new.
      bool known = false;
      if (live != nullptr && live->is_file() && live->size == v.size &&
          live->mtime_ns == v.mtime_ns && live->mode == v.mode && live->uid == v.uid &&
          live->gid == v.gid) {
        auto hashed = objects.hash(fd.get(), v.size, name);
        if (!hashed) return hashed.fault();
        if (auto same = unchanged(); !same) return same.fault();
        if (hashed->sha256 == live->sha256 && objects.contains(live->sha256)) {
          v.sha256 = hashed->sha256;
          known = true;
        } else if (::lseek(fd.get(), 0, SEEK_SET) != 0) {
          return errno_fault(errno, Side::Source, fmt::format("reading {}", name));
        }
      }
      if (!known) {
        auto stored = objects.store(fd.get(), v.size, name);
        if (!stored) return stored.fault();
        if (auto same = unchanged(); !same) return same.fault();
        v.sha256 = stored->sha256;
        object_bytes = stored->bytes_added;
      }
    }
  } else if (S_ISLNK(st.st_mode)) {
    std::string target(st.st_size > 0 ? static_cast<std::size_t>(st.st_size) + 1 : PATH_MAX, '\0');
    const ssize_t n = ::readlink(path.c_str(), target.data(), target.size());
    if (n < 0) {
      if (errno == EINVAL) return changed_fault(name);  // no longer a link
      return errno_fault(errno, Side::Source, fmt::format("reading link {}", name));
    }
    if (static_cast<std::size_t>(n) >= target.size()) return changed_fault(name);
    target.resize(static_cast<std::size_t>(n));
    v.link_target = std::move(target);
    v.size = v.link_target.size();
    if (op == Op::Stat &&
        !(live != nullptr && live->is_symlink() && live->link_target == v.link_target)) {
      v.op = Op::Update;
    }
  } else if (S_ISDIR(st.st_mode)) {
    v.size = 0;  // a directory version records its own metadata, not its entries
  } else {
    return permanent(fmt::format("not a regular file, symlink or directory ({}): {}",
                                 type_name(st.st_mode), name));
  }
  auto recorded = record(path, std::move(v));
  if (!recorded) return recorded.fault();
  return object_bytes + *recorded;
}

Result<std::vector<std::string>> Store::Impl::paths_within(std::string_view dir) const {
  std::vector<std::string> paths;
  if (!path_exists(node_of(dir) + ".path") && !path_exists(node_of(dir) + ".history")) return paths;
  std::deque<std::string> pending{std::string(dir)};
  while (!pending.empty()) {
    std::string path = std::move(pending.front());
    pending.pop_front();
    auto children = child_paths(path);
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

Expected<std::uint64_t> Store::Impl::remove(std::string_view raw) {
  auto normalized = normalize_path(raw);
  if (!normalized) return permanent(normalized.error());
  auto paths = paths_within(*normalized);
  if (!paths) return retry("archive: " + paths.error());
  std::uint64_t bytes = 0;
  for (const auto& path : *paths) {
    if (cancelled()) return retry("cancelled");
    auto lock = lock_node(path);
    if (!lock) return lock.fault();
    auto history = load_history(path);
    if (!history) return history.fault();
    if (history->live() == nullptr) continue;  // never archived, or already gone
    Version tombstone;
    tombstone.op = Op::Delete;
    append_version(*history, std::move(tombstone));
    auto saved = save_history(*history);
    if (!saved) return saved.fault();
    bytes += *saved;
  }
  return bytes;
}

Expected<Store::Impl::MoveStep> Store::Impl::move_one(const std::string& from,
                                                      const std::string& to, std::uint64_t& bytes) {
  // A look without the lock first, so nothing is created for paths with nothing to move.
  {
    auto peek = load_history(from);
    if (!peek) return peek.fault();
    if (peek->live() == nullptr) {
      const Version* last = peek->latest();
      if (last != nullptr && last->op == Op::Move && last->moved_to == to)
        return MoveStep::AlreadyMoved;
      return MoveStep::NothingToMove;
    }
  }
  auto node_bytes = ensure_node(to, true);
  if (!node_bytes) return node_bytes.fault();
  bytes += *node_bytes;
  // Both locks, in key order so two movers cannot deadlock.
  const bool from_first = key_of(from) < key_of(to);
  auto first = lock_node(from_first ? from : to);
  if (!first) return first.fault();
  auto second = lock_node(from_first ? to : from);
  if (!second) return second.fault();

  auto source = load_history(from);
  if (!source) return source.fault();
  const Version* live = source->live();
  if (live == nullptr) {
    const Version* last = source->latest();
    if (last != nullptr && last->op == Op::Move && last->moved_to == to)
      return MoveStep::AlreadyMoved;
    return MoveStep::NothingToMove;
  }
  auto target = load_history(to);
  if (!target) return target.fault();

  Version arrived = *live;
  arrived.op = Op::Move;
  arrived.moved_from = from;
  arrived.moved_to.clear();
  const Version* target_last = target->latest();
  const bool done_before = target_last != nullptr && target_last->op == Op::Move &&
                           target_last->moved_from == from && same_state(*target_last, *live);
  if (!done_before) {
    if (target->versions.empty()) {
      target->versions = source->versions;  // the history follows the file
    }
    append_version(*target, std::move(arrived));
    auto saved = save_history(*target);
    if (!saved) return saved.fault();
    bytes += *saved;
  }
  Version left;
  left.op = Op::Move;
  left.moved_to = to;
  append_version(*source, std::move(left));
  auto saved = save_history(*source);
  if (!saved) return saved.fault();
  bytes += *saved;
  return MoveStep::Moved;
}

Expected<std::uint64_t> Store::Impl::move(std::string_view raw_from, std::string_view raw_to) {
  auto from = normalize_path(raw_from);
  if (!from) return permanent(from.error());
  auto to = normalize_path(raw_to);
  if (!to) return permanent(fmt::format("destination: {}", to.error()));
  if (*from == *to) return std::uint64_t{0};
  if (is_within(*to, *from)) {
    return permanent(fmt::format("cannot move {} into itself ({})", shown(*from), shown(*to)));
  }
  auto paths = paths_within(*from);
  if (!paths) return retry("archive: " + paths.error());
  std::uint64_t bytes = 0;
  bool anything = false;
  for (const auto& path : *paths) {
    if (cancelled()) return retry("cancelled");
    const std::string dest = *to + path.substr(from->size() == 1 ? 0 : from->size());
    auto step = move_one(path, dest, bytes);
    if (!step) return step.fault();
    anything = anything || *step != MoveStep::NothingToMove;
  }
  if (anything) return bytes;
  // Nothing archived under the old name: archive the file under its new name instead.
  auto archived = archive(*to, Op::Update);
  if (!archived) return archived.fault();
  return bytes + *archived;
}

Result<Store> Store::open(const std::string& backup_root, Mode mode, StoreHooks hooks,
                          CompressionOptions compression) {
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
      if (name != "tmp" && name != "objects" && name != "nodes" && name != "FORMAT") empty = false;
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
      if (auto written = impl->disk.write_file(format_file, kFormatLine); !written) {
        return Error{written.fault().message};
      }
    }
    for (const char* sub : {"objects", "nodes"}) {
      if (auto made = impl->disk.make_dir(root + "/" + sub); !made) {
        return Error{made.fault().message};
      }
    }
  }
  auto format = read_small_file(format_file, 4096);
  if (!format) {
    return Error{fmt::format("{} is not a TimeWarp archive (cannot read {})", root, format_file)};
  }
  if (*format != kFormatLine) {
    return Error{fmt::format("{} is not a TimeWarp archive this version can read ({} holds '{}')",
                             root, format_file, shown(format->substr(0, 40)))};
  }
  if (mode == Mode::ReadWrite) impl->disk.remove_stale_temps();
  return Store(std::move(impl));
}

ArchiveResult Store::update(std::string_view path) {
  return to_archive_result(impl_->archive(path, Op::Update));
}
ArchiveResult Store::stat(std::string_view path) {
  return to_archive_result(impl_->archive(path, Op::Stat));
}
ArchiveResult Store::remove(std::string_view path) {
  return to_archive_result(impl_->remove(path));
}
ArchiveResult Store::move(std::string_view from, std::string_view to) {
  return to_archive_result(impl_->move(from, to));
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

// --- Store -------------------------------------------------------------------------------

Store::Store(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Store::Store(Store&&) noexcept = default;
Store& Store::operator=(Store&&) noexcept = default;
Store::~Store() = default;

const std::string& Store::root() const { return impl_->root; }

}  // namespace tw::archive
