// Store::restore: puts archived versions back on disk (FORMAT.md, "Restore").
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "archiver/paths.hpp"
#include "archiver/store_impl.hpp"
#include "archiver/timefmt.hpp"
#include "common/paths.hpp"
#include "common/time.hpp"

namespace tw::archive {
namespace {

// The latest version archived at or before `at_limit` (versions are in time order).
const Version* pick(const std::vector<Version>& versions, std::int64_t at_limit) {
  const Version* best = nullptr;
  for (const auto& v : versions) {
    if (v.archived_at_ns <= at_limit) best = &v;
  }
  return best;
}

bool valid_component(const std::string& c) {
  return !c.empty() && c != "." && c != ".." && c.find('/') == std::string::npos &&
         c.find('\0') == std::string::npos;
}

Error sys_error(std::string_view what, const std::string& target) {
  return Error{fmt::format("{} {}: {}", what, shown_path(target), std::strerror(errno))};
}

// Writes versions into directories, always relative to an open directory descriptor and
// never following a symlink below the destination root.
class Restorer {
 public:
  Restorer(Store::Impl& store, const RestoreOptions& options, RestoreReport& report)
      : store_(store), options_(options), report_(report) {}

  void sync_each(bool on) { sync_each_ = on; }

  // Places file or symlink version `v` as `name` inside `dir_fd`. `target` names it in
  // messages.
  Status place(int dir_fd, const std::string& name, const Version& v, const std::string& target) {
    struct stat existing {};
    if (::fstatat(dir_fd, name.c_str(), &existing, AT_SYMLINK_NOFOLLOW) == 0) {
      if (S_ISDIR(existing.st_mode)) {
        return Error{fmt::format("{} exists and is a directory", shown_path(target))};
      }
      if (!options_.overwrite) {
        return Error{fmt::format("{} exists (use --force to overwrite)", shown_path(target))};
      }
    }
    const std::string temp = fmt::format(".tw-restore-{}-{}", ::getpid(), ++counter_);
    struct Cleanup {
      int dir;
      const std::string& name;
      bool armed = true;
      ~Cleanup() {
        if (armed) ::unlinkat(dir, name.c_str(), 0);
      }
    } cleanup{dir_fd, temp};
    const struct timespec times[2] = {ns_timespec(v.mtime_ns), ns_timespec(v.mtime_ns)};
    if (v.is_symlink()) {
      if (::symlinkat(v.link_target.c_str(), dir_fd, temp.c_str()) != 0) {
        cleanup.armed = false;
        return sys_error("cannot create link", target);
      }
      if (options_.restore_owner) {
        // Through a descriptor of the link just made: a name swapped meanwhile for a hard
        // link to another file must not have that file change owner.
        UniqueFd link(::openat(dir_fd, temp.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
        struct stat made {};
        if (!link || ::fstat(link.get(), &made) != 0 || !S_ISLNK(made.st_mode)) {
          return Error{
              fmt::format("{} was replaced while it was being restored", shown_path(target))};
        }
        if (::fchownat(link.get(), "", v.uid, v.gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0) {
          return sys_error("cannot set the owner of", target);
        }
      }
      ::utimensat(dir_fd, temp.c_str(), times, AT_SYMLINK_NOFOLLOW);
    } else {
      UniqueFd fd(::openat(dir_fd, temp.c_str(),
                           O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
      if (!fd) {
        cleanup.armed = false;
        return sys_error("cannot create", target);
      }
      auto written = store_.extract(v, fd.get(), true);
      if (!written) return Error{fmt::format("{}: {}", shown_path(target), written.error())};
      if (*written != v.size) {
        return Error{fmt::format("{}: object {} holds {} bytes, the version says {}",
                                 shown_path(target), v.sha256, *written, v.size)};
      }
      if (options_.restore_owner && ::fchown(fd.get(), v.uid, v.gid) != 0) {
        return sys_error("cannot set the owner of", target);
      }
      if (::fchmod(fd.get(), v.mode & 07777) != 0)
        return sys_error("cannot set the mode of", target);
      if (::futimens(fd.get(), times) != 0) return sys_error("cannot set the times of", target);
      // One file alone is synced here; a tree once, at its end (syncfs), which for many
      // small files costs one sync instead of one each.
      if (sync_each_ && ::fsync(fd.get()) != 0) return sys_error("cannot sync", target);
    }
    int renamed = -1;
    if (!options_.overwrite) {
      renamed = ::renameat2(dir_fd, temp.c_str(), dir_fd, name.c_str(), RENAME_NOREPLACE);
      if (renamed != 0 && errno == EEXIST) {
        return Error{fmt::format("{} exists (use --force to overwrite)", shown_path(target))};
      }
    }
    if (renamed != 0 && ::renameat(dir_fd, temp.c_str(), dir_fd, name.c_str()) != 0) {
      return sys_error("cannot rename into", target);
    }
    cleanup.armed = false;
    if (v.is_symlink()) {
      ++report_.symlinks;
    } else {
      ++report_.files;
      report_.bytes += v.size;
    }
    return Ok{};
  }

  Status apply_directory_metadata(int fd, const Version& v, const std::string& target) {
    if (options_.restore_owner && ::fchown(fd, v.uid, v.gid) != 0) {
      return sys_error("cannot set the owner of", target);
    }
    if (::fchmod(fd, v.mode & 07777) != 0) return sys_error("cannot set the mode of", target);
    const struct timespec times[2] = {ns_timespec(v.mtime_ns), ns_timespec(v.mtime_ns)};
    if (::futimens(fd, times) != 0) return sys_error("cannot set the times of", target);
    return Ok{};
  }

 private:
  Store::Impl& store_;
  bool sync_each_ = true;  // fsync each file placed (false: the caller syncs the tree)
  const RestoreOptions& options_;
  RestoreReport& report_;
  std::uint64_t counter_ = 0;
};

// Why `name` inside `dir_fd` could not be opened as a directory, for a message.
std::string in_the_way(int dir_fd, const std::string& name, const std::string& where) {
  struct stat st {};
  if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
    return fmt::format(
        "{} is a symlink; restore never writes through a link (give the path without links, "
        "as realpath prints it)",
        where);
  }
  return fmt::format("{} is not a directory (a file is in the way)", where);
}

// Opens (creating with `create`) the directories `parts[0..count)` below `root_fd`, never
// following a symlink. A directory made here gets mode 0777 less the umask (as `mkdir -p`);
// `*created_last`, when given, says whether the last one was made here.
Result<UniqueFd> open_below(int root_fd, const std::vector<std::string>& parts, std::size_t count,
                            bool create, const std::string& root_shown,
                            bool* created_last = nullptr) {
  UniqueFd current(::openat(root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!current) return Error{fmt::format("cannot open {}: {}", root_shown, std::strerror(errno))};
  std::string where = root_shown;
  if (created_last != nullptr) *created_last = false;
  for (std::size_t i = 0; i < count; ++i) {
    where += (where.empty() || where.back() != '/' ? "/" : "") + shown_path(parts[i]);
    bool made = false;
    if (create) {
      if (::mkdirat(current.get(), parts[i].c_str(), 0777) == 0) {
        made = true;
      } else if (errno != EEXIST) {
        return Error{fmt::format("cannot create directory {}: {}", where, std::strerror(errno))};
      }
    }
    UniqueFd next(
        ::openat(current.get(), parts[i].c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next) {
      if (errno == ELOOP || errno == ENOTDIR) {
        return Error{in_the_way(current.get(), parts[i], where)};
      }
      return Error{fmt::format("cannot open directory {}: {}", where, std::strerror(errno))};
    }
    if (created_last != nullptr && i + 1 == count) *created_last = made;
    current = std::move(next);
  }
  return current;
}

// Opens directory `dest` for restoring into, without following a link in any component:
// a link at or above the destination is refused, not resolved. Missing directories are
// created when `create`; `*created` says whether `dest` itself was.
Result<UniqueFd> open_destination(const std::string& dest, bool create, bool* created) {
  // Made absolute against the working directory (which has no links) and with "." and
  // ".." taken lexically (absolute_path): every component must be a real directory anyway,
  // so this is what the kernel would resolve.
  std::vector<std::string> parts;
  try {
    parts = components_below(absolute_path(dest).native(), "/");
  } catch (const std::filesystem::filesystem_error& e) {
    return Error{fmt::format("cannot read the working directory: {}", e.code().message())};
  }
  UniqueFd root(::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root) return Error{fmt::format("cannot open /: {}", std::strerror(errno))};
  return open_below(root.get(), parts, parts.size(), create, "/", created);
}

std::string when(const VersionSelector& which, std::int64_t at_limit) {
  if (which.at_ns) return fmt::format("at {}", format_time_ns(at_limit));
  return "at present";
}

}  // namespace

Result<RestoreReport> Store::restore(std::string_view raw, const RestoreOptions& options) const {
  auto normalized = normalize_path(raw);
  if (!normalized) return Error{normalized.error()};
  const std::string& path = *normalized;
  auto history = impl_->read_history(path);
  if (!history) return Error{history.error()};

  std::int64_t at_limit = INT64_MAX;
  const Version* own = nullptr;
  if (options.which.number) {
    for (const auto& v : history->versions) {
      if (v.number == *options.which.number) own = &v;
    }
    if (own == nullptr) {
      return Error{fmt::format("{} has no version {} (it has {})", shown_path(path),
                               *options.which.number, history->versions.size())};
    }
    at_limit = own->archived_at_ns;
  } else {
    if (options.which.at_ns) at_limit = *options.which.at_ns;
    own = pick(history->versions, at_limit);
  }
  std::uint64_t unnamed = 0;  // archived entries whose node lost its name: damage
  auto within = impl_->paths_within(path, &unnamed);
  if (!within) return Error{within.error()};
  const bool has_descendants = within->size() > 1;

  if (own != nullptr && !own->exists()) {
    if (options.which.number) {
      return Error{fmt::format("version {} of {} records that it stopped existing there ({})",
                               own->number, shown_path(path),
                               own->op == Op::Delete ? "deleted" : "moved away")};
    }
    const std::string gone =
        fmt::format("{} at {}{}", own->op == Op::Delete ? "deleted" : "moved away",
                    format_time_ns(own->archived_at_ns),
                    own->moved_to.empty() ? "" : " to " + shown_path(own->moved_to));
    if (!options.which.at_ns) {
      return Error{
          fmt::format("{} no longer exists ({}); pick an earlier one with --at or --version",
                      shown_path(path), gone)};
    }
    return Error{fmt::format("{} did not exist {} ({})", shown_path(path),
                             when(options.which, at_limit), gone)};
  }
  if (own == nullptr && !has_descendants) {
    if (history->versions.empty())
      return Error{fmt::format("{} is not in the archive", shown_path(path))};
    return Error{fmt::format("{} did not exist {} (first archived at {})", shown_path(path),
                             when(options.which, at_limit),
                             format_time_ns(history->versions.front().archived_at_ns))};
  }

  RestoreReport report;
  if (unnamed > 0) {
    report.problems.push_back(fmt::format(
        "{} archived entr{} beneath {} lost {} node and cannot be restored (timewarp verify "
        "names the damage)",
        unnamed, unnamed == 1 ? "y" : "ies", shown_path(path), unnamed == 1 ? "its" : "their"));
  }
  Restorer restorer(*impl_, options, report);
  const std::string dest = options.destination.empty() ? path : options.destination;

  if (own != nullptr && !own->is_directory()) {
    // One file or link.
    std::string parent = parent_path(dest);
    std::string name = base_name(dest);
    // An existing directory (not a link to one), or a name ending in '/', receives the file
    // under its own name.
    if (!options.destination.empty() &&
        (dest.back() == '/' || open_destination(dest, false, nullptr))) {
      parent = dest;
      name = base_name(path);
    }
    if (name.empty() || name == "." || name == "..") {
      return Error{fmt::format("cannot restore a file to {}", shown_path(dest))};
    }
    auto dir = open_destination(parent, true, nullptr);
    if (!dir) return Error{dir.error()};
    while (parent.size() > 1 && parent.back() == '/') parent.pop_back();
    report.destination = parent == "/" ? "/" + name : parent + "/" + name;
    if (auto placed = restorer.place(dir->get(), name, *own, report.destination); !placed) {
      return Error{placed.error()};
    }
    return report;
  }

  // A directory and everything archived beneath it, synced as a whole at the end.
  restorer.sync_each(false);
  struct Entry {
    std::vector<std::string> parts;
    Version version;
  };
  std::vector<Entry> entries;
  for (const auto& p : *within) {
    if (impl_->cancelled()) return Error{"cancelled"};
    const Version* chosen = nullptr;
    Result<History> h = p == path ? Result<History>(*history) : impl_->read_history(p);
    if (!h) {
      report.problems.push_back(h.error());
      continue;
    }
    if (p == path) {
      chosen = own;
    } else {
      chosen = pick(h->versions, at_limit);
    }
    if (chosen == nullptr) continue;  // not archived yet then, or a parent known only by name
    if (!chosen->exists()) {
      ++report.skipped;
      continue;
    }
    auto parts = components_below(p, path);
    if (!std::all_of(parts.begin(), parts.end(), valid_component)) {
      report.problems.push_back(fmt::format("refusing unsafe archived path {}", shown_path(p)));
      continue;
    }
    entries.push_back(Entry{std::move(parts), *chosen});
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.parts < b.parts; });

  report.destination = dest;
  bool created_root = false;
  auto root_fd = open_destination(dest, true, &created_root);
  if (!root_fd) return Error{root_fd.error()};
  const std::string root_shown = shown_path(dest);

  // Directories whose archived metadata is applied: those made here, and with --force
  // those that were already there (never those of an existing destination otherwise).
  std::vector<const Entry*> directories;
  // The folder the last entry went into, kept open: entries are sorted, so most share it.
  std::vector<std::string> open_parts;
  UniqueFd open_parent;
  for (const auto& entry : entries) {
    if (impl_->cancelled()) return Error{"cancelled"};
    std::string target = dest;
    for (const auto& part : entry.parts) target += "/" + part;
    if (entry.parts.empty()) {  // PATH itself, a directory version
      if (created_root || options.overwrite) directories.push_back(&entry);
      ++report.directories;
      continue;
    }
    if (!open_parent || !std::equal(open_parts.begin(), open_parts.end(), entry.parts.begin(),
                                    entry.parts.end() - 1)) {
      open_parent.reset();
      auto parent =
          open_below(root_fd->get(), entry.parts, entry.parts.size() - 1, true, root_shown);
      if (!parent) {
        report.problems.push_back(parent.error());
        continue;
      }
      open_parent = std::move(*parent);
      open_parts.assign(entry.parts.begin(), entry.parts.end() - 1);
    }
    const int parent = open_parent.get();
    const std::string& name = entry.parts.back();
    if (entry.version.is_directory()) {
      bool made = ::mkdirat(parent, name.c_str(), 0700) == 0;
      if (!made) {
        struct stat existing {};
        if (errno != EEXIST ||
            ::fstatat(parent, name.c_str(), &existing, AT_SYMLINK_NOFOLLOW) != 0 ||
            !S_ISDIR(existing.st_mode)) {
          report.problems.push_back(fmt::format(
              "cannot create directory {}: a file or link is in the way", shown_path(target)));
          continue;
        }
      }
      if (made || options.overwrite) directories.push_back(&entry);
      ++report.directories;
      continue;
    }
    if (auto placed = restorer.place(parent, name, entry.version, target); !placed) {
      report.problems.push_back(placed.error());
    }
  }
  // Directory metadata last, deepest first, so restoring entries does not change it again.
  for (auto it = directories.rbegin(); it != directories.rend(); ++it) {
    const Entry& entry = **it;
    std::string target = dest;
    for (const auto& part : entry.parts) target += "/" + part;
    auto fd = open_below(root_fd->get(), entry.parts, entry.parts.size(), false, root_shown);
    if (!fd) {
      report.problems.push_back(fd.error());
      continue;
    }
    if (auto applied = restorer.apply_directory_metadata(fd->get(), entry.version, target);
        !applied) {
      report.problems.push_back(applied.error());
    }
  }
  // Everything written beneath the destination is durable before the restore reports.
  if (::syncfs(root_fd->get()) != 0) {
    report.problems.push_back(fmt::format("cannot sync {}: {}", root_shown, std::strerror(errno)));
  }
  if (report.files + report.symlinks + report.directories == 0 && report.problems.empty()) {
    return Error{fmt::format("nothing under {} existed {}", shown_path(path),
                             when(options.which, at_limit))};
  }
  return report;
}

}  // namespace tw::archive
