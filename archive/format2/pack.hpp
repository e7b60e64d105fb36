// Pack files of archive format 2 (FORMAT.md, "Format 2"): many blobs (a small
// file's content, or one chunk of a large file), each a zstd frame (or the bytes
// themselves, when zstd would not make them smaller) behind a short header,
// appended to one file, so that a pack is written,
// synced and read as one for many versions instead of one file, one block and
// several fsyncs each. A pack is append-only: bytes once written never change.
// Internal to the archive library. A PackWriter and a BlobCompressor belong to
// one thread; the free functions are safe from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "archive/disk.hpp"
#include "common/buffer.hpp"
#include "common/fd.hpp"

struct ZSTD_CCtx_s;

namespace tw::archive {

// The first bytes of every pack this release writes: its records have headers of
// version 3.
inline constexpr std::string_view kPackMagic = "timewarp-pack 3\n";
// ... and of packs written by the first release of format 2 (record headers of version 2),
// which are read as they are.
inline constexpr std::string_view kPackMagicV2 = "timewarp-pack 2\n";
// Each blob: a header of this size, then `stored` bytes (one zstd frame, or the raw bytes).
inline constexpr std::size_t kBlobHeaderSize = 16;
inline constexpr std::size_t kBlobHeaderSizeV2 = 64;
// The largest blob a version-3 header can describe (its sizes are 32-bit); chunks are at
// most 4 MiB.
inline constexpr std::uint64_t kMaxBlob = 0xffffffffu;

struct BlobHeader {
  std::uint64_t offset = 0;  // of the header in its pack
  std::uint64_t raw = 0;     // uncompressed bytes
  std::uint64_t stored = 0;  // bytes after the header
  bool compressed = true;    // a zstd frame (else the raw bytes)
  // The blob's SHA-256 in hex, as far as the header gives it: its first 3 bytes (6 hex
  // digits) in version 3, whole in version 2.
  std::string id;
  std::size_t size = kBlobHeaderSize;  // of the header itself: kBlobHeaderSizeV2 in version 2
};

// What a blob is stored as: a zstd frame, or its own bytes.
struct StoredBlob {
  std::span<const char> bytes;
  bool compressed = true;
};

// Where a blob lives: enough to read it back with one pread.
struct BlobRef {
  std::string pack;  // the pack's name (32 hex digits)
  std::uint64_t offset = 0;
  std::uint64_t stored = 0;
  std::uint64_t raw = 0;
};

// The header bytes of a blob (version 3), and their reading, of either version (nullopt:
// not a blob header; `bytes` may hold more than the header).
std::string encode_blob_header(const BlobHeader& header);
std::optional<BlobHeader> decode_blob_header(std::span<const char> bytes, std::uint64_t offset);

// <packs_dir>/<first two digits>/<name>.pack
std::string pack_file(const std::string& packs_dir, std::string_view name);

// zstd at one level for whole blobs in memory. No frame checksum: the blob's SHA-256
// checks its content. `blob_size` (0: none) is the size of the blobs it is meant for: when
// the level's window is smaller, zstd's parameters for the level are scaled to a window
// that holds such a blob, the window and the match tables grown by the same factor (zstd
// sizes level 2 for any input over 256 KiB: a 1 MiB window and 2^16 hash slots; for 2 MiB
// chunks that is 2 MiB and 2^17). A level whose window already holds it is zstd's own.
class BlobCompressor {
 public:
  explicit BlobCompressor(int level, std::size_t blob_size = 0);
  BlobCompressor(const BlobCompressor&) = delete;
  BlobCompressor& operator=(const BlobCompressor&) = delete;
  ~BlobCompressor();
  // What to store for `raw`: its frame (valid until the next call), or `raw` itself when
  // the frame is no smaller.
  Expected<StoredBlob> compress(std::span<const char> raw);
  int level() const { return level_; }

