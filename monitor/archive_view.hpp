// What the archive under backup_root already holds, as the monitor needs it: the live
// (latest, not deleted) version of a path, and the archived paths beneath a directory.
// Read-only: it opens the archive with Store::Mode::ReadOnly and never writes. An archive
// that does not exist yet holds nothing. One thread at a time (like Store).
#pragma once

#include <sys/stat.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "archive/store.hpp"

namespace tw::monitor {

class ArchiveView {
 public:
  explicit ArchiveView(std::string backup_root);
  ArchiveView(const ArchiveView&) = delete;
  ArchiveView& operator=(const ArchiveView&) = delete;
  ~ArchiveView();

  // The latest version of `path` when it is not a tombstone. A history that cannot be read
  // counts as nothing archived (the path is then queued again, which is safe).
  std::optional<archive::Version> live(std::string_view path);
  // Every archived path at or beneath `dir`, sorted (parents before children).
  std::vector<std::string> archived_within(std::string_view dir);

 private:
  archive::Store* store();

  const std::string backup_root_;
  std::optional<archive::Store> store_;
};

using archive::Difference;

// How `path`, whose lstat is `st`, differs from `live` (nullptr: nothing archived), as the
// archiver decides it (archive::difference): a scan queues only what the archiver would
// record. The content of a file is judged by size and mtime; a link's target is read.
Difference compare(const std::string& path, const struct stat& st, const archive::Version* live);

}  // namespace tw::monitor
