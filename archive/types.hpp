// The archive's vocabulary (FORMAT.md): versions and histories, what a request did,
// the options and reports of restore and verify. Shared by the facade (store.hpp), the
// generic algorithms and the layouts beneath them; plain values, safe from any thread.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/protocol.hpp"

namespace tw::archive {

class PackFetcher;  // pack_cache.hpp

// How an archive is opened: ReadWrite creates it when absent and takes new versions.
enum class OpenMode { ReadOnly, ReadWrite };

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

// One path's versions, oldest first.
struct History {
  std::string path;  // raw, canonical
  std::vector<Version> versions;

  const Version* latest() const { return versions.empty() ? nullptr : &versions.back(); }
  // The latest version still present (nullptr when empty or the latest is a tombstone).
  const Version* live() const {
    return versions.empty() || !versions.back().exists() ? nullptr : &versions.back();
  }
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
  // The clock of archive times (ns since the epoch, UTC); unset: the system's. Tests move
  // it over weeks to try retention without waiting for it.
  std::function<std::int64_t()> now;
  // Where a reader's packs come from when the local folder does not hold them (a pack
  // store, pack_cache.hpp): each blob's bytes are fetched before they are read. Unset: the
  // archive's own packs/.
  std::shared_ptr<PackFetcher> packs_from;
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

// Versions of one path that retention removes (forget.hpp): `numbers` sorted, all but the
// latest (`latest`, the history's last number when it was read) unless the whole history
// goes.
struct DroppedVersions {
  std::string path;
  std::vector<std::uint64_t> numbers;
  std::uint64_t latest = 0;
};

// What a purge removed (or would): FORMAT.md, "Retention".
struct PurgeReport {
  std::uint64_t paths = 0;          // paths with a history, at or beneath the one purged
  std::uint64_t versions = 0;       // their versions, all removed
  std::uint64_t content_bytes = 0;  // file bytes of those versions, before dedup
  std::uint64_t blobs = 0;          // blobs they named, condemned
  std::uint64_t packs = 0;          // packs that hold them, to be rewritten
};

// How a collection runs (FORMAT.md, "Collection").
struct CollectOptions {
  // A pack is rewritten when at least this share of its bytes is dead (else only a dead
  // tail is cut off): 0.2 copies at most 4 live bytes for each 1 freed.
  double rewrite_share = 0.2;
  // Collections in a row: the first condemns what no version names, the second removes
  // it (a blob is removed by the collection after the one that condemned it).
  int rounds = 2;
  std::function<bool()> cancelled;  // polled between steps: stops the run
  std::function<void(std::string_view)> progress;
};

// What one collection (or, summed, several) did.
struct CollectReport {
  std::int64_t collection = 0;  // its number in the catalog's log (the last one's)
  std::int64_t started_ns = 0;
  std::int64_t finished_ns = 0;
  std::uint64_t blobs = 0;            // blobs in the catalog when it marked
  std::uint64_t blobs_condemned = 0;  // newly unreferenced: removed next time unless named
  std::uint64_t blobs_swept = 0;      // condemned earlier and still unreferenced: removed
  std::uint64_t bytes_swept = 0;      // their stored bytes
  std::uint64_t packs_deleted = 0;    // no committed blob lived in them
  std::uint64_t packs_rewritten = 0;  // their live blobs copied to a new pack
  std::uint64_t packs_truncated = 0;  // a dead tail cut off
  std::uint64_t packs_busy = 0;       // open in a writer: left for a later collection
  std::uint64_t bytes_copied = 0;     // live bytes the rewrites copied
  std::uint64_t bytes_reclaimed = 0;  // pack bytes given back to the filesystem (net of copies)
  std::uint64_t catalog_bytes_reclaimed = 0;  // the catalog file's shrinking
};

// What one shipping run did (Store::ship; ARCHITECTURE.md, "Object store"): packs copied
// to the pack store (the committed records of one a writer appends to), and the packs
// collection dropped after they were shipped, removed from it.
struct ShipReport {
  std::uint64_t packs_shipped = 0;
  std::uint64_t bytes_shipped = 0;
  std::uint64_t packs_removed = 0;     // from the store: collection dropped them here
  std::uint64_t packs_busy = 0;        // written to still: their committed records shipped
  std::string catalog;                 // the catalog snapshot shipped ("catalog/NAME")
  std::uint64_t catalog_bytes = 0;     // its size in the store (compressed)
  bool catalog_unchanged = false;      // the store's newest snapshot restores the same: none sent
  std::uint64_t packs_given_back = 0;  // then their blocks freed here (keep_local)
  std::uint64_t bytes_given_back = 0;
};

// What the pack store does not hold yet (Store::ship_backlog): the packs on the local disk
// not shipped whole (written to now, sealed since the last run, or cut back by a
// collection since they were shipped), their bytes, when the oldest of them was begun, and
// the packs to remove from the store. A host lost now loses the versions in these packs.
struct ShipBacklog {
  std::uint64_t packs = 0;
  std::uint64_t bytes = 0;
  std::optional<std::int64_t> oldest_ns;  // the oldest unshipped pack's birth (or mtime)
  std::uint64_t removals = 0;
  std::uint64_t shipped_packs = 0;  // in the store and current
  std::uint64_t shipped_bytes = 0;
  std::optional<std::int64_t> last_shipped_ns;  // when the last pack was shipped
  // When the store last got a snapshot of the catalog: what was archived since is lost
  // with the host, though its packs may be in the store.
  std::optional<std::int64_t> catalog_shipped_ns;
};

// What an archive takes on disk and how much of it its versions use (Store::space). A
// blob's stored bytes are its bytes in its pack (compressed), its record header not counted;
// in format 1 every object is one blob and every object counts as used.
struct SpaceReport {
  std::uint64_t content_files = 0;  // packs (format 2) or objects (format 1)
  std::uint64_t content_bytes = 0;  // their bytes
  // Of those, the packs given back to the pack store once shipped (local_packs_size): their
  // files keep their sizes and take nothing on this disk.
  std::uint64_t given_back_files = 0;
  std::uint64_t given_back_bytes = 0;
  std::uint64_t catalog_bytes = 0;  // catalog.db and its journal (format 1: the nodes' files)
  std::uint64_t blobs = 0;          // blobs the catalog lists
  std::uint64_t live_blobs = 0;     // those some version names
  std::uint64_t live_bytes = 0;     // their stored bytes
  // Pack bytes a collection could give back now, about: the packs' bytes less the live
  // blobs' records and the packs' first lines. Only about: a pack a writer is still
  // appending to counts its blobs not yet committed, and a pack of the first release of
  // format 2 has larger record headers than the ones counted.
  std::uint64_t dead_bytes = 0;
  // The blobs that only the versions left out name, and their stored bytes: what removing
  // those versions frees once collected, after deduplication (content a kept version
  // names too stays). Unset when the layout cannot tell (format 1, never thinned).
  std::optional<std::uint64_t> freed_blobs;
  std::optional<std::uint64_t> freed_bytes;

