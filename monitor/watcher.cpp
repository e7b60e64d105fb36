#include "monitor/watcher.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <unordered_set>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/escape.hpp"
#include "common/paths.hpp"
#include "common/time.hpp"

namespace tw::monitor {
namespace {

constexpr std::uint32_t kWatchMask = IN_CREATE | IN_CLOSE_WRITE | IN_MODIFY | IN_ATTRIB |
                                     IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF |
                                     IN_MOVE_SELF | IN_ONLYDIR | IN_EXCL_UNLINK;
constexpr auto kLimitErrorEvery = std::chrono::seconds(60);
// Entry events that change the mtime of the directory they happen in.
constexpr std::uint32_t kEntryEvents = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO;
// Entries the periodic rescan looks at between two looks at the clock.
constexpr std::size_t kRescanStep = 32;
// How long a file MOVE's destination counts as "moved here lately" for the next rename.
constexpr auto kMovedHereFor = std::chrono::seconds(10);
constexpr std::size_t kMovedHereMax = 4096;
// A file written without being closed is queued once no write came for `unclosed_quiet`,
// doubled each time it is queued again that way while still not closed (at most 2^8
// times), and forgotten a minute after its last write.
constexpr int kUnclosedMaxDoublings = 8;
constexpr auto kUnclosedForget = std::chrono::seconds(60);

}  // namespace

Watcher::Watcher(Options options, std::unique_ptr<EventSource> source, const Filter& filter,
                 ArchiveView& archive, EventBatcher& batcher, PendingLookup pending,
                 std::function<void()> notify)
    : options_(options),
      source_(std::move(source)),
      filter_(filter),
      archive_(archive),
      batcher_(batcher),
      pending_(std::move(pending)),
      notify_(std::move(notify)),
      stop_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      scanner_(filter, archive) {
  if (!stop_fd_) throw std::runtime_error(fmt::format("eventfd: {}", std::strerror(errno)));
}

Watcher::~Watcher() { stop(); }

void Watcher::start() {
  thread_ = std::thread([this] { run(); });
}

void Watcher::stop() {
  stopping_.store(true);
  const std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(stop_fd_.get(), &one, sizeof one);
  if (thread_.joinable()) thread_.join();
}

WatcherStats Watcher::stats() const {
  WatcherStats s;
  s.watches = watches_.load();
  s.unwatched = unwatched_count_.load();
  s.events = events_.load();
  s.changes = changes_.load();
  s.rescans = rescans_.load();
  s.catchup_done = catchup_done_.load();
  s.failed = failed_.load();
  return s;
}

void Watcher::run() {
  try {
    catch_up();
    while (!stopping_.load()) run_once(std::chrono::milliseconds(60000));
  } catch (const std::exception& e) {
    // Nothing here is expected to throw. If it does, the monitor must not go on without
    // watching: it stops, and the next start's catch-up finds what was missed.
    spdlog::critical("file watching failed: {}", e.what());
    failed_.store(true);
    if (notify_) notify_();
  }
  flush();
}

bool Watcher::is_root(const std::string& path) const {
  const auto& roots = filter_.roots();
  return std::find(roots.begin(), roots.end(), path) != roots.end();
}

std::optional<PendingSet> Watcher::lookup_pending() {
  if (!pending_) return std::nullopt;
  return pending_(filter_.roots());
}

void Watcher::emit(Change change) {
  out_.push_back(std::move(change));
  changes_.fetch_add(1);
}

void Watcher::flush() {
  if (out_.empty()) return;
  batcher_.add(std::move(out_));
  out_.clear();
}

void Watcher::catch_up() {
  const auto started = Clock::now();
  const auto pending = lookup_pending();
  if (!pending)
    spdlog::warn("catch-up: the queue's waiting work is unknown; some of it may be queued twice");
  std::uint64_t entries = 0;
  const auto changes_before = changes_.load();
  for (const auto& root : filter_.roots()) {
    if (stopping_.load()) return;
    struct stat st {};
    if (::lstat(root.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      spdlog::error("source directory {} is missing or not a directory; checking every {} s for it",
                    shown_path(root), options_.rescan_unwatched.count() / 1000.0);
      lost_roots_.insert(root);
      continue;
    }
    const auto stats = scan(root, root, true, pending ? &*pending : nullptr, nullptr, true);
    entries += stats.entries;
    flush();
  }
  next_retry_ = Clock::now() + options_.rescan_unwatched;
  if (options_.rescan_interval.count() > 0) next_rescan_ = Clock::now() + options_.rescan_interval;
  const double seconds = seconds_of(Clock::now() - started);
  spdlog::info(
      "catch-up: {} entries in {} source directories scanned in {:.2f} s; {} changes "
      "queued; watching {} directories",
      entries, filter_.roots().size(), seconds, changes_.load() - changes_before, wd_path_.size());
  publish();
  catchup_done_.store(true);
  if (notify_) notify_();
}

std::chrono::milliseconds Watcher::next_timeout(std::chrono::milliseconds limit) const {
  auto timeout = limit;
  const auto now = Clock::now();
  const auto until = [&](Clock::time_point t) {
    return std::max(std::chrono::milliseconds(0),
                    std::chrono::ceil<std::chrono::milliseconds>(t - now));
  };
  for (const auto& [cookie, move] : moves_) {
    timeout = std::min(timeout, until(move.seen + options_.move_grace));
  }
  if (!unwatched_.empty() || !lost_roots_.empty()) timeout = std::min(timeout, until(next_retry_));
  for (const auto& [path, u] : unclosed_) {
    if (u.due != Clock::time_point::max()) timeout = std::min(timeout, until(u.due));
  }
  if (pass_) return std::chrono::milliseconds(0);  // a slice of the rescan waits
  if (next_rescan_ != Clock::time_point::max()) timeout = std::min(timeout, until(next_rescan_));
  return timeout;
}

void Watcher::run_once(std::chrono::milliseconds limit) {
  pollfd fds[2] = {{source_->fd(), POLLIN, 0}, {stop_fd_.get(), POLLIN, 0}};
  const int ready = ::poll(fds, 2, static_cast<int>(next_timeout(limit).count()));
  if (ready < 0 && errno != EINTR)
    throw std::runtime_error(fmt::format("poll: {}", std::strerror(errno)));
  if (stopping_.load()) return;
  const auto events = source_->read_events();
  events_.fetch_add(static_cast<std::int64_t>(events.size()));
  for (const auto& event : events) handle(event);
  resolve_moves(false);
  queue_touched_dirs();
  queue_unclosed();
  if (overflowed_) {
    overflowed_ = false;
    rescan_all("the inotify event queue overflowed (events were lost)");
  }
  if ((!unwatched_.empty() || !lost_roots_.empty()) && Clock::now() >= next_retry_) {
    retry_unwatched();
  }
  if (pass_ || Clock::now() >= next_rescan_) rescan_some();
  flush();
  publish();
}

void Watcher::publish() {
  watches_.store(static_cast<std::int64_t>(wd_path_.size()));
  unwatched_count_.store(static_cast<std::int64_t>(unwatched_.size() + lost_roots_.size()));
}

void Watcher::handle(const RawEvent& event) {
  if (event.mask & IN_Q_OVERFLOW) {
    overflowed_ = true;
    return;
  }
  // The second half of a rename follows its first at once; anything else in between means
  // the first half moved out of our trees.
  const bool pairs = (event.mask & IN_MOVED_TO) && moves_.count(event.cookie) > 0;
  if (!moves_.empty() && !pairs) resolve_moves(true);

  const auto it = wd_path_.find(event.wd);
  if (event.mask & IN_IGNORED) {
    if (it != wd_path_.end()) {
      if (auto p = path_wd_.find(it->second); p != path_wd_.end() && p->second == event.wd) {
        path_wd_.erase(p);
      }
      wd_path_.erase(it);
    }
    return;
  }
  if (it == wd_path_.end()) return;  // a watch already given up
  const std::string dir = it->second;
  if (event.name.empty()) {
    on_self_event(dir, event.mask);
    return;
  }
  const std::string path = join_path(dir, event.name);
  const bool is_dir = (event.mask & IN_ISDIR) != 0;
  if (event.mask & kEntryEvents) touched_dirs_.insert(dir);
  if (event.mask & IN_MOVED_FROM) {
    moves_[event.cookie] = {path, is_dir, Clock::now()};
    unclosed_.erase(path);
    return;
  }
  if (event.mask & IN_MOVED_TO) {
    if (auto m = moves_.find(event.cookie); m != moves_.end()) {
      const PendingMove from = std::move(m->second);
      moves_.erase(m);
      on_move(from.path, path, is_dir);
    } else {
      on_moved_in(path, is_dir);
    }
    return;
  }
  if (filter_.excluded(path)) return;
  if (event.mask & IN_CREATE) on_create(path, is_dir);
  if (event.mask & IN_MODIFY) on_modified(path);
  if (event.mask & IN_CLOSE_WRITE) on_written(path);
  if (event.mask & IN_ATTRIB) on_attrib(path);
  if (event.mask & IN_DELETE) {
    unclosed_.erase(path);
    emit(Change::remove(path, is_dir));
  }
}

void Watcher::on_self_event(const std::string& dir, std::uint32_t mask) {
  if (!is_root(dir)) return;  // the parent's watch reports what happened to it
  if (mask & IN_ATTRIB) on_attrib(dir);
  if (mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT)) {
    const char* what = (mask & IN_UNMOUNT)     ? "was unmounted"
                       : (mask & IN_MOVE_SELF) ? "was moved away"
                                               : "was deleted";
    spdlog::error("source directory {} {}; checking every {} s for it to come back",
                  shown_path(dir), what, options_.rescan_unwatched.count() / 1000.0);
    unwatch_within(dir);
    if (!(mask & IN_UNMOUNT)) emit(Change::remove(dir, true));
    lost_roots_.insert(dir);
    next_retry_ = std::min(next_retry_, Clock::now() + options_.rescan_unwatched);
  }
}

void Watcher::on_create(const std::string& path, bool is_dir) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return;  // gone already: its DELETE follows
  if (is_dir || S_ISDIR(st.st_mode)) {
    scan(path, path, false, nullptr);  // watch first, then list (the scanner's order)
    return;
  }
  // A regular file is queued when its writer closes it; a new name for an existing file
  // (a hard link) and a symlink have no close to wait for.
  if (S_ISLNK(st.st_mode) || (S_ISREG(st.st_mode) && st.st_nlink > 1 && !filter_.too_big(st))) {
    Change c = Change::update(path);
    describe(c, st);
    emit(std::move(c));
  }
}