 private:
  ZSTD_CCtx_s* cctx_;
  int level_;
  UninitializedVector<char> out_;  // a frame's room, touched only as far as it is written
};

// A sync of a pack handed to another thread (group commit, FORMAT.md "Format 2"): an
// fdatasync of its own descriptor of the pack (fsync, and of the pack's directory, the
// pack's first time), covering every blob appended before it was taken.
struct PackSync {
  UniqueFd fd;
  std::string file;
  bool first = false;
  Done run(const DiskWriter& disk) const;
};

// Appends blobs to this writer's own pack (no other process writes to it),
// starting a new pack once the current one reaches `target_size`. Nothing
// appended is durable before sync() returns: one fsync for everything appended
// since the last one (group commit).
class PackWriter {
 public:
  PackWriter(DiskWriter& disk, std::string packs_dir, std::uint64_t target_size = 16 << 20);
  PackWriter(const PackWriter&) = delete;
  PackWriter& operator=(const PackWriter&) = delete;

  // Appends one blob: `id` its SHA-256 (hex), `raw` its uncompressed size,
  // `stored` what BlobCompressor made of it. The pack is synced and closed first
  // when it is full.
  Expected<BlobRef> append(std::string_view id, std::uint64_t raw, const StoredBlob& stored);
  // Makes every blob appended so far durable: fdatasync of the pack, and on its
  // first sync an fsync of the pack and of its directory (so the name survives
  // a power cut). Writeback of what is appended starts every kWritebackEvery bytes,
  // so a sync waits for the last few MiB only, not for a whole pack.
  Done sync();
  // The sync of everything appended so far, to run on another thread (nothing when all is
  // synced): what is appended after it is not covered. Counts as synced here; if the sync
  // fails, seal() the pack.
  Expected<std::optional<PackSync>> take_sync();
  // Stops appending to the current pack (its end is in doubt): the next blob starts a new
  // one.
  void seal() { retire(); }
  // The packs this writer stopped appending to, still open and locked (a collection leaves
  // a locked pack alone: FORMAT.md, "Collection"): the caller lets go of them once every
  // blob appended to them is committed, or lost.
  std::vector<UniqueFd> take_retired() { return std::exchange(retired_, {}); }
  // Bytes appended since the last sync.
  std::uint64_t unsynced() const { return unsynced_; }

 private:
  Done open_new();
  void retire() {
    if (fd_) retired_.push_back(std::move(fd_));
  }

  DiskWriter& disk_;
  std::string packs_dir_;
  std::uint64_t target_size_;
  UniqueFd fd_;
  std::string name_;
  std::string file_;
  std::uint64_t size_ = 0;
  std::uint64_t unsynced_ = 0;
  Writeback writeback_;         // of the pack being written
  bool named_durable_ = false;  // the pack's directory entry has been fsynced
  std::vector<UniqueFd> retired_;
};

// A pack's lock (flock, on its file): a writer holds it from the pack's creation until
// every blob it appended is committed; a collection takes it (without waiting) before it
// deletes, rewrites or cuts back a pack, and leaves alone a pack it cannot take.
bool try_lock_pack(int fd);

// Reads exactly `size` bytes at `offset`: the count read (fewer when the file ends first),
// or -errno.
long pread_full(int fd, char* out, std::size_t size, std::uint64_t offset);

// A blob's record as stored (read by a collection to copy it into another pack): its
// stored bytes and whether they are a zstd frame, after the content was checked as
// read_blob does.
struct StoredRecord {
  std::vector<char> bytes;
  bool compressed = true;
};
Expected<StoredRecord> read_record(int pack_fd, const BlobRef& ref, const std::string& id);

// Reads the blob at `ref` from an open pack (either record version): checks its header
// against `id` and `ref`, decompresses the frame and, unless the caller checks the content
// otherwise (`rehash` false: restore hashes whole files), re-hashes it. Errors (RETRY) name
// what is wrong (missing, truncated, corrupt, checksum mismatch), in these words alone: the
// caller names the blob and its pack.
// Its bytes are not zeroed before they are filled (common/buffer.hpp): at 1 GiB restored,
// zeroing them took 15% of the restore's CPU.
using BlobBytes = UninitializedVector<char>;
Expected<BlobBytes> read_blob(int pack_fd, const BlobRef& ref, std::string_view id,
                              bool rehash = true);

// Walks a pack from its start, calling `visit` for each whole blob record,
// without reading the frames. Returns the offset where whole records end: the
// file's size, or less when a writer died mid-append (a torn tail: never
// referenced, harmless). Fails (RETRY) when the file is not a pack or cannot be read.
Expected<std::uint64_t> scan_pack(int pack_fd, const std::function<void(const BlobHeader&)>& visit);

}  // namespace tw::archive
