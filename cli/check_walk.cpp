#include "cli/check_walk.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <numeric>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "archive/paths.hpp"
#include "archive/sha256.hpp"
#include "archive/timefmt.hpp"
#include "cli/subcommand.hpp"
#include "common/dirs.hpp"
#include "common/escape.hpp"
#include "common/fd.hpp"
#include "common/paths.hpp"
#include "common/time.hpp"

namespace tw::cli {
namespace {

constexpr std::string_view kNone = "-";

std::string_view type_name(std::uint32_t mode) { return file_type_name(mode); }

// The types the archive keeps; everything else on disk is skipped.
bool kept_type(mode_t mode) { return S_ISREG(mode) || S_ISDIR(mode) || S_ISLNK(mode); }

std::string error_text(int error) { return escape_bytes(std::strerror(error)); }

// The target of the symlink `name` relative to `dir_fd`, or an errno.
std::optional<std::string> read_link(int dir_fd, const std::string& name, int& error) {
  std::string target(256, '\0');
  while (true) {
    const ssize_t n = ::readlinkat(dir_fd, name.c_str(), target.data(), target.size());
    if (n < 0) {
      error = errno;
      return std::nullopt;
    }
    if (static_cast<std::size_t>(n) < target.size()) {
      target.resize(static_cast<std::size_t>(n));
      return target;
    }
    target.resize(target.size() * 2);
  }
}

}  // namespace

std::string_view to_string(DiffKind kind) {
  static constexpr std::array<std::string_view, kDiffKinds> kNames = {
      "missing", "extra", "type", "size",    "mtime",
      "mode",    "owner", "link", "content", "unreadable"};
  return kNames[static_cast<std::size_t>(kind)];
}

TreeCheck::TreeCheck(const archive::Store& store, const Filter& filter, CheckOptions options,
                     Report report)
    : store_(store),
      filter_(filter),
      options_(options),
      report_(std::move(report)) {}

std::uint64_t TreeCheck::total() const {
  return std::accumulate(counts_.begin(), counts_.end(), std::uint64_t{0});
}

void TreeCheck::emit(DiffKind kind, const std::string& path, std::string archive,
                     std::string disk) {
  ++counts_[static_cast<std::size_t>(kind)];
  report_(Difference{kind, path, std::move(archive), std::move(disk)});
}

bool TreeCheck::live_version(const std::string& path, std::optional<archive::Version>& live) {
  live.reset();
  auto versions = store_.versions(path);
  if (!versions) {
    emit(DiffKind::Unreadable, path, escape_bytes(versions.error()), std::string(kNone));
    return false;
  }
  if (!versions->empty() && versions->back().exists()) live = std::move(versions->back());
  return true;
}

void TreeCheck::check(const std::string& path) {
  if (filter_.excluded(path)) return;
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) {
      report_gone(path);
    } else {
      emit(DiffKind::Unreadable, path, std::string(kNone), error_text(errno));
    }
    return;
  }
  check_present(AT_FDCWD, path, path, st);
}

void TreeCheck::check_present(int dir_fd, const std::string& name, const std::string& path,
                              const struct stat& st) {
  if (!kept_type(st.st_mode) || filter_.too_big(st)) return;
  ++compared_;
  std::optional<archive::Version> live;
  if (live_version(path, live)) {
    if (live) {
      compare(dir_fd, name, path, st, *live);
    } else {
      emit(DiffKind::Missing, path, std::string(kNone), std::string(type_name(st.st_mode)));
    }
  }
  if (!S_ISDIR(st.st_mode)) {
    report_gone_beneath(path);
    return;
  }
  UniqueFd fd(::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) {
    emit(DiffKind::Unreadable, path, std::string(kNone), error_text(errno));
    return;
  }
  walk(fd.get(), path);
}