// Written to: its close queues it, or (truncate(2), a writer that keeps the file open, a
// write through a mapping) queue_unclosed() once the writes stop.
void Watcher::on_modified(const std::string& path) {
  const auto now = Clock::now();
  Unclosed& u = unclosed_[path];
  u.last_write = now;
  u.due = now + options_.unclosed_quiet * (1 << std::min(u.queued, kUnclosedMaxDoublings));
}

// UPDATE of each file written to and not closed since, whose writes stopped long enough.
void Watcher::queue_unclosed() {
  const auto now = Clock::now();
  for (auto it = unclosed_.begin(); it != unclosed_.end();) {
    Unclosed& u = it->second;
    if (u.due <= now) {
      u.due = Clock::time_point::max();
      ++u.queued;
      struct stat st {};
      if (::lstat(it->first.c_str(), &st) == 0 && S_ISREG(st.st_mode) && !filter_.too_big(st)) {
        Change c = Change::update(it->first);
        describe(c, st);
        emit(std::move(c));
      }
    }
    const bool forget = u.due == Clock::time_point::max() && now - u.last_write > kUnclosedForget;
    it = forget ? unclosed_.erase(it) : std::next(it);
  }
}

void Watcher::on_written(const std::string& path) {
  unclosed_.erase(path);
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return;  // gone already: its DELETE or MOVE follows
  if (!S_ISREG(st.st_mode) || filter_.too_big(st)) return;
  Change c = Change::update(path);
  describe(c, st);
  emit(std::move(c));
}

