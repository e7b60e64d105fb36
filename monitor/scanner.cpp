#include "monitor/scanner.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

#include "common/escape.hpp"
#include "common/time.hpp"

namespace tw::monitor {
namespace {

bool archivable(const struct stat& st) {
  return S_ISREG(st.st_mode) || S_ISLNK(st.st_mode) || S_ISDIR(st.st_mode);
}

// `path` beneath `from` rewritten to lie beneath `to`.
std::string rebase(const std::string& path, const std::string& from, const std::string& to) {
  if (from == to) return path;
  if (from == "/") return to == "/" ? path : to + path;
  return to + path.substr(from.size());
}

// Entries looked at per step of a whole scan: between two, the caller checks for a stop.
constexpr std::size_t kWholeScanStep = 256;

// A directory's changed entries go as one SCAN when at least a quarter of its entries
// (subdirectories aside) differ, and two or more do, or one does beside the directory's
// own change; not beyond the request's ScanLimits, past which its changes go out as items
// (one SCAN runs on one archiver; items spread over them all). A file of kScanFileLimit
// bytes or more keeps an item of its own.
constexpr std::size_t kScanShare = 4;
constexpr std::int64_t kScanFileLimit = std::int64_t{1} << 20;

}  // namespace

void describe(Change& change, const struct stat& st) {
  change.size = static_cast<std::int64_t>(st.st_size);
  change.mtime = timespec_seconds(st.st_mtim);
}

ScanWalk::ScanWalk(const Filter& filter, ArchiveView& archive, ScanRequest request)
    : filter_(filter), archive_(archive), request_([&] {
        if (request.archived_as.empty()) request.archived_as = request.dir;
        return std::move(request);
      }()) {}

void ScanWalk::push(std::vector<Change>& out, Change change) {
  change.priority = request_.priority;
  out.push_back(std::move(change));
  ++stats_.changes;
}

void ScanWalk::consider(const std::string& path, const struct stat& st, std::vector<Change>& out) {
  ++stats_.entries;
  if (!archivable(st) || filter_.too_big(st)) return;
  if (request_.pending && (request_.pending->of(path) & PendingSet::kUpdate)) return;
  const auto live =
      unarchived_ ? std::nullopt : archive_.live(rebase(path, request_.dir, request_.archived_as));
  const Difference d = compare(path, st, live ? &*live : nullptr);
  if (d == Difference::None) return;
  Change c = d == Difference::Content ? Change::update(path, S_ISDIR(st.st_mode))
                                      : Change::stat(path, S_ISDIR(st.st_mode));
  describe(c, st);
  push(out, std::move(c));
}

void ScanWalk::start() {
  phase_ = Phase::Done;
  struct stat top {};
  // A top that is a link (even a source directory replaced by one) is not entered: the
  // source directories were resolved when the monitor started.
  if (::lstat(request_.dir.c_str(), &top) != 0 || !S_ISDIR(top.st_mode) ||
      filter_.excluded(request_.dir)) {
    return;
  }
  unarchived_ = !archive_.live(request_.archived_as) &&
                archive_.archived_within(request_.archived_as).empty();
  to_list_.push_back({request_.dir, 0, found_++, 0});  // considered as the walk enters it
  phase_ = Phase::Walk;
}

void ScanWalk::leave(std::uint64_t id, std::vector<Change>& out) {
  while (id != 0) {
    const auto it = entered_.find(id);
    if (--it->second.open > 0) return;
    if (it->second.on_leave) out.push_back(std::move(*it->second.on_leave));
    id = it->second.parent;
    entered_.erase(it);
  }
}

bool ScanWalk::walk_one(const DirectoryHook& on_directory, std::vector<Change>& out) {
  while (!listing_) {
    if (to_list_.empty()) return false;
    std::pop_heap(to_list_.begin(), to_list_.end(), ListFirst{});
    ToList next = std::move(to_list_.back());
    to_list_.pop_back();
    listing_dir_ = std::move(next.dir);
    listing_id_ = next.found;
    if (on_directory) on_directory(listing_dir_);
    // A directory is looked at as the walk enters it, once its watch is in place (the
    // hook adds it), not when its parent was listed: an entry made in it between the two
    // changes its times, and no event would tell of that. What it finds is queued when
    // the walk leaves the directory (the header says why).
    struct stat st {};
    std::vector<Change> own;
    if (::lstat(listing_dir_.c_str(), &st) == 0) consider(listing_dir_, st, own);
    Entered& entered = entered_[listing_id_];
    entered.parent = next.parent;
    if (!own.empty()) entered.on_leave = std::move(own.front());
    listing_.reset(::opendir(listing_dir_.c_str()));
    if (!listing_) {
      if (errno != ENOENT && errno != ENOTDIR) {
        spdlog::warn("cannot list {}: {}", shown_path(listing_dir_), std::strerror(errno));
        ++stats_.unreadable;
        unreadable_.push_back(listing_dir_);
      }
      leave(listing_id_, out);
      return true;
    }
  }
  const dirent* entry = ::readdir(listing_.get());
  if (entry == nullptr) {
    listing_.reset();
    leave_listing(out);
    entered_[listing_id_].open += subdirs_.size();
    for (auto& [dir, size] : subdirs_) {
      to_list_.push_back({std::move(dir), size, found_++, listing_id_});
      std::push_heap(to_list_.begin(), to_list_.end(), ListFirst{});
    }
    subdirs_.clear();
    leave(listing_id_, out);
    return true;
  }
  const std::string_view name = entry->d_name;
  if (name == "." || name == "..") return true;
  std::string path = join_path(listing_dir_, name);
  if (filter_.excluded(path)) return true;
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return true;  // gone meanwhile: its event follows
  if (S_ISDIR(st.st_mode)) {
    subdirs_.emplace_back(std::move(path), static_cast<std::int64_t>(st.st_size));
    return true;
  }
  if (!request_.scans || entries_streamed_ ||
      (S_ISREG(st.st_mode) && st.st_size >= kScanFileLimit)) {
    consider(path, st, out);
    return true;
  }
  ++entry_files_;
  const std::size_t before = entry_changes_.size();
  consider(path, st, entry_changes_);
  if (entry_changes_.size() > before) entry_bytes_ += entry_changes_.back().size.value_or(0);
  if (entry_files_ > request_.limits.max_entries ||
      entry_bytes_ > request_.limits.max_bytes) {  // too much for one SCAN
    for (auto& c : entry_changes_) out.push_back(std::move(c));
    entry_changes_.clear();
    entries_streamed_ = true;
  }
  return true;
}

void ScanWalk::leave_listing(std::vector<Change>& out) {
  const std::size_t n = entry_changes_.size();
  Entered& here = entered_[listing_id_];  // its own change, queued after its subdirectories
  const bool own = here.on_leave.has_value();
  if (!entries_streamed_ && n > 0 && n * kScanShare >= entry_files_ && (n >= 2 || own)) {
    Change scan = Change::scan(listing_dir_, n + (own ? 1 : 0));
    scan.priority = request_.priority;
    scan.size = entry_bytes_;
    if (own) scan.mtime = here.on_leave->mtime;
    stats_.changes -= n + (own ? 1 : 0) - 1;
    here.on_leave = std::move(scan);
  } else {
    for (auto& c : entry_changes_) out.push_back(std::move(c));
  }
  entry_changes_.clear();
  entry_files_ = 0;
  entry_bytes_ = 0;
  entries_streamed_ = false;
}

// An archived path that is gone: one DELETE for the topmost of each gone subtree (the
// archiver's DELETE tombstones everything beneath it), under its name beneath `dir`.
void ScanWalk::check_deleted(const std::string& archived, std::vector<Change>& out) {
  const std::string path = rebase(archived, request_.archived_as, request_.dir);
  if (!deleted_dir_.empty() && path_within(path, deleted_dir_)) return;
  for (const auto& u : unreadable_) {
    if (path_within(path, u)) return;
  }
  if (filter_.excluded(path)) return;
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 || (errno != ENOENT && errno != ENOTDIR)) return;
  if (request_.pending && (request_.pending->of(path) & PendingSet::kDelete)) return;
  auto live = archive_.live(archived);
  if (!live && archived != path) live = archive_.live(path);
  if (!live) return;
  push(out, Change::remove(path, live->is_directory()));
  deleted_dir_ = path;
}

