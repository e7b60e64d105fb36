#include "monitor/scanner.hpp"

#include <dirent.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include <spdlog/spdlog.h>

#include "common/escape.hpp"

namespace tw::monitor {
namespace {

bool archivable(const struct stat& st) {
  return S_ISREG(st.st_mode) || S_ISLNK(st.st_mode) || S_ISDIR(st.st_mode);
}

// `path` beneath `from` rewritten to lie beneath `to`.
std::string rebase(const std::string& path, const std::string& from, const std::string& to) {
  if (from == to) return path;
  return to + path.substr(from == "/" ? 0 : from.size());
}

}  // namespace

void describe(Change& change, const struct stat& st) {
  change.size = static_cast<std::int64_t>(st.st_size);
  change.mtime = static_cast<double>(st.st_mtim.tv_sec) + st.st_mtim.tv_nsec / 1e9;
}

ScanStats Scanner::scan(const ScanRequest& request, const DirectoryHook& on_directory,
                        std::vector<Change>& out, const std::atomic<bool>* cancel) {
  ScanStats stats;
  const std::string archived_as = request.archived_as.empty() ? request.dir : request.archived_as;
  std::vector<std::string> unreadable;

  const auto consider = [&](const std::string& path, const struct stat& st) {
    ++stats.entries;
    if (!archivable(st) || filter_.too_big(st)) return;
    if (request.pending && (request.pending->of(path) & PendingSet::kUpdate)) return;
    const auto live = archive_.live(rebase(path, request.dir, archived_as));
    const Difference d = compare(path, st, live ? &*live : nullptr);
    if (d == Difference::None) return;
    Change c = d == Difference::Content ? Change::update(path, S_ISDIR(st.st_mode))
                                        : Change::stat(path, S_ISDIR(st.st_mode));
    describe(c, st);
    out.push_back(std::move(c));
    ++stats.changes;
  };

  struct stat top {};
  if (::lstat(request.dir.c_str(), &top) != 0 || filter_.excluded(request.dir)) return stats;
  if (S_ISLNK(top.st_mode) && filter_.root_of(request.dir) == request.dir) {
    // A source directory given as a link is followed, once; the link itself is not ours.
    if (::stat(request.dir.c_str(), &top) != 0 || !S_ISDIR(top.st_mode)) return stats;
  } else if (!S_ISDIR(top.st_mode)) {
    return stats;
  } else {
    consider(request.dir, top);
  }
  std::vector<std::string> pending_dirs{request.dir};
  while (!pending_dirs.empty()) {
    if (cancel && cancel->load()) return stats;
    const std::string dir = std::move(pending_dirs.back());
    pending_dirs.pop_back();
    if (on_directory) on_directory(dir);
    std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), ::closedir);
    if (!d) {
      if (errno != ENOENT && errno != ENOTDIR) {
        spdlog::warn("cannot list {}: {}", escape_bytes(dir), std::strerror(errno));
        ++stats.unreadable;
        unreadable.push_back(dir);
      }
      continue;
    }
    std::vector<std::string> subdirs;
    while (const dirent* entry = ::readdir(d.get())) {
      const std::string_view name = entry->d_name;
      if (name == "." || name == "..") continue;
      std::string path = join_path(dir, name);
      if (filter_.excluded(path)) continue;
      struct stat st {};
      if (::lstat(path.c_str(), &st) != 0) continue;  // gone meanwhile: its event follows
      consider(path, st);
      if (S_ISDIR(st.st_mode)) subdirs.push_back(std::move(path));
    }
    // Depth first, in listing order.
    for (auto it = subdirs.rbegin(); it != subdirs.rend(); ++it)
      pending_dirs.push_back(std::move(*it));
  }

  if (!request.find_deletes) return stats;
  // Archived paths that are gone: one DELETE for the topmost of each gone subtree (the
  // archiver's DELETE tombstones everything beneath it).
  std::string deleted_dir;
  for (const auto& path : archive_.archived_within(request.dir)) {
    if (cancel && cancel->load()) return stats;
    if (!deleted_dir.empty() && path_within(path, deleted_dir)) continue;
    bool behind_unreadable = false;
    for (const auto& u : unreadable) behind_unreadable = behind_unreadable || path_within(path, u);
    if (behind_unreadable || filter_.excluded(path)) continue;
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0 || (errno != ENOENT && errno != ENOTDIR)) continue;
    if (request.pending && (request.pending->of(path) & PendingSet::kDelete)) continue;
    const auto live = archive_.live(path);
    if (!live) continue;
    out.push_back(Change::remove(path, live->is_directory()));
    ++stats.changes;
    deleted_dir = path;
  }
  return stats;
}

}  // namespace tw::monitor
