// Restore's writing side (archive/restore_writer.hpp): versions placed below the
// destination without following a link there.
#include "archive/restore_writer.hpp"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "archive/paths.hpp"
#include "archive/restore_pool.hpp"
#include "common/escape.hpp"
#include "common/paths.hpp"
#include "common/time.hpp"

namespace tw::archive {
namespace {

Fault sys_fault(std::string_view what, const std::string& target) {
  return permanent(fmt::format("{} {}: {}", what, shown_path(target), std::strerror(errno)));
}

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

// Why `name` could not be placed inside `dir_fd`: something has that name already.
Fault exists(int dir_fd, const std::string& name, const std::string& target) {
  struct stat existing {};
  if (::fstatat(dir_fd, name.c_str(), &existing, AT_SYMLINK_NOFOLLOW) == 0 &&
      S_ISDIR(existing.st_mode)) {
    return permanent(fmt::format("{} exists and is a directory", shown_path(target)));
  }
  return permanent(fmt::format("{} exists (use --force to overwrite)", shown_path(target)));
}

// Gives the unnamed file open as `fd` the name `name` inside `dir_fd`: 0, or the errno.
// linkat never replaces a name. Through the descriptor itself (AT_EMPTY_PATH, which some
// kernels allow only with CAP_DAC_READ_SEARCH), else through its /proc name (our own
// descriptor; not a link anyone else could have planted). ENOENT: neither works here.
int link_unnamed(int fd, int dir_fd, const std::string& name) {
  static std::atomic<bool> by_descriptor{true};
  if (by_descriptor && ::linkat(fd, "", dir_fd, name.c_str(), AT_EMPTY_PATH) == 0) return 0;
  if (by_descriptor && errno != ENOENT) return errno;
  by_descriptor = false;
  const std::string proc = fmt::format("/proc/self/fd/{}", fd);
  if (::linkat(AT_FDCWD, proc.c_str(), dir_fd, name.c_str(), AT_SYMLINK_FOLLOW) == 0) return 0;
  return errno;
}

}  // namespace

// --- One version ------------------------------------------------------------------------

Done Restorer::place(int dir_fd, const std::string& name, const Version& v,
                     const std::string& target) {
  if (!options_.overwrite && !v.is_symlink()) {
    TRY_ASSIGN(const bool placed, place_unnamed(dir_fd, name, v, target));
    if (placed) return Ok{};
  }
  struct stat existing {};
  const bool replacing = ::fstatat(dir_fd, name.c_str(), &existing, AT_SYMLINK_NOFOLLOW) == 0;
  if (replacing && (S_ISDIR(existing.st_mode) || !options_.overwrite)) {
    return exists(dir_fd, name, target);
  }
  // Unique among the restores of this process and their workers.
  static std::atomic<std::uint64_t> counter{0};
  const std::string temp = fmt::format(".tw-restore-{}-{}", ::getpid(), ++counter);
  Defer cleanup([dir_fd, &temp] { ::unlinkat(dir_fd, temp.c_str(), 0); });
  UniqueFd made;
  TRY(v.is_symlink() ? make_link(dir_fd, temp, v, target)
                     : make_file(dir_fd, temp, v, target, cleanup, made));
  if (made && (replacing || !defer_) && ::fsync(made.get()) != 0) {
    return sys_fault("cannot sync", target);
  }
  int renamed = -1;
  if (!options_.overwrite) {
    renamed = ::renameat2(dir_fd, temp.c_str(), dir_fd, name.c_str(), RENAME_NOREPLACE);
    if (renamed != 0 && errno == EEXIST) return exists(dir_fd, name, target);
  }
  if (renamed != 0 && ::renameat(dir_fd, temp.c_str(), dir_fd, name.c_str()) != 0) {
    return sys_fault("cannot rename into", target);
  }
  cleanup.dismiss();
  counted(v, std::move(made), !replacing, target);
  return Ok{};
}

void Restorer::counted(const Version& v, UniqueFd made, bool hand_over, const std::string& target) {
  if (v.is_symlink()) {
    ++report_.symlinks;
  } else {
    ++report_.files;
    report_.bytes += v.size;
    if (defer_ && hand_over) defer_(std::move(made), target);
  }
  if (options_.on_placed) options_.on_placed(v);
}

Expected<bool> Restorer::place_unnamed(int dir_fd, const std::string& name, const Version& v,
                                       const std::string& target) {
  UniqueFd fd(::openat(dir_fd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600));
  if (!fd) {
    // Filesystems without unnamed files (some network and FUSE ones) take the temporary
    // name instead.
    if (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL) return false;
    return sys_fault("cannot create", target);
  }
  TRY(fill_file(fd.get(), v, target));
  if (!defer_ && ::fsync(fd.get()) != 0) return sys_fault("cannot sync", target);
  if (const int failed = link_unnamed(fd.get(), dir_fd, name); failed != 0) {
    if (failed == EEXIST) return exists(dir_fd, name, target);
    if (failed != ENOENT) {
      errno = failed;
      return sys_fault("cannot link into place", target);
    }
    return false;  // neither way of linking works here: the temporary name does
  }
  counted(v, std::move(fd), true, target);
  return true;
}

Done Restorer::make_link(int dir_fd, const std::string& temp, const Version& v,
                         const std::string& target) {
  if (::symlinkat(v.link_target.c_str(), dir_fd, temp.c_str()) != 0) {
    return sys_fault("cannot create link", target);
  }
  if (options_.restore_owner) {
    // Through a descriptor of the link just made: a name swapped meanwhile for a hard
    // link to another file must not have that file change owner.
    UniqueFd link(::openat(dir_fd, temp.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    struct stat made {};
    if (!link || ::fstat(link.get(), &made) != 0 || !S_ISLNK(made.st_mode)) {
      return permanent(
          fmt::format("{} was replaced while it was being restored", shown_path(target)));
    }
    if (::fchownat(link.get(), "", v.uid, v.gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0) {
      return sys_fault("cannot set the owner of", target);
    }
  }
  const struct timespec times[2] = {ns_timespec(v.mtime_ns), ns_timespec(v.mtime_ns)};
  ::utimensat(dir_fd, temp.c_str(), times, AT_SYMLINK_NOFOLLOW);
  return Ok{};
}

template <class Cleanup>
Done Restorer::make_file(int dir_fd, const std::string& temp, const Version& v,
                         const std::string& target, Cleanup& cleanup, UniqueFd& made) {
  UniqueFd fd(
      ::openat(dir_fd, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) {
    cleanup.dismiss();
    return sys_fault("cannot create", target);
  }
  TRY(fill_file(fd.get(), v, target));
  made = std::move(fd);
  return Ok{};
}

Done Restorer::fill_file(int fd, const Version& v, const std::string& target) {
  auto written = layout_.extract(v, fd, true);
  if (!written) return in_context(shown_path(target), written.fault());
  if (*written != v.size) {
    return permanent(fmt::format("{}: content {} holds {} bytes, the version says {}",
                                 shown_path(target), v.sha256, *written, v.size));
  }
  return apply_metadata(fd, v, options_, target);
}

Done apply_metadata(int fd, const Version& v, const RestoreOptions& options,
                    const std::string& target) {
  if (options.restore_owner && ::fchown(fd, v.uid, v.gid) != 0) {
    return sys_fault("cannot set the owner of", target);
  }
  if (::fchmod(fd, v.mode & 07777) != 0) return sys_fault("cannot set the mode of", target);
  const struct timespec times[2] = {ns_timespec(v.mtime_ns), ns_timespec(v.mtime_ns)};
  if (::futimens(fd, times) != 0) return sys_fault("cannot set the times of", target);
  return Ok{};
}

// --- Directories below the destination --------------------------------------------------

namespace {

std::string shown_below(std::string where, const std::vector<std::string>& parts,
                        std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) {
    where += (where.empty() || where.back() != '/' ? "/" : "") + shown_path(parts[i]);
  }
  return where;
}

// `parts[i]` in `dir_fd` (made first when `create`, mode 0777 less the umask; `*made`
// says whether it was), opened without following a link. A problem names it below
// `root_shown`, put into words only then.
Expected<UniqueFd> open_step(int dir_fd, const std::vector<std::string>& parts, std::size_t i,
                             bool create, const std::string& root_shown, bool* made) {
  const std::string& name = parts[i];
  const auto where = [&] { return shown_below(root_shown, parts, i + 1); };
  *made = false;
  if (create) {
    if (::mkdirat(dir_fd, name.c_str(), 0777) == 0) {
      *made = true;
    } else if (const int err = errno; err != EEXIST) {
      return permanent(fmt::format("cannot create directory {}: {}", where(), std::strerror(err)));
    }
  }
  UniqueFd next(::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!next) {
    const int err = errno;
    if (err == ELOOP || err == ENOTDIR) return permanent(in_the_way(dir_fd, name, where()));
    return permanent(fmt::format("cannot open directory {}: {}", where(), std::strerror(err)));
  }
  return next;
}

}  // namespace

Expected<UniqueFd> open_below(int root_fd, const std::vector<std::string>& parts, std::size_t count,
                              bool create, const std::string& root_shown, bool* created_last) {
  UniqueFd current(::openat(root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!current) {
    return permanent(fmt::format("cannot open {}: {}", root_shown, std::strerror(errno)));
  }
  if (created_last != nullptr) *created_last = false;
  for (std::size_t i = 0; i < count; ++i) {
    bool made = false;
    TRY_ASSIGN(current, open_step(current.get(), parts, i, create, root_shown, &made));
    if (created_last != nullptr && i + 1 == count) *created_last = made;
  }
  return current;
}

Expected<std::shared_ptr<const UniqueFd>> DirChain::open(const std::vector<std::string>& parts,
                                                         std::size_t count, bool create,
                                                         bool* changed) {
  *changed = false;
  if (fds_.empty()) {
    UniqueFd root(::openat(root_fd_, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!root) {
      return permanent(fmt::format("cannot open {}: {}", root_shown_, std::strerror(errno)));
    }
    fds_.push_back(std::make_shared<const UniqueFd>(std::move(root)));
    *changed = true;
  }
  std::size_t shared = 0;
  while (shared < parts_.size() && shared < count && parts_[shared] == parts[shared]) ++shared;
  parts_.resize(shared);
  fds_.resize(shared + 1);
  for (std::size_t i = shared; i < count; ++i) {
    bool made = false;
    auto next = open_step(fds_.back()->get(), parts, i, create, root_shown_, &made);
    if (!next) {
      clear();  // the next path starts again from the destination
      return next.fault();
    }
    parts_.push_back(parts[i]);
    fds_.push_back(std::make_shared<const UniqueFd>(std::move(*next)));
    *changed = true;
  }
  return fds_.back();
}

Expected<UniqueFd> open_destination(const std::string& dest, bool create, bool* created) {
  // Made absolute against the working directory (which has no links) and with "." and
  // ".." taken lexically (absolute_path): every component must be a real directory anyway,
  // so this is what the kernel would resolve.
  std::vector<std::string> parts;
  try {
    parts = components_below(absolute_path(dest).native(), "/");
  } catch (const std::filesystem::filesystem_error& e) {
    return permanent(fmt::format("cannot read the working directory: {}", e.code().message()));
  }
  UniqueFd root(::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root) return permanent(fmt::format("cannot open /: {}", std::strerror(errno)));
  return open_below(root.get(), parts, parts.size(), create, "/", created);
}

// --- A tree -----------------------------------------------------------------------------

TreeWriter::TreeWriter(PlacePool& pool, const RestoreOptions& options, int root_fd,
                       std::string dest, RestoreReport& report)
    : pool_(pool),
      options_(options),
      dest_(std::move(dest)),
      report_(report),
      chain_(root_fd, shown_path(dest_)) {}

void TreeWriter::write(TreeEntry entry, bool created_root) {
  if (entry.parts.empty()) {  // the restored path itself, a directory version
    if (options_.on_placed) options_.on_placed(entry.version);
    auto& metadata = directories_[{}];
    if (created_root || options_.overwrite) metadata = std::move(entry.version);
    ++report_.directories;
    return;
  }
  auto parent = parent_of(entry);
  if (!parent) return;
  const std::string& name = entry.parts.back();
  if (!entry.version.is_directory()) {
    std::string shown = target(entry.parts);
    pool_.place(std::move(parent), std::move(entry), std::move(shown));
    return;
  }
  const bool made = ::mkdirat(parent->get(), name.c_str(), 0700) == 0;
  struct stat existing {};
  if (!made && (errno != EEXIST ||
                ::fstatat(parent->get(), name.c_str(), &existing, AT_SYMLINK_NOFOLLOW) != 0 ||
                !S_ISDIR(existing.st_mode))) {
    report_.problems.push_back(
        fmt::format("cannot create directory {}: a file or link is in the way",
                    shown_path(target(entry.parts))));
    return;
  }
  if (options_.on_placed) options_.on_placed(entry.version);
  auto& metadata = directories_[entry.parts];
  if (made || options_.overwrite) metadata = std::move(entry.version);
  ++report_.directories;
}

void TreeWriter::finish() {
  pool_.wait();
  // Deepest first: the directories are opened down the chain (a folder's metadata is set
  // once everything beneath it is done, so a folder without search permission for the
  // user restoring is never gone through again).
  chain_.clear();
  for (auto it = directories_.rbegin(); it != directories_.rend(); ++it) {
    const auto& [parts, version] = *it;
    if (!version && !pool_.syncs_each()) continue;  // nothing to do to it
    bool changed = false;
    auto open = chain_.open(parts, parts.size(), false, &changed);
    UniqueFd fd(open ? ::fcntl((*open)->get(), F_DUPFD_CLOEXEC, 0) : -1);
    if (!fd) {
      report_.problems.push_back(open ? fmt::format("cannot open directory {}: {}",
                                                    shown_path(target(parts)), std::strerror(errno))
                                      : open.error());
      continue;
    }
    if (version) {
      if (auto applied = apply_metadata(fd.get(), *version, options_, target(parts)); !applied) {
        report_.problems.push_back(applied.error());
      }
    }
    pool_.sync(std::move(fd), target(parts));
  }
  chain_.clear();
}

std::string TreeWriter::target(const std::vector<std::string>& parts) const {
  std::string out = dest_;
  for (const auto& part : parts) out += "/" + part;
  return out;
}

std::shared_ptr<const UniqueFd> TreeWriter::parent_of(const TreeEntry& entry) {
  const std::size_t depth = entry.parts.size() - 1;
  bool changed = false;
  auto parent = chain_.open(entry.parts, depth, true, &changed);
  if (!parent) {
    report_.problems.push_back(parent.error());
    return nullptr;
  }
  // It and every folder above it hold what this restore writes: each is synced at the end
  // (a folder's entry is durable once the folder holding it is synced).
  if (changed) {
    for (std::size_t n = 0; n <= depth; ++n) {
      directories_.try_emplace(
          std::vector<std::string>(entry.parts.begin(), entry.parts.begin() + n));
    }
  }
  return *parent;
}

}  // namespace tw::archive