bool ScanWalk::step(std::size_t budget, const DirectoryHook& on_directory,
                    std::vector<Change>& out) {
  for (std::size_t done = 0; done < budget && phase_ != Phase::Done; ++done) {
    switch (phase_) {
      case Phase::Start:
        start();
        break;
      case Phase::Walk:
        if (!walk_one(on_directory, out)) {
          const bool deletes = request_.find_deletes && !unarchived_;
          phase_ = deletes ? Phase::Deletes : Phase::Done;
          if (deletes) archived_ = archive_.archived_within(request_.archived_as);
        }
        break;
      case Phase::Deletes:
        if (archived_next_ == archived_.size()) {
          phase_ = Phase::Done;
          archived_.clear();
        } else {
          check_deleted(archived_[archived_next_++], out);
        }
        break;
      case Phase::Done:
        break;
    }
  }
  return phase_ == Phase::Done;
}

ScanStats Scanner::scan(const ScanRequest& request, const DirectoryHook& on_directory,
                        std::vector<Change>& out, const std::atomic<bool>* cancel) {
  ScanWalk walk(filter_, archive_, request);
  while (!walk.step(kWholeScanStep, on_directory, out)) {
    if (cancel && cancel->load()) break;
  }
  return walk.stats();
}

}  // namespace tw::monitor
