// Pack files (archiver/pack.hpp; FORMAT.md, "Format 2").
#include "archive/format2/pack.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
#define ZSTD_STATIC_LINKING_ONLY  // ZSTD_getCParams
#include <zstd.h>

#include <sys/stat.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <memory>
#include <random>

#include <fmt/format.h>

#include "archive/sha256.hpp"
#include "common/escape.hpp"
#include "common/paths.hpp"

namespace tw::archive {
namespace {

constexpr std::string_view kBlobMagic{"TWB3", 4};
constexpr std::string_view kBlobMagicV2{"TWBLOB2\0", 8};
constexpr char kRawFlag = 1;  // the record's bytes are the blob itself, not a zstd frame

// Little-endian words of `width` bytes.
void put_le(char* out, std::uint64_t value, int width) {
  for (int i = 0; i < width; ++i) out[i] = static_cast<char>((value >> (8 * i)) & 0xff);
}

std::uint64_t get_le(const char* in, int width) {
  std::uint64_t value = 0;
  for (int i = width - 1; i >= 0; --i) value = (value << 8) | static_cast<unsigned char>(in[i]);
  return value;
}

std::string new_pack_name() {
  static thread_local std::mt19937_64 random{std::random_device{}()};
  return fmt::format("{:016x}{:016x}", random(), random());
}

}  // namespace

// Version 3 (16 bytes): "TWB3", stored and raw sizes as little-endian 32-bit words, a
// flags byte (kRawFlag), the first 3 bytes of the blob's SHA-256.
std::string encode_blob_header(const BlobHeader& header) {
  std::string out(kBlobHeaderSize, '\0');
  std::memcpy(out.data(), kBlobMagic.data(), kBlobMagic.size());
  put_le(out.data() + 4, header.stored, 4);
  put_le(out.data() + 8, header.raw, 4);
  out[12] = header.compressed ? 0 : kRawFlag;
  const std::string id = digest_bytes(header.id);
  std::memcpy(out.data() + 13, id.data(), 3);
  return out;
}

std::optional<BlobHeader> decode_blob_header(std::span<const char> bytes, std::uint64_t offset) {
  BlobHeader header;
  header.offset = offset;
  if (bytes.size() >= kBlobHeaderSize &&
      std::memcmp(bytes.data(), kBlobMagic.data(), kBlobMagic.size()) == 0) {
    if ((bytes[12] & ~kRawFlag) != 0) return std::nullopt;
    header.stored = get_le(bytes.data() + 4, 4);
    header.raw = get_le(bytes.data() + 8, 4);
    header.compressed = (bytes[12] & kRawFlag) == 0;
    header.id = digest_hex(std::string_view(bytes.data() + 13, 3));
    if (!header.compressed && header.stored != header.raw) return std::nullopt;
    return header;
  }
  // Version 2 (64 bytes): "TWBLOB2\0", raw and stored sizes as little-endian 64-bit
  // words, 8 zero bytes, the whole SHA-256; always a zstd frame.
  if (bytes.size() < kBlobHeaderSizeV2 ||
      std::memcmp(bytes.data(), kBlobMagicV2.data(), kBlobMagicV2.size()) != 0) {
    return std::nullopt;
  }
  for (std::size_t i = 24; i < 32; ++i) {
    if (bytes[i] != 0) return std::nullopt;
  }
  header.size = kBlobHeaderSizeV2;
  header.raw = get_le(bytes.data() + 8, 8);
  header.stored = get_le(bytes.data() + 16, 8);
  header.id = digest_hex(std::string_view(bytes.data() + 32, 32));
  return header;
}

std::string pack_file(const std::string& packs_dir, std::string_view name) {
  return fmt::format("{}/{}/{}.pack", packs_dir, name.substr(0, 2), name);
}

BlobCompressor::BlobCompressor(int level, std::size_t blob_size)
    : cctx_(ZSTD_createCCtx()), level_(level) {
  if (cctx_ == nullptr) throw std::bad_alloc();
  ZSTD_CCtx_setParameter(cctx_, ZSTD_c_compressionLevel, level_);
  if (blob_size > 0) {
    const ZSTD_compressionParameters level_params = ZSTD_getCParams(level_, blob_size, 0);
    const int window_log =
        std::min(static_cast<int>(std::bit_width(blob_size - 1)), ZSTD_WINDOWLOG_MAX_64);
    const int grow = window_log - static_cast<int>(level_params.windowLog);
    if (grow > 0) {
      const auto grown = [&](unsigned log, int max) {
        return std::min(static_cast<int>(log) + grow, max);
      };
      ZSTD_CCtx_setParameter(cctx_, ZSTD_c_windowLog, window_log);
      ZSTD_CCtx_setParameter(cctx_, ZSTD_c_hashLog, grown(level_params.hashLog, ZSTD_HASHLOG_MAX));
      ZSTD_CCtx_setParameter(cctx_, ZSTD_c_chainLog,
                             grown(level_params.chainLog, ZSTD_CHAINLOG_MAX_64));
    }
  }
  ZSTD_CCtx_setParameter(cctx_, ZSTD_c_checksumFlag, 0);
  ZSTD_CCtx_setParameter(cctx_, ZSTD_c_contentSizeFlag, 1);
}

BlobCompressor::~BlobCompressor() { ZSTD_freeCCtx(cctx_); }

Expected<StoredBlob> BlobCompressor::compress(std::span<const char> raw) {
  out_.resize(ZSTD_compressBound(raw.size()));
  const std::size_t n = ZSTD_compress2(cctx_, out_.data(), out_.size(), raw.data(), raw.size());
  if (ZSTD_isError(n)) {
    return retry(fmt::format("archive: compressing: {}", ZSTD_getErrorName(n)));
  }
  if (n >= raw.size()) return StoredBlob{raw, false};  // incompressible: kept as it is
  return StoredBlob{std::span<const char>(out_.data(), n), true};
}

PackWriter::PackWriter(DiskWriter& disk, std::string packs_dir, std::uint64_t target_size)
    : disk_(disk), packs_dir_(std::move(packs_dir)), target_size_(target_size) {}

Done PackWriter::open_new() {
  name_ = new_pack_name();
  file_ = pack_file(packs_dir_, name_);
  if (auto made = disk_.make_dir(parent_path(file_)); !made) return made.fault();
  disk_.step("pack-create");
  fd_.reset(::open(file_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, kFileMode));
  // A name taken already (a process forked from one that drew the same random names):
  // another one is drawn.
  if (!fd_ && errno == EEXIST) return open_new();
  if (!fd_) return errno_fault(errno, Side::Archive, fmt::format("creating {}", shown_path(file_)));
  // Locked before anything is appended. A collection may have found the new, empty file
  // unlocked and removed it (it held the lock while it did): then a new pack is started.
  int locked;
  while ((locked = ::flock(fd_.get(), LOCK_EX)) != 0 && errno == EINTR) {
  }
  struct stat st {};
  if (locked != 0 || ::fstat(fd_.get(), &st) != 0) {
    const int err = errno;
    fd_.reset();
    return errno_fault(err, Side::Archive, fmt::format("locking {}", shown_path(file_)));
  }
  if (st.st_nlink == 0) {
    fd_.reset();
    return open_new();
  }
  named_durable_ = false;
  if (const int err = write_all(fd_.get(), kPackMagic.data(), kPackMagic.size()); err != 0) {
    retire();
    return errno_fault(err, Side::Archive, fmt::format("writing {}", shown_path(file_)));
  }
  size_ = kPackMagic.size();
  unsynced_ += kPackMagic.size();
  writeback_ = {};
  return Ok{};
}

Expected<BlobRef> PackWriter::append(std::string_view id, std::uint64_t raw,
                                     const StoredBlob& stored) {
  if (!is_sha256_hex(id)) return permanent(fmt::format("not a blob id: {}", shown_text(id)));
  const std::span<const char> frame = stored.bytes;
  if (raw > kMaxBlob || frame.size() > kMaxBlob || (!stored.compressed && frame.size() != raw)) {
    return permanent(fmt::format("blob {} of {} bytes cannot be stored", id, raw));
  }
  if (fd_ && size_ >= target_size_) {
    if (auto synced = sync(); !synced) return synced.fault();
    retire();
  }
  if (!fd_) {
    if (auto opened = open_new(); !opened) return opened.fault();
  }
  BlobRef ref{name_, size_, frame.size(), raw};
  const std::string header =
      encode_blob_header({size_, raw, frame.size(), stored.compressed, std::string(id)});
  disk_.step("pack-append");
  // One write for header and frame, so a record is rarely split by a kill.
  const int err = write_all(fd_.get(), std::span<const char>(header), frame);
  if (err != 0) {
    // The pack's end is unknown now: seal it (what it holds before this blob is
    // intact).
    retire();
    return errno_fault(err, Side::Archive, fmt::format("writing {}", shown_path(file_)));
  }
  size_ += header.size() + frame.size();
  unsynced_ += header.size() + frame.size();
  writeback_.wrote(fd_.get(), size_);
  return ref;
}

namespace {

// One pack's sync: fdatasync of `fd` (fsync, and of the pack's directory, the pack's
// `first` time), so that every blob appended to `file` so far survives a power cut.
Done sync_pack(const DiskWriter& disk, int fd, const std::string& file, bool first) {
  disk.step("pack-sync");
  if (disk.fails("pack-sync")) {
    return errno_fault(EIO, Side::Archive, fmt::format("syncing {}", shown_path(file)));
  }
  if ((first ? ::fsync(fd) : ::fdatasync(fd)) != 0) {
    return errno_fault(errno, Side::Archive, fmt::format("syncing {}", shown_path(file)));
  }
  if (first) return disk.sync_dir(parent_path(file));
  return Ok{};
}

}  // namespace

Done PackWriter::sync() {
  if (!fd_ || unsynced_ == 0) return Ok{};
  if (auto synced = sync_pack(disk_, fd_.get(), file_, !named_durable_); !synced) return synced;
  named_durable_ = true;
  unsynced_ = 0;
  return Ok{};
}

Expected<std::optional<PackSync>> PackWriter::take_sync() {
  if (!fd_ || unsynced_ == 0) return std::optional<PackSync>();
  UniqueFd fd(::fcntl(fd_.get(), F_DUPFD_CLOEXEC, 0));
  if (!fd) return errno_fault(errno, Side::Archive, fmt::format("syncing {}", shown_path(file_)));
  PackSync sync{std::move(fd), file_, !named_durable_};
  named_durable_ = true;
  unsynced_ = 0;
  return std::optional<PackSync>(std::move(sync));
}

Done PackSync::run(const DiskWriter& disk) const { return sync_pack(disk, fd.get(), file, first); }

Expected<BlobBytes> read_blob(int pack_fd, const BlobRef& ref, std::string_view id, bool rehash) {
  // One read for a version-3 record; a version-2 record (a longer header) needs the rest.
  BlobBytes frame(kBlobHeaderSize + ref.stored);
  long got = pread_full(pack_fd, frame.data(), frame.size(), ref.offset);
  if (got >= 0 && static_cast<std::size_t>(got) >= kBlobHeaderSize &&
      std::memcmp(frame.data(), kBlobMagicV2.data(), kBlobMagicV2.size()) == 0) {
    frame.resize(kBlobHeaderSizeV2 + ref.stored);
    got = pread_full(pack_fd, frame.data(), frame.size(), ref.offset);
  }
  if (got < 0) return retry(fmt::format("read error: {}", std::strerror(static_cast<int>(-got))));
  if (static_cast<std::size_t>(got) < frame.size()) return retry("truncated (the pack ends first)");
  const auto header = decode_blob_header(frame, ref.offset);
  if (!header || header->size + ref.stored != frame.size()) {
    return retry("not a blob header at its offset");
  }
  if (!id.starts_with(header->id) || header->raw != ref.raw || header->stored != ref.stored) {
    return retry(
        fmt::format("blob header names {} ({} bytes), not {}", header->id, header->raw, id));
  }
  const char* src = frame.data() + header->size;
  BlobBytes raw;
  if (!header->compressed) {
    raw.assign(src, src + ref.stored);
  } else {
    const unsigned long long size = ZSTD_getFrameContentSize(src, ref.stored);
    if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN || size != ref.raw) {
      return retry("corrupt compressed data (frame header)");
    }
    raw.resize(ref.raw);
    // One decompression context per thread, kept: ZSTD_decompress makes and frees one per
    // call (a heap allocation of ~100 KiB and its set-up, per blob).
    thread_local const std::unique_ptr<ZSTD_DCtx, decltype(&ZSTD_freeDCtx)> context(
        ZSTD_createDCtx(), &ZSTD_freeDCtx);
    if (!context) return retry("out of memory for a decompression context");
    const std::size_t n =
        ZSTD_decompressDCtx(context.get(), raw.data(), raw.size(), src, ref.stored);
    if (ZSTD_isError(n)) {
      return retry(fmt::format("corrupt compressed data ({})", ZSTD_getErrorName(n)));
    }
    if (n != ref.raw) return retry("truncated (short frame)");
  }
  if (!rehash) return raw;
  const std::string digest = sha256_hex(std::string_view(raw.data(), raw.size()));
  if (digest != id) {
    return retry(fmt::format("content checksum mismatch (content hashes to {})", digest));
  }
  return raw;
}

