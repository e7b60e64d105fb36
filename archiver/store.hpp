// The archive under a backup root (format in archiver/FORMAT.md): file contents stored
// once each, zstd-compressed and named by their SHA-256, and one version history per
// archived path. Everything needed to list, restore and verify lives under the root.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/filters.hpp"
#include "common/protocol.hpp"
#include "common/result.hpp"

namespace tw::archive {

// One entry of a path's history. Paths and link targets are raw bytes.
struct Version {
  std::uint64_t number = 0;         // 1, 2, 3... per path
  std::int64_t archived_at_ns = 0;  // when it was archived (UTC, ns since the epoch)
  Op op = Op::Update;
  std::uint64_t size = 0;  // file bytes, or link target length
  std::string sha256;      // hex digest of the content; empty when none
  std::uint32_t mode = 0;  // st_mode with the type bits; 0 for tombstones
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  std::int64_t mtime_ns = 0;
  std::uint64_t dev = 0;    // st_dev and st_ino of what was archived (0: not recorded, as
  std::uint64_t ino = 0;    // in tombstones and in versions written before they were)
  std::string link_target;  // symlinks only
  std::string moved_from;   // a MOVE version at the new path: the old path
  std::string moved_to;     // a MOVE tombstone at the old path: the new path
  // Format 2: the blobs a regular file's content is made of, in order (their SHA-256s; one,
  // the content's own, for a file of one chunk; none when empty). Format 1: always empty.
  std::vector<std::string> chunks;
  // Format 2, a regular file whose content was read for this version: every change queued
  // as an item with an id up to this one was made before the read began (the horizon of
  // the request that read it; FORMAT.md, "Reads that answer later requests"). 0: unknown.
  std::int64_t read_after = 0;

