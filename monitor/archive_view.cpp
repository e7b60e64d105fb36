#include "monitor/archive_view.hpp"

#include <unistd.h>

#include <spdlog/spdlog.h>

#include "common/escape.hpp"

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
    spdlog::warn("reading the archive failed ({}); treating {} as not archived", versions.error(),
                 shown_path(path));
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
    spdlog::warn("reading the archive failed ({}); cannot list what is archived beneath {}",
                 paths.error(), shown_path(dir));
    return {};
  }
  return std::move(paths.value());
}

Difference compare(const std::string& path, const struct stat& st, const archive::Version* live) {
  archive::Version now = archive::version_of_stat(st);
  if (S_ISLNK(st.st_mode) && live != nullptr && live->is_symlink()) {
    // One byte more than the archived target: a longer one is seen to differ.
    now.link_target.assign(live->link_target.size() + 1, '\0');
    const ssize_t n = ::readlink(path.c_str(), now.link_target.data(), now.link_target.size());
    if (n < 0) return Difference::Content;
    now.link_target.resize(static_cast<std::size_t>(n));
  }
  return archive::difference(live, now);
}

}  // namespace tw::monitor