Expected<std::uint64_t> scan_pack(int pack_fd,
                                  const std::function<void(const BlobHeader&)>& visit) {
  struct stat st {};
  if (::fstat(pack_fd, &st) != 0) return retry(fmt::format("stat: {}", std::strerror(errno)));
  const auto size = static_cast<std::uint64_t>(st.st_size);
  char magic[kPackMagic.size()];
  const long got = pread_full(pack_fd, magic, sizeof magic, 0);
  if (got < 0) return retry(fmt::format("read error: {}", std::strerror(static_cast<int>(-got))));
  const std::string_view found(magic, static_cast<std::size_t>(std::max(got, 0L)));
  if (found != kPackMagic && found != kPackMagicV2) return retry("not a pack (no header)");
  // Every record of a pack has the header version of the pack's own.
  const std::size_t header_size = found == kPackMagic ? kBlobHeaderSize : kBlobHeaderSizeV2;
  std::uint64_t at = kPackMagic.size();
  char bytes[kBlobHeaderSizeV2];
  while (at + header_size <= size) {
    const long n = pread_full(pack_fd, bytes, header_size, at);
    if (n < 0) return retry(fmt::format("read error: {}", std::strerror(static_cast<int>(-n))));
    if (static_cast<std::size_t>(n) < header_size) break;
    const auto header = decode_blob_header(std::span<const char>(bytes, header_size), at);
    // A torn tail, or a record not of the pack's version: the walk ends there.
    if (!header || header->size != header_size || header->stored > size - at - header_size) {
      break;
    }
    visit(*header);
    at += header_size + header->stored;
  }
  return at;
}