  std::uint64_t total_bytes() const { return content_bytes + catalog_bytes; }
};

// A path's latest version, if any, and whether anything is archived beneath it, as one
// snapshot of the catalog saw them.
struct PathState {
  std::optional<Version> latest;
  bool children = false;
};

// The on-disk formats (archive/FORMAT.md). An archive keeps the format it was made in;
// a new one is made in kNewArchiveFormat unless asked otherwise.
enum class ArchiveFormat { V1 = 1, V2 = 2 };
inline constexpr ArchiveFormat kNewArchiveFormat = ArchiveFormat::V2;

// Which version a restore picks: by number, the latest at or before a time, or (neither
// set) the latest.
struct VersionSelector {
  std::optional<std::uint64_t> number;
  std::optional<std::int64_t> at_ns;
};

// How a tree restore makes what it wrote durable before it reports (FORMAT.md, "Restore"):
// each file and folder synced, or the whole filesystem once at the end (syncfs, which also
// waits for other programs' pending writes there); Auto picks by those pending writes.
enum class Durability { Auto, EachFile, WholeFilesystem };

struct RestoreOptions {
  VersionSelector which;
  std::string destination;     // empty: the original path
  bool overwrite = false;      // replace existing files (never a directory by a file)
  bool restore_owner = false;  // chown to the archived uid/gid (needs root)
  Durability durability = Durability::Auto;
  // Called once for each file, link and directory placed, with its version: for progress
  // only (unset: nothing is called). A tree's files are placed by several workers at once,
  // so it must be thread-safe and quick (atomics).
  std::function<void(const Version&)> on_placed;
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
  std::uint64_t forgotten = 0;             // versions retention removed (not damage)
  std::uint64_t unreferenced_objects = 0;  // left by interrupted work; harmless
  std::uint64_t reclaimable_packs = 0;     // empty packs a full disk or a kill left; harmless
  std::vector<std::string> problems;       // one line each: damaged objects and who uses them
  std::vector<std::string> warnings;       // not damage: an archive readable by others
  bool ok() const { return problems.empty(); }
};

}  // namespace tw::archive