void Watcher::on_attrib(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return;
  if (!(S_ISREG(st.st_mode) || S_ISLNK(st.st_mode) || S_ISDIR(st.st_mode)) || filter_.too_big(st)) {
    return;
  }
  Change c = Change::stat(path, S_ISDIR(st.st_mode));
  describe(c, st);
  emit(std::move(c));
}

void Watcher::on_move(const std::string& from, const std::string& to, bool is_dir) {
  const bool from_out = filter_.excluded(from);
  const bool to_out = filter_.excluded(to);
  if (from_out && to_out) return;
  if (to_out) return on_moved_out(from, is_dir);
  if (from_out) return on_moved_in(to, is_dir);
  if (is_dir) {
    rename_watches(from, to);
    emit(Change::move(from, to, true));
    // What the moved tree holds that the archive lacks under the old name (written just
    // before the rename, or not archived yet) is queued under the new name, and what is
    // archived under the old name but gone is deleted under the new one.
    scan(to, from, true, nullptr);
    return;
  }
  struct stat st {};
  const bool present = ::lstat(to.c_str(), &st) == 0;
  const auto live = archive_.live(from);
  if (!live && moved_here_lately(from)) {
    // The second rename of a chain: the batcher makes one MOVE of the two.
    emit(Change::move(from, to));
    remember_moved_here(to);
    return;
  }
  if (!live) {
    // Nothing archived under the old name: archive the file under the new one.
    if (present && (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)) && !filter_.too_big(st)) {
      Change c = Change::update(to);
      describe(c, st);
      emit(std::move(c));
    }
    return;
  }
  if (present && filter_.too_big(st)) return on_moved_out(from, false);
  emit(Change::move(from, to));
  remember_moved_here(to);
  if (!present) return;  // moved on already: the next event says where
  const Difference d = compare(to, st, &*live);
  if (d == Difference::None) return;
  Change c = d == Difference::Content ? Change::update(to) : Change::stat(to);
  describe(c, st);
  emit(std::move(c));
}

