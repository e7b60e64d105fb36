// Restore over the layout seam: puts archived versions back on disk (archive/restore.hpp;
// FORMAT.md, "Restore").
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

#include "archive/paths.hpp"
#include "archive/restore.hpp"
#include "archive/timefmt.hpp"
#include "common/escape.hpp"
#include "common/fd.hpp"
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
  Restorer(Layout& layout, const RestoreOptions& options, RestoreReport& report)
      : layout_(layout), options_(options), report_(report) {}

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
    Defer cleanup([dir_fd, &temp] { ::unlinkat(dir_fd, temp.c_str(), 0); });
    const Status made = v.is_symlink() ? make_link(dir_fd, temp, v, target)
                                       : make_file(dir_fd, temp, v, target, cleanup);
    if (!made) return made;
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
    cleanup.dismiss();
    if (v.is_symlink()) {
      ++report_.symlinks;
    } else {
      ++report_.files;
      report_.bytes += v.size;
    }
    return Ok{};
  }

  // The link of version `v` as `temp` inside `dir_fd`, with its owner and times.
  Status make_link(int dir_fd, const std::string& temp, const Version& v,
                   const std::string& target) {
    if (::symlinkat(v.link_target.c_str(), dir_fd, temp.c_str()) != 0) {
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
    const struct timespec times[2] = {ns_timespec(v.mtime_ns), ns_timespec(v.mtime_ns)};
    ::utimensat(dir_fd, temp.c_str(), times, AT_SYMLINK_NOFOLLOW);
    return Ok{};
  }

  // The file of version `v` as `temp` inside `dir_fd`: content, owner, mode, times (and
  // synced when each file is). A `temp` that could not be made is not removed.
  template <class Cleanup>
  Status make_file(int dir_fd, const std::string& temp, const Version& v, const std::string& target,
                   Cleanup& cleanup) {
    UniqueFd fd(
        ::openat(dir_fd, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd) {
      cleanup.dismiss();
      return sys_error("cannot create", target);
    }
    auto written = layout_.extract(v, fd.get(), true);
    if (!written) return Error{fmt::format("{}: {}", shown_path(target), written.error())};
    if (*written != v.size) {
      return Error{fmt::format("{}: content {} holds {} bytes, the version says {}",
                               shown_path(target), v.sha256, *written, v.size)};
    }
    if (options_.restore_owner && ::fchown(fd.get(), v.uid, v.gid) != 0) {
      return sys_error("cannot set the owner of", target);
    }
    if (::fchmod(fd.get(), v.mode & 07777) != 0) return sys_error("cannot set the mode of", target);
    const struct timespec times[2] = {ns_timespec(v.mtime_ns), ns_timespec(v.mtime_ns)};
    if (::futimens(fd.get(), times) != 0) return sys_error("cannot set the times of", target);
    // One file alone is synced here; a tree once, at its end (syncfs), which for many small
    // files costs one sync instead of one each.
    if (sync_each_ && ::fsync(fd.get()) != 0) return sys_error("cannot sync", target);
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
  Layout& layout_;
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

// The version of PATH a restore starts from, and the time limit for what lies beneath it.
struct Chosen {
  const Version* own = nullptr;  // nullptr: PATH had no version then
  std::int64_t at_limit = INT64_MAX;
};

Result<Chosen> choose(const std::string& path, const std::vector<Version>& history,
                      const VersionSelector& which) {
  Chosen chosen;
  if (which.number) {
    for (const auto& v : history) {
      if (v.number == *which.number) chosen.own = &v;
    }
    if (chosen.own == nullptr) {
      return Error{fmt::format("{} has no version {} (it has {})", shown_path(path), *which.number,
                               history.size())};
    }
    chosen.at_limit = chosen.own->archived_at_ns;
    return chosen;
  }
  if (which.at_ns) chosen.at_limit = *which.at_ns;
  chosen.own = pick(history, chosen.at_limit);
  return chosen;
}

// Why nothing can be restored from PATH at the chosen time, if so.
std::optional<Error> nothing_there(const std::string& path, const std::vector<Version>& history,
                                   const Chosen& chosen, const VersionSelector& which,
                                   bool has_descendants) {
  const Version* own = chosen.own;
  if (own != nullptr && !own->exists()) {
    const char* how = own->op == Op::Delete ? "deleted" : "moved away";
    if (which.number) {
      return Error{fmt::format("version {} of {} records that it stopped existing there ({})",
                               own->number, shown_path(path), how)};
    }
    const std::string gone =
        fmt::format("{} at {}{}", how, format_time_ns(own->archived_at_ns),
                    own->moved_to.empty() ? "" : " to " + shown_path(own->moved_to));
    if (!which.at_ns) {
      return Error{
          fmt::format("{} no longer exists ({}); pick an earlier one with --at or --version",
                      shown_path(path), gone)};
    }
    return Error{fmt::format("{} did not exist {} ({})", shown_path(path),
                             when(which, chosen.at_limit), gone)};
  }
  if (own != nullptr || has_descendants) return std::nullopt;
  if (history.empty()) return Error{fmt::format("{} is not in the archive", shown_path(path))};
  return Error{fmt::format("{} did not exist {} (first archived at {})", shown_path(path),
                           when(which, chosen.at_limit),
                           format_time_ns(history.front().archived_at_ns))};
}

// One file or link: into the destination's folder, or into an existing folder (not a link
// to one) or a destination ending in '/', under its own name.
Result<RestoreReport> restore_one(Layout& layout, const std::string& path, const Version& own,
                                  const RestoreOptions& options, RestoreReport report) {
  const std::string dest = options.destination.empty() ? path : options.destination;
  std::string parent = parent_path(dest);
  std::string name = base_name(dest);
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
  Restorer restorer(layout, options, report);
  if (auto placed = restorer.place(dir->get(), name, own, report.destination); !placed) {
    return Error{placed.error()};
  }
  return report;
}

// An entry of a tree to restore: its components below PATH, and its version.
struct Entry {
  std::vector<std::string> parts;
  Version version;
};

// The version of each path of `within` at the chosen time, sorted by components. Paths
// that did not exist then are counted as skipped; histories that cannot be read and names
// that cannot be a file's are problems.
Result<std::vector<Entry>> tree_entries(Layout& layout, const std::string& path,
                                        const std::vector<std::string>& within,
                                        const Chosen& chosen,
                                        const std::function<bool()>& cancelled,
                                        RestoreReport& report) {
  std::vector<Entry> entries;
  for (const auto& p : within) {
    if (cancelled && cancelled()) return Error{"cancelled"};
    std::optional<Version> version;
    if (p == path) {
      if (chosen.own != nullptr) version = *chosen.own;
    } else {
      auto history = layout.versions(p);
      if (!history) {
        report.problems.push_back(history.error());
        continue;
      }
      if (const Version* v = pick(*history, chosen.at_limit)) version = *v;
    }
    if (!version) continue;  // not archived yet then, or a parent known only by name
    if (!version->exists()) {
      ++report.skipped;
      continue;
    }
    auto parts = components_below(p, path);
    if (!std::all_of(parts.begin(), parts.end(), valid_component)) {
      report.problems.push_back(fmt::format("refusing unsafe archived path {}", shown_path(p)));
      continue;
    }
    entries.push_back(Entry{std::move(parts), std::move(*version)});
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.parts < b.parts; });
  return entries;
}

// Writes a tree's entries below the open destination `root_fd`; returns the directories
// whose archived metadata is to be applied: those made here, and with --force those that
// were already there (never those of an existing destination otherwise).
class TreeWriter {
 public:
  TreeWriter(Restorer& restorer, const RestoreOptions& options, int root_fd, std::string dest,
             RestoreReport& report)
      : restorer_(restorer),
        options_(options),
        root_fd_(root_fd),
        dest_(std::move(dest)),
        root_shown_(shown_path(dest_)),
        report_(report) {}

  void write(const Entry& entry, bool created_root) {
    if (entry.parts.empty()) {  // PATH itself, a directory version
      if (created_root || options_.overwrite) directories_.push_back(&entry);
      ++report_.directories;
      return;
    }
    const int parent = parent_of(entry);
    if (parent < 0) return;
    const std::string& name = entry.parts.back();
    if (!entry.version.is_directory()) {
      if (auto placed = restorer_.place(parent, name, entry.version, target(entry)); !placed) {
        report_.problems.push_back(placed.error());
      }
      return;
    }
    const bool made = ::mkdirat(parent, name.c_str(), 0700) == 0;
    struct stat existing {};
    if (!made &&
        (errno != EEXIST || ::fstatat(parent, name.c_str(), &existing, AT_SYMLINK_NOFOLLOW) != 0 ||
         !S_ISDIR(existing.st_mode))) {
      report_.problems.push_back(fmt::format(
          "cannot create directory {}: a file or link is in the way", shown_path(target(entry))));
      return;
    }
    if (made || options_.overwrite) directories_.push_back(&entry);
    ++report_.directories;
  }

  // Directory metadata last, deepest first, so restoring entries does not change it again.
  void finish_directories() {
    for (auto it = directories_.rbegin(); it != directories_.rend(); ++it) {
      const Entry& entry = **it;
      auto fd = open_below(root_fd_, entry.parts, entry.parts.size(), false, root_shown_);
      if (!fd) {
        report_.problems.push_back(fd.error());
        continue;
      }
      if (auto applied =
              restorer_.apply_directory_metadata(fd->get(), entry.version, target(entry));
          !applied) {
        report_.problems.push_back(applied.error());
      }
    }
  }

 private:
  std::string target(const Entry& entry) const {
    std::string out = dest_;
    for (const auto& part : entry.parts) out += "/" + part;
    return out;
  }

  // The folder `entry` goes into, kept open: entries are sorted, so most share it. -1 when
  // it cannot be opened (a problem is recorded).
  int parent_of(const Entry& entry) {
    if (open_parent_ && std::equal(open_parts_.begin(), open_parts_.end(), entry.parts.begin(),
                                   entry.parts.end() - 1)) {
      return open_parent_.get();
    }
    open_parent_.reset();
    auto parent = open_below(root_fd_, entry.parts, entry.parts.size() - 1, true, root_shown_);
    if (!parent) {
      report_.problems.push_back(parent.error());
      return -1;
    }
    open_parent_ = std::move(*parent);
    open_parts_.assign(entry.parts.begin(), entry.parts.end() - 1);
    return open_parent_.get();
  }

  Restorer& restorer_;
  const RestoreOptions& options_;
  int root_fd_;
  std::string dest_;
  std::string root_shown_;
  RestoreReport& report_;
  std::vector<const Entry*> directories_;
  std::vector<std::string> open_parts_;
  UniqueFd open_parent_;
};

// A directory and everything archived beneath it, synced as a whole at the end.
Result<RestoreReport> restore_tree(Layout& layout, const std::string& path,
                                   const std::vector<std::string>& within, const Chosen& chosen,
                                   const RestoreOptions& options,
                                   const std::function<bool()>& cancelled, RestoreReport report) {
  auto entries = tree_entries(layout, path, within, chosen, cancelled, report);
  if (!entries) return Error{entries.error()};
  const std::string dest = options.destination.empty() ? path : options.destination;
  report.destination = dest;
  bool created_root = false;
  auto root_fd = open_destination(dest, true, &created_root);
  if (!root_fd) return Error{root_fd.error()};
  Restorer restorer(layout, options, report);
  restorer.sync_each(false);
  TreeWriter writer(restorer, options, root_fd->get(), dest, report);
  for (const auto& entry : *entries) {
    if (cancelled && cancelled()) return Error{"cancelled"};
    writer.write(entry, created_root);
  }
  writer.finish_directories();
  // Everything written beneath the destination is durable before the restore reports.
  if (::syncfs(root_fd->get()) != 0) {
    report.problems.push_back(
        fmt::format("cannot sync {}: {}", shown_path(dest), std::strerror(errno)));
  }
  if (report.files + report.symlinks + report.directories == 0 && report.problems.empty()) {
    return Error{fmt::format("nothing under {} existed {}", shown_path(path),
                             when(options.which, chosen.at_limit))};
  }
  return report;
}

}  // namespace

Result<RestoreReport> restore_archived(Layout& layout, std::string_view raw,
                                       const RestoreOptions& options,
                                       const std::function<bool()>& cancelled) {
  auto normalized = normalize_path(raw);
  if (!normalized) return Error{normalized.error()};
  const std::string& path = *normalized;
  auto history = layout.versions(path);
  if (!history) return Error{history.error()};
  auto chosen = choose(path, *history, options.which);
  if (!chosen) return Error{chosen.error()};
  std::uint64_t unreachable = 0;  // archived entries the layout cannot reach: damage
  auto within = layout.paths_within(path, &unreachable);
  if (!within) return Error{within.error()};
  if (auto none = nothing_there(path, *history, *chosen, options.which, within->size() > 1)) {
    return *none;
  }
  RestoreReport report;
  if (unreachable > 0) {
    report.problems.push_back(fmt::format(
        "{} archived entr{} beneath {} cannot be reached and {} not restored (timewarp verify "
        "names the damage)",
        unreachable, unreachable == 1 ? "y" : "ies", shown_path(path),
        unreachable == 1 ? "was" : "were"));
  }
  if (chosen->own != nullptr && !chosen->own->is_directory()) {
    return restore_one(layout, path, *chosen->own, options, std::move(report));
  }
  return restore_tree(layout, path, *within, *chosen, options, cancelled, std::move(report));
}

}  // namespace tw::archive
