// Pack files of archive format 2 (FORMAT.md, "Format 2"): many blobs (a small
// file's content, or one chunk of a large file), each a zstd frame behind a
// fixed header naming it, appended to one file, so that a pack is written,
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
#include <vector>

#include "archiver/disk.hpp"
#include "common/fd.hpp"
#include "common/result.hpp"

struct ZSTD_CCtx_s;

namespace tw::archive {

// The first bytes of every pack.
inline constexpr std::string_view kPackMagic = "timewarp-pack 2\n";
// Each blob: this header, then `stored` bytes (one zstd frame with its
// checksum).
inline constexpr std::size_t kBlobHeaderSize = 64;

struct BlobHeader {
  std::uint64_t offset = 0;  // of the header in its pack
  std::uint64_t raw = 0;     // uncompressed bytes
  std::uint64_t stored = 0;  // bytes of the zstd frame after the header
  std::string id;            // SHA-256 of the uncompressed bytes, 64 hex digits
};

// Where a blob lives: enough to read it back with one pread.
struct BlobRef {
  std::string pack;  // the pack's name (32 hex digits)
  std::uint64_t offset = 0;
  std::uint64_t stored = 0;
  std::uint64_t raw = 0;
};

// The header bytes of a blob, and their reading (nullopt: not a blob header).
std::string encode_blob_header(const BlobHeader& header);
std::optional<BlobHeader> decode_blob_header(std::span<const char> bytes, std::uint64_t offset);

// <packs_dir>/<first two digits>/<name>.pack
std::string pack_file(const std::string& packs_dir, std::string_view name);

// zstd at one level, with the frame checksum on, for whole blobs in memory.
class BlobCompressor {
 public:
  explicit BlobCompressor(int level);
  BlobCompressor(const BlobCompressor&) = delete;
  BlobCompressor& operator=(const BlobCompressor&) = delete;
  ~BlobCompressor();
  // The frame of `raw` (valid until the next call).
  Expected<std::span<const char>> compress(std::span<const char> raw);
  int level() const { return level_; }

 private:
  ZSTD_CCtx_s* cctx_;
  int level_;
  std::vector<char> out_;
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
  // `frame` its zstd frame. The pack is synced and closed first when it is
  // full.
  Expected<BlobRef> append(std::string_view id, std::uint64_t raw, std::span<const char> frame);
  // Makes every blob appended so far durable: fdatasync of the pack, and on its
  // first sync an fsync of the pack and of its directory (so the name survives
  // a power cut).
  Done sync();
  // Bytes appended since the last sync.
  std::uint64_t unsynced() const { return unsynced_; }

 private:
  Done open_new();

  DiskWriter& disk_;
  std::string packs_dir_;
  std::uint64_t target_size_;
  UniqueFd fd_;
  std::string name_;
  std::string file_;
  std::uint64_t size_ = 0;
  std::uint64_t unsynced_ = 0;
  bool named_durable_ = false;  // the pack's directory entry has been fsynced
};

// Reads the blob at `ref` from an open pack: checks its header against `id` and `ref`,
// decompresses the frame (zstd checks its own checksum) and, unless the caller checks the
// content otherwise (`rehash` false: restore hashes whole files), re-hashes it. Errors name
// what is wrong (missing, truncated, corrupt, checksum mismatch).
Result<std::vector<char>> read_blob(int pack_fd, const BlobRef& ref, std::string_view id,
                                    bool rehash = true);

// Walks a pack from its start, calling `visit` for each whole blob record,
// without reading the frames. Returns the offset where whole records end: the
// file's size, or less when a writer died mid-append (a torn tail: never
// referenced, harmless). Fails when the file is not a pack.
Result<std::uint64_t> scan_pack(int pack_fd, const std::function<void(const BlobHeader&)>& visit);

}  // namespace tw::archive