void TreeCheck::compare(int dir_fd, const std::string& name, const std::string& path,
                        const struct stat& st, const archive::Version& live) {
  if ((live.mode & S_IFMT) != (st.st_mode & S_IFMT)) {
    emit(DiffKind::Type, path, std::string(type_name(live.mode)),
         std::string(type_name(st.st_mode)));
    return;
  }
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (S_ISREG(st.st_mode) && live.size != size) {
    emit(DiffKind::Size, path, std::to_string(live.size), std::to_string(size));
  }
  if (live.mtime_ns != timespec_ns(st.st_mtim)) {
    emit(DiffKind::Mtime, path, archive::format_time_ns(live.mtime_ns),
         archive::format_time_ns(timespec_ns(st.st_mtim)));
  }
  if ((live.mode & 07777) != (st.st_mode & 07777)) {
    emit(DiffKind::Mode, path, fmt::format("{:04o}", live.mode & 07777),
         fmt::format("{:04o}", st.st_mode & 07777));
  }
  if (live.uid != st.st_uid || live.gid != st.st_gid) {
    emit(DiffKind::Owner, path, fmt::format("{}:{}", live.uid, live.gid),
         fmt::format("{}:{}", st.st_uid, st.st_gid));
  }
  if (S_ISLNK(st.st_mode)) {
    int error = 0;
    const auto target = read_link(dir_fd, name, error);
    if (!target) {
      emit(DiffKind::Unreadable, path, std::string(kNone), error_text(error));
    } else if (*target != live.link_target) {
      emit(DiffKind::Link, path, escape_bytes(live.link_target), escape_bytes(*target));
    }
  }
  if (S_ISREG(st.st_mode) && options_.content && live.size == size) {
    compare_content(dir_fd, name, path, live);
  }
}

void TreeCheck::compare_content(int dir_fd, const std::string& name, const std::string& path,
                                const archive::Version& live) {
  constexpr int kFlags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC;
  UniqueFd fd(::openat(dir_fd, name.c_str(), kFlags | O_NOATIME));
  if (!fd && errno == EPERM) fd = UniqueFd(::openat(dir_fd, name.c_str(), kFlags));
  if (!fd) {
    emit(DiffKind::Unreadable, path, std::string(kNone), error_text(errno));
    return;
  }
  archive::Sha256 sha;
  std::vector<char> buffer(256 * 1024);
  while (true) {
    const ssize_t n = ::read(fd.get(), buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      emit(DiffKind::Unreadable, path, std::string(kNone), error_text(errno));
      return;
    }
    if (n == 0) break;
    sha.update(buffer.data(), static_cast<std::size_t>(n));
  }
  const std::string digest = sha.hex_digest();
  if (digest != live.sha256) {
    emit(DiffKind::Content, path, live.sha256.empty() ? std::string(kNone) : live.sha256, digest);
  }
}

void TreeCheck::walk(int fd, const std::string& path) {
  const auto names = directory_names(fd);
  if (!names) {
    // Nothing is known of the entries: none is reported missing or extra.
    emit(DiffKind::Unreadable, path, std::string(kNone), error_text(names.failure().value));
    return;
  }
  for (const auto& name : *names) {
    const std::string child = join_path(path, name);
    if (filter_.excluded(child)) continue;
    struct stat st {};
    if (::fstatat(fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) {
        report_gone(child);  // removed while we looked
      } else {
        emit(DiffKind::Unreadable, child, std::string(kNone), error_text(errno));
      }
      continue;
    }
    check_present(fd, name, child, st);
  }

  // What the archive holds beneath `path` and the disk does not.
  auto gone = store_.children(path, *names);
  if (!gone) {
    emit(DiffKind::Unreadable, path, escape_bytes(gone.error()), std::string(kNone));
    return;
  }
  for (const auto& child : *gone) {
    if (!filter_.excluded(child)) report_gone(child);
  }
}

void TreeCheck::report_gone(const std::string& path) {
  std::optional<archive::Version> live;
  if (live_version(path, live) && live) {
    emit(DiffKind::Extra, path, std::string(type_name(live->mode)), std::string(kNone));
  }
  report_gone_beneath(path);
}

void TreeCheck::report_gone_beneath(const std::string& path) {
  auto children = store_.children(path);
  if (!children) {
    emit(DiffKind::Unreadable, path, escape_bytes(children.error()), std::string(kNone));
    return;
  }
  for (const auto& child : *children) {
    if (!filter_.excluded(child)) report_gone(child);
  }
}

}  // namespace tw::cli
