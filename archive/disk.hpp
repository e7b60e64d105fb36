// Crash-safe writes under the backup root: every file is written to a temporary file in
// <root>/tmp, fsynced, renamed into place and its directory fsynced; new directories are
// fsynced into their parents. Internal to the archive library. One DiskWriter belongs to
// one thread at a time; several writers (threads or processes) may share one root.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "archive/expected.hpp"
#include "archive/file_out.hpp"
#include "archive/sha256.hpp"
#include "common/fd.hpp"

namespace tw::archive {

// The archive is private whatever the umask of the process that writes it (FORMAT.md,
// "Layout"): every folder it makes is its owner's only, and so is every file.
inline constexpr mode_t kDirMode = 0700;
inline constexpr mode_t kFileMode = 0600;

// Writes all of `data` to `fd`, retrying partial writes and EINTR. Returns 0 or an errno.
int write_all(int fd, const void* data, std::size_t size);
// Writes all of `data` at `offset` of `fd` (pwrite), as write_all does.
int pwrite_all(int fd, const void* data, std::size_t size, std::uint64_t offset);
// Writes `first` then `second` to `fd`, in one writev where the kernel takes it all.
int write_all(int fd, std::span<const char> first, std::span<const char> second);
// Content being written back out (restore) or only checked (verify): every byte is
// hashed; written to `fd` unless it is -1 (archive/file_out.hpp: through the page cache,
// then direct past the first 4 MiB of a large file); with `sparse`, a run of zeros is
// skipped with a seek (a hole), and the file is truncated to its length at the end. Its
// failures are RETRY faults in its own words ("write error: ..."): the caller says what it
// was writing.
class ContentSink {
 public:
  ContentSink(int fd, bool sparse) : fd_(fd), sparse_(sparse), out_(fd) {}
  Done write(std::string_view data);
  // The bytes written, once the file has its length and the content hashes to `sha256`;
  // else the failure ("content checksum mismatch ...").
  Expected<std::uint64_t> finish(std::string_view sha256);

 private:
  int fd_;
  bool sparse_;
  std::uint64_t total_ = 0;
  FileOut out_;
  Sha256 sha_;
};

// Reads up to `size` bytes, retrying EINTR. Returns the count, or -errno.
long read_some(int fd, void* data, std::size_t size);
// The whole content of a small file, or an errno.
Expected<std::string> read_small_file(const std::string& path, std::size_t limit = 64 << 20);
// True when lstat finds something at `path`.
bool path_exists(const std::string& path);

class DiskWriter {
 public:
  using StepHook = std::function<void(std::string_view step)>;

  using FailHook = std::function<bool(std::string_view step)>;

  DiskWriter(std::string root, StepHook step_hook, FailHook fail_hook = {});
  DiskWriter(const DiskWriter&) = delete;
  DiskWriter& operator=(const DiskWriter&) = delete;

  const std::string& root() const { return root_; }
  // Called before every durable step (tests use it to crash at a chosen point).
  void step(std::string_view name) const;
  // Tests only (StoreHooks::fail_write_step): whether step `name` is to fail.
  bool fails(std::string_view name) const { return fail_hook_ && fail_hook_(name); }

  // A new empty temporary file under <root>/tmp; its path is stored in `temp_path`.
  Expected<UniqueFd> create_temp(std::string& temp_path);
  // fsyncs `fd`, renames `temp_path` to `final_path` and fsyncs the final directory.
  Done commit(int fd, const std::string& temp_path, const std::string& final_path);
  // Atomically replaces `final_path` with `data`. Returns the bytes written.
  Expected<std::uint64_t> write_file(const std::string& final_path, std::string_view data);
  // Creates directory `path` (its parent must exist) and fsyncs the parent; fine if present.
  Done make_dir(const std::string& path);
  // Creates an empty file (a marker) if absent, and fsyncs its directory when it was new.
  Done make_marker(const std::string& path);
  // Renames `from` to `to` in the same directory without syncing it (a marker finished:
  // if a power cut loses the rename, the marker under its first name still counts).
  Done rename_unsynced(const std::string& from, const std::string& to);
  Done sync_dir(const std::string& dir) const;

  // Removes temporary files left in <root>/tmp by processes that no longer run.
  void remove_stale_temps() const;

 private:
  std::string root_;
  StepHook step_hook_;
  FailHook fail_hook_;
  std::uint64_t counter_ = 0;
};

}  // namespace tw::archive
