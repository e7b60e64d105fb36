#include "monitor/archive_view.hpp"

#include <unistd.h>

#include <spdlog/spdlog.h>

#include "common/escape.hpp"
#include "common/time.hpp"

namespace tw::monitor {
ArchiveView::ArchiveView(std::string backup_root) : backup_root_(std::move(backup_root)) {}
ArchiveView::~ArchiveView() = default;

archive::Store* ArchiveView::store() {
  if (store_) return &*store_;
  // The archivers create the archive on first use; until then it holds nothing.
  auto opened = archive::Store::open(backup_root_, archive::Store::Mode::ReadOnly);
  if (!opened) return nullptr;
  store_.emplace(std::move(opened.value()));
  return &*store_;
}

std::optional<archive::Version> ArchiveView::live(std::string_view path) {
  archive::Store* s = store();
  if (s == nullptr) return std::nullopt;
  auto versions = s->versions(path);
  if (!versions) {
    spdlog::warn("archive: {}; treating {} as not archived", versions.error(), shown_path(path));
    return std::nullopt;
  }
  if (versions->empty() || !versions->back().exists()) return std::nullopt;
  return std::move(versions->back());
}

std::vector<std::string> ArchiveView::archived_within(std::string_view dir) {
  archive::Store* s = store();
  if (s == nullptr) return {};
  auto paths = s->paths_within(dir);
  if (!paths) {
    spdlog::warn("archive: {}; cannot list what is archived beneath {}", paths.error(),
                 shown_path(dir));
    return {};
  }
  return std::move(paths.value());
}

Difference compare(const std::string& path, const struct stat& st, const archive::Version* live) {
  if (live == nullptr) return Difference::Content;
  if ((live->mode & S_IFMT) != (st.st_mode & S_IFMT)) return Difference::Content;
  if (S_ISREG(st.st_mode)) {
    if (live->size != static_cast<std::uint64_t>(st.st_size) || live->mtime_ns != timespec_ns(st.st_mtim)) {
      return Difference::Content;
    }
  } else if (S_ISLNK(st.st_mode)) {
    if (live->size != static_cast<std::uint64_t>(st.st_size) || live->mtime_ns != timespec_ns(st.st_mtim)) {
      return Difference::Content;
    }
    std::string target(live->link_target.size() + 1, '\0');
    const ssize_t n = ::readlink(path.c_str(), target.data(), target.size());
    if (n < 0 || static_cast<std::size_t>(n) != live->link_target.size() ||
        target.compare(0, static_cast<std::size_t>(n), live->link_target) != 0) {
      return Difference::Content;
    }
  } else if (S_ISDIR(st.st_mode)) {
    // An entry created, removed or renamed changed it: the archiver's look at the
    // directory records its new mtime and tombstones what is no longer in it.
    if (live->mtime_ns != timespec_ns(st.st_mtim)) return Difference::Metadata;
  }
  if (live->mode != st.st_mode || live->uid != st.st_uid || live->gid != st.st_gid) {
    return Difference::Metadata;
  }
  return Difference::None;
}

}  // namespace tw::monitor