long pread_full(int fd, char* out, std::size_t size, std::uint64_t offset) {
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, out + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  return static_cast<long>(done);
}

bool try_lock_pack(int fd) { return ::flock(fd, LOCK_EX | LOCK_NB) == 0; }

Expected<StoredRecord> read_record(int pack_fd, const BlobRef& ref, const std::string& id) {
  auto content = read_blob(pack_fd, ref, id, true);
  if (!content) {
    return retry(fmt::format("blob {} in pack {}: {}", id, ref.pack, content.error()));
  }
  char magic[kBlobMagicV2.size()];
  const long got = pread_full(pack_fd, magic, sizeof magic, ref.offset);
  const bool v2 = got == static_cast<long>(sizeof magic) &&
                  std::memcmp(magic, kBlobMagicV2.data(), kBlobMagicV2.size()) == 0;
  const std::uint64_t header_size = v2 ? kBlobHeaderSizeV2 : kBlobHeaderSize;
  std::vector<char> frame(header_size + ref.stored);
  if (pread_full(pack_fd, frame.data(), frame.size(), ref.offset) !=
      static_cast<long>(frame.size())) {
    return retry(fmt::format("blob {} in pack {}: read error", id, ref.pack));
  }
  const auto header = decode_blob_header(frame, ref.offset);
  if (!header) return retry(fmt::format("blob {} in pack {}: not a blob header", id, ref.pack));
  StoredRecord record;
  record.compressed = header->compressed;
  record.bytes.assign(frame.begin() + static_cast<long>(header_size), frame.end());
  return record;
}

}  // namespace tw::archive