  // False for tombstones: a DELETE, or the MOVE recorded at the path a file left.
  bool exists() const { return op != Op::Delete && !(op == Op::Move && !moved_to.empty()); }
  bool is_file() const;
  bool is_symlink() const;
  bool is_directory() const;
};

// How what a path holds now differs from its live archived version: the one definition of
// "unchanged against the archive". The monitor's scans decide with it what to queue, and
// the archiver what content it may take over and whether a new version is due, so a scan
// and the archiver never disagree about a path.
enum class Difference {
  None,      // unchanged: nothing to archive
  Metadata,  // only permission bits, owner or group, or a directory's mtime: a STAT
  Content,   // nothing live, another type, or what the file or link holds: an UPDATE
};

// `live` is the archive's latest version of the path, nullptr when there is none or it is
// a tombstone; `now` describes the disk (version_of_stat, with the link target of a link;
// with the digest of a file only when its content was read). Compared, in this order:
//   - nothing live, or another type (S_IFMT): Content;
//   - a regular file: size and mtime (to the nanosecond), and the SHA-256 when `now` has
//     one: Content when any differs (without a digest, same size and mtime stand for the
//     same content);
//   - a symlink: size, mtime and target: Content when any differs;
//   - a directory: mtime (it changes whenever an entry is created, removed or renamed):
//     Metadata; its size is not compared;
//   - every type: permission bits (and set-id, sticky), uid, gid: Metadata.
// Never compared: device and inode (a file put back in place is unchanged), ctime, atime,
// the op and the archive time.
Difference difference(const Version* live, const Version& now);

// What `difference` reads of an lstat result, as a version (op UPDATE): type and mode,
// owner, mtime, device and inode, and the size of a file or link (a directory's is 0). The
// link target and the digest are the caller's to add.
Version version_of_stat(const struct stat& st);

// What one archive operation did: COMPLETE with the bytes it added to the archive, or a
// failure to answer FAILED RETRY / FAILED PERMANENT with `message` (valid UTF-8).
struct ArchiveResult {
  Outcome outcome = Outcome::Complete;
  std::uint64_t bytes_added = 0;
  std::string message;
};

// Points where tests and the archiver process step into a Store's work.
struct StoreHooks {
  // Runs between reading a file's content and checking that it did not change meanwhile.
  std::function<void()> after_content_read;
  // Runs before every durable write step (temporary file, fsync, rename, mkdir...).
  std::function<void(std::string_view step)> before_write_step;
  // Polled during long work; when it returns true the operation stops with FAILED RETRY.
  std::function<bool()> cancelled;
  // Tests only: asked before a pack sync and a group's catalog commit (format 2); when
  // it returns true, that step fails (as an I/O error would) instead of being done. May be
  // called from the store's sync thread.
  std::function<bool(std::string_view step)> fail_write_step;
};

// How new content objects are compressed. Neither setting changes an object's name (the
// SHA-256 of the uncompressed content) or what restore and verify read.
struct CompressionOptions {
  int level = 2;    // zstd level: 2 is about 1.5 times as fast as zstd's default 3 for
                    // ~1-3% more bytes (format 2 compresses a file under 256 KiB at 3 at
                    // least); negative levels are faster still, 19 stores the least
  int threads = 0;  // threads compressing one large file (4 MiB or more): 0 = one per
                    // online core, at most 4; 1 = only the caller's thread, which also
                    // compresses every smaller file
};

// The on-disk formats (archiver/FORMAT.md). An archive keeps the format it was made in;
// a new one is made in kNewArchiveFormat unless asked otherwise.
enum class ArchiveFormat { V1 = 1, V2 = 2 };
inline constexpr ArchiveFormat kNewArchiveFormat = ArchiveFormat::V2;

// Which version a restore picks: by number, the latest at or before a time, or (neither
// set) the latest.
struct VersionSelector {
  std::optional<std::uint64_t> number;
  std::optional<std::int64_t> at_ns;
};

struct RestoreOptions {
  VersionSelector which;
  std::string destination;     // empty: the original path
  bool overwrite = false;      // replace existing files (never a directory by a file)
  bool restore_owner = false;  // chown to the archived uid/gid (needs root)
};

struct RestoreReport {
  std::string destination;  // where PATH itself went
  std::uint64_t files = 0;
  std::uint64_t symlinks = 0;
  std::uint64_t directories = 0;
  std::uint64_t bytes = 0;
  std::uint64_t skipped = 0;          // paths that did not exist at the chosen time
  std::vector<std::string> problems;  // entries not restored, one line each (escaped)
};

struct VerifyReport {
  std::uint64_t objects = 0;
  std::uint64_t histories = 0;
  std::uint64_t versions = 0;
  std::uint64_t unreferenced_objects = 0;  // left by interrupted work; harmless
  std::vector<std::string> problems;       // one line each: damaged objects and who uses them
  bool ok() const { return problems.empty(); }
};

// An open archive. Several Store objects, in one process or several, may work on the
// same root at once: writes are crash-safe and each path's history is changed under an
// flock. One Store object must be used by one thread at a time.
class Store {
 public:
  enum class Mode { ReadOnly, ReadWrite };

  // Opens the archive at `backup_root`, of whichever format it is. ReadWrite creates it,
  // in `new_format`, when absent; ReadOnly refuses a directory that is not an archive.
  // `compression` applies to new content.
  static Result<Store> open(const std::string& backup_root, Mode mode, StoreHooks hooks = {},
                            CompressionOptions compression = {},
                            ArchiveFormat new_format = kNewArchiveFormat);
  // The format of this archive.
  ArchiveFormat format() const;

  Store(Store&&) noexcept;
  Store& operator=(Store&&) noexcept;
  ~Store();