void Watcher::on_moved_in(const std::string& path, bool is_dir) {
  if (filter_.excluded(path)) return;
  if (is_dir) {
    scan(path, path, false, nullptr);
    return;
  }
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return;
  if (!(S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)) || filter_.too_big(st)) return;
  Change c = Change::update(path);
  describe(c, st);
  emit(std::move(c));
}

void Watcher::on_moved_out(const std::string& path, bool is_dir) {
  if (filter_.excluded(path)) return;
  if (is_dir) unwatch_within(path);
  emit(Change::remove(path, is_dir));
}

// A STAT of each directory whose entries changed: the archiver's look records its new
// mtime (and tombstones what left it). A directory gone or renamed meanwhile has changes of
// its own (DELETE, MOVE) that cover it.
void Watcher::queue_touched_dirs() {
  for (const auto& dir : touched_dirs_) {
    struct stat st {};
    if (filter_.excluded(dir) || ::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    Change c = Change::stat(dir, true);
    describe(c, st);
    emit(std::move(c));
  }
  touched_dirs_.clear();
}

// Where file MOVEs went lately (a few seconds' worth, at most kMovedHereMax of them).
void Watcher::remember_moved_here(const std::string& path) {
  const auto now = Clock::now();
  if (moved_here_.size() >= kMovedHereMax) {
    for (auto it = moved_here_.begin(); it != moved_here_.end();) {
      it = (now - it->second > kMovedHereFor) ? moved_here_.erase(it) : std::next(it);
    }
    if (moved_here_.size() >= kMovedHereMax) moved_here_.clear();  // a storm of renames
  }
  moved_here_[path] = now;
}

bool Watcher::moved_here_lately(const std::string& path) const {
  const auto it = moved_here_.find(path);
  return it != moved_here_.end() && Clock::now() - it->second <= kMovedHereFor;
}

// First halves of renames whose second half did not come: moved out of our trees.
void Watcher::resolve_moves(bool all) {
  const auto now = Clock::now();
  for (auto it = moves_.begin(); it != moves_.end();) {
    if (all || now - it->second.seen >= options_.move_grace) {
      const PendingMove m = std::move(it->second);
      it = moves_.erase(it);
      on_moved_out(m.path, m.is_dir);
    } else {
      ++it;
    }
  }
}

ScanStats Watcher::scan(const std::string& dir, const std::string& archived_as, bool find_deletes,
                        const PendingSet* pending, std::unordered_set<std::string>* watched,
                        bool whole) {
  std::vector<Change> found;
  std::size_t weighed = 0, weight = 0;  // found[0, weighed) weigh `weight`
  const auto stats = scanner_.scan(
      {dir, archived_as, find_deletes, pending, kLivePriority, whole},
      [this, &found, &weighed, &weight, watched](const std::string& d) {
        if (watch(d) && watched != nullptr) watched->insert(d);
        // As many as fill a window, which then goes to the database at once: the first
        // changes are archived while the scan goes on.
        for (; weighed < found.size(); ++weighed) weight += found[weighed].weight;
        if (weight >= batcher_.window_limit()) {
          for (auto& c : found) emit(std::move(c));
          found.clear();
          weighed = weight = 0;
          flush();
        }
      },
      found, &stopping_);
  for (auto& c : found) emit(std::move(c));
  return stats;
}

void Watcher::rescan_all(const char* why) {
  rescans_.fetch_add(1);
  spdlog::warn("{}: rescanning every source directory against the archive", why);
  const auto started = Clock::now();
  resolve_moves(true);
  flush();
  const auto pending = lookup_pending();
  std::unordered_set<std::string> visited;
  for (const auto& root : filter_.roots()) {
    if (lost_roots_.count(root)) continue;
    scan(root, root, true, pending ? &*pending : nullptr, &visited, true);
  }
  // Watches of directories that are gone or were renamed while events were lost.
  for (auto it = path_wd_.begin(); it != path_wd_.end();) {
    if (visited.count(it->first)) {
      ++it;
      continue;
    }
    if (auto w = wd_path_.find(it->second); w != wd_path_.end() && w->second == it->first) {
      source_->remove_watch(it->second);
      wd_path_.erase(w);
    }
    it = path_wd_.erase(it);
  }
  spdlog::info("rescan done in {:.2f} s; watching {} directories",
               seconds_of(Clock::now() - started), wd_path_.size());
}

// One slice of the periodic rescan (starting one when it is due): at most rescan_slice of
// work, then back to the events.
void Watcher::rescan_some() {
  const auto& roots = filter_.roots();
  if (!pass_) {
    rescans_.fetch_add(1);
    spdlog::info("periodic rescan: reconciling every source directory against the archive");
    flush();
    // Not pass_.emplace(): clang 14 does not count a nested struct with member
    // initializers as default-constructible in an optional member of its enclosing class.
    pass_.emplace(RescanPass{});
    pass_->started = Clock::now();
    pass_->pending = lookup_pending();
    next_rescan_ = pass_->started + options_.rescan_interval;
  }
  const auto deadline = Clock::now() + options_.rescan_slice;
  std::vector<Change> found;
  while (Clock::now() < deadline && !stopping_.load()) {
    if (!pass_->walk) {
      if (pass_->next_root == roots.size()) {
        for (auto& c : found) emit(std::move(c));
        spdlog::info("periodic rescan done in {:.2f} s: {} entries, {} changes queued",
                     seconds_of(Clock::now() - pass_->started), pass_->totals.entries,
                     pass_->totals.changes);
        pass_.reset();
        return;
      }
      const std::string& root = roots[pass_->next_root++];
      if (lost_roots_.count(root)) continue;
      pass_->walk = std::make_unique<ScanWalk>(
          filter_, archive_,
          ScanRequest{root, root, true, pass_->pending ? &*pass_->pending : nullptr,
                      kRescanPriority, true});
    }
    if (pass_->walk->step(
            kRescanStep, [this](const std::string& d) { watch(d); }, found)) {
      const auto& s = pass_->walk->stats();
      pass_->totals.entries += s.entries;
      pass_->totals.changes += s.changes;
      pass_->totals.unreadable += s.unreadable;
      pass_->walk.reset();
    }
  }
  for (auto& c : found) emit(std::move(c));
}

void Watcher::retry_unwatched() {
  next_retry_ = Clock::now() + options_.rescan_unwatched;
  std::optional<PendingSet> pending;
  bool looked = false;
  const auto pending_now = [&]() -> const PendingSet* {
    if (!looked) {
      flush();
      pending = lookup_pending();
      looked = true;
    }
    return pending ? &*pending : nullptr;
  };
  for (auto it = lost_roots_.begin(); it != lost_roots_.end();) {
    struct stat st {};
    if (::lstat(it->c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      ++it;
      continue;
    }
    const std::string root = *it;
    it = lost_roots_.erase(it);
    spdlog::warn("source directory {} is back: catching up", shown_path(root));
    scan(root, root, true, pending_now(), nullptr, true);
  }
  // Each unwatched directory not beneath another one (whose scan covers it).
  std::vector<std::string> tops;
  for (const auto& dir : unwatched_) {
    bool covered = false;
    for (std::string p = dir; p != "/" && !covered;) {
      p = parent_path(p);
      covered = unwatched_.count(p) > 0;
    }
    if (!covered) tops.push_back(dir);
  }
  if (tops.empty()) return;
  const auto failures_before = limit_failures_;
  for (const auto& dir : tops) {
    unwatched_.erase(dir);  // the scan watches it again, or puts it back
    scan(dir, dir, true, pending_now());
  }
  if (!unwatched_.empty()) {
    spdlog::warn(
        "{} directories are still not watched ({} for lack of inotify watches); they are "
        "rescanned every {} s",
        unwatched_.size(), limit_failures_ - failures_before,
        options_.rescan_unwatched.count() / 1000.0);
  }
}

bool Watcher::watch(const std::string& dir) {
  // Every directory, the source directories too (resolved when the monitor started), is
  // watched as itself: a link put in its place is not followed.
  const std::uint32_t mask = kWatchMask | IN_DONT_FOLLOW;
  const int wd = source_->add_watch(dir, mask);
  if (wd >= 0) {
    auto [it, inserted] = wd_path_.try_emplace(wd, dir);
    if (!inserted && it->second != dir) {
      // The same directory under a new name (renamed while events were lost).
      if (auto p = path_wd_.find(it->second); p != path_wd_.end() && p->second == wd)
        path_wd_.erase(p);
      it->second = dir;
    }
    path_wd_[dir] = wd;
    unwatched_.erase(dir);
    return true;
  }
  const int error = -wd;
  if (error == ENOENT || error == ENOTDIR) return false;  // gone meanwhile: its event follows
  unwatched_.insert(dir);
  if (error == ENOSPC) {
    ++limit_failures_;
    const auto now = Clock::now();
    if (limit_failures_ == 1 || now - last_limit_error_ >= kLimitErrorEvery) {
      last_limit_error_ = now;
      const long limit = inotify_limit("max_user_watches");
      spdlog::error(
          "cannot watch {}: the inotify watch limit is reached (fs.inotify.max_user_watches = {}). "
          "Raise it: sysctl -w fs.inotify.max_user_watches={} (and put it in /etc/sysctl.d/ to "
          "keep it). Until then, directories without a watch are rescanned every {} s",
          shown_path(dir), limit, limit > 0 ? limit * 2 : 524288,
          options_.rescan_unwatched.count() / 1000.0);
    }
  } else {
    spdlog::error("cannot watch {}: {}; it is rescanned every {} s instead", shown_path(dir),
                  std::strerror(error), options_.rescan_unwatched.count() / 1000.0);
  }
  return false;
}

void Watcher::unwatch_within(const std::string& dir) {
  const auto drop = [this](std::map<std::string, int>::iterator it) {
    if (auto w = wd_path_.find(it->second); w != wd_path_.end() && w->second == it->first) {
      source_->remove_watch(it->second);
      wd_path_.erase(w);
    }
    return path_wd_.erase(it);
  };
  if (auto it = path_wd_.find(dir); it != path_wd_.end()) drop(it);
  const std::string prefix = dir == "/" ? dir : dir + "/";
  for (auto it = path_wd_.lower_bound(prefix);
       it != path_wd_.end() && it->first.compare(0, prefix.size(), prefix) == 0;) {
    it = drop(it);
  }
  for (auto it = unwatched_.begin(); it != unwatched_.end();) {
    it = path_within(*it, dir) ? unwatched_.erase(it) : std::next(it);
  }
}

void Watcher::rename_watches(const std::string& from, const std::string& to) {
  std::vector<std::pair<std::string, int>> moved;
  if (auto it = path_wd_.find(from); it != path_wd_.end()) {
    moved.emplace_back(it->first, it->second);
    path_wd_.erase(it);
  }
  const std::string prefix = from == "/" ? from : from + "/";
  for (auto it = path_wd_.lower_bound(prefix);
       it != path_wd_.end() && it->first.compare(0, prefix.size(), prefix) == 0;) {
    moved.emplace_back(it->first, it->second);
    it = path_wd_.erase(it);
  }
  for (auto& [path, wd] : moved) {
    std::string renamed = to + path.substr(from.size());
    if (auto w = wd_path_.find(wd); w != wd_path_.end()) w->second = renamed;
    path_wd_[std::move(renamed)] = wd;
  }
  for (auto it = unwatched_.begin(); it != unwatched_.end();) {
    it = path_within(*it, from) ? unwatched_.erase(it) : std::next(it);  // the scan retries them
  }
}

}  // namespace tw::monitor