  // The requests of the line protocol. Paths are raw, absolute. None is replayed as
  // an edit: each makes the archive's latest state of its path (and of what is archived
  // beneath it) equal to the disk now; the op only hints at what changed (DESIGN.md,
  // "Convergence"). STAT takes the latest content over when size and mtime are unchanged;
  // MOVE lets the history follow the file when the disk confirms the rename.
  // `order` is the request's place in the master queue, when it came with one: a regular
  // file whose content is read records its horizon, and a later request whose changes
  // were all queued before that read began takes that content over when the file's stat
  // is unchanged, without reading it again (FORMAT.md, "Reads that answer later requests").
  ArchiveResult update(std::string_view path, QueueOrder order = {});
  ArchiveResult stat(std::string_view path, QueueOrder order = {});
  ArchiveResult remove(std::string_view path, QueueOrder order = {});  // DELETE
  ArchiveResult move(std::string_view from, std::string_view to, QueueOrder order = {});
  // SCAN: the directory as UPDATE does, then each of its entries but its subdirectories as
  // STAT does (a file whose size and mtime match its latest version is not read).
  // Entries `filter` excludes, or finds too big, are left alone (nullptr: none is). A path
  // that is no longer a directory is reconciled as UPDATE does. An entry that cannot be
  // archived does not stop the others; the answer then names it.
  ArchiveResult scan(std::string_view path, QueueOrder order = {}, const Filter* filter = nullptr);

  // Group commit (format 2; on format 1 every version is durable when its request
  // returns, and these change nothing; FORMAT.md, "Format 2", Group commit). After
  // begin_group(), the requests' versions are staged in the open group, their paths
  // locked. close_group() closes it: a thread of the Store syncs its pack while the
  // requests of the next group run; advance() then commits it to the catalog (seen by all,
  // its paths unlocked), and once the catalog's journal is synced, `on_durable` runs on
  // that thread with Ok, or with the error that lost the group (its requests, and those of
  // every group after it not yet committed, are to be answered FAILED RETRY). Groups are
  // committed and their `on_durable` run in the order closed. A request answered COMPLETE
  // in a group may be reported as such only from its `on_durable`. Reads through this
  // Store see every staged version.
  void begin_group();
  void close_group(std::function<void(const Status&)> on_durable);
  // Commits the closed groups whose pack is synced; call it when group_fd() is readable
  // and between requests.
  void advance();
  // Readable when a closed group's sync or answers are done (-1 before the first group).
  int group_fd() const;
  // Whether the thread of the groups is busy with a closed group (its sync, its journal
  // sync or its answers). A group closed meanwhile would only wait behind that work, so
  // the caller may keep it open for more requests until group_fd() says the work is done.
  bool syncing() const;
  // Closes the open group and waits until every group is committed, durable and its
  // `on_durable` run: Ok, or why the last group was lost.
  Status flush();
  // How many versions wait to be committed, and the content bytes staged in the open group.
  std::size_t staged_versions() const;
  std::uint64_t staged_bytes() const;
  // For a quiet archive (no request for a while, nothing staged): folds the catalog's
  // journal into it and empties it, if no other process is busy with the catalog. True when
  // done or nothing to do (format 1, read-only); false when to be tried again later.
  Result<bool> fold_journal();

  // The history of `path`, oldest first; empty when it was never archived.
  Result<std::vector<Version>> versions(std::string_view path) const;
  // Every archived path at or beneath `dir` (including ones known only as parents), sorted.
  Result<std::vector<std::string>> paths_within(std::string_view dir) const;
  // The archived paths directly beneath `dir`, sorted, leaving out those whose last
  // component is in `except` (raw names; for instance a directory's entries on disk, so
  // only what the disk no longer holds is read and returned). Reads one directory of the
  // archive, not the subtree.
  Result<std::vector<std::string>> children(std::string_view dir,
                                            const std::vector<std::string>& except = {}) const;

  // Restores `path` (a file, a link, or a directory with its whole subtree). Fails when
  // nothing could be restored; entries that failed inside a directory are listed in the
  // report's problems.
  Result<RestoreReport> restore(std::string_view path, const RestoreOptions& options) const;

  // Re-reads every object and history. `progress` (optional) receives a line now and then.
  VerifyReport verify(const std::function<void(std::string_view)>& progress = {}) const;

  const std::string& root() const;

  struct Impl;

 private:
  explicit Store(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tw::archive
