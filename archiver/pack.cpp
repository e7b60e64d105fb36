// Pack files (archiver/pack.hpp; FORMAT.md, "Format 2").
#include "archiver/pack.hpp"

#include <fcntl.h>
#include <unistd.h>
#include <zstd.h>

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <random>

#include <fmt/format.h>

#include "archiver/sha256.hpp"
#include "common/escape.hpp"
#include "common/paths.hpp"

namespace tw::archive {
namespace {

constexpr std::string_view kBlobMagic{"TWBLOB2\0", 8};

void put_u64(char* out, std::uint64_t value) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((value >> (8 * i)) & 0xff);
}

std::uint64_t get_u64(const char* in) {
  std::uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | static_cast<unsigned char>(in[i]);
  return value;
}

// Reads exactly `size` bytes at `offset`; the count read when the file ends
// first, or -errno.
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

std::string new_pack_name() {
  static thread_local std::mt19937_64 random{std::random_device{}()};
  return fmt::format("{:016x}{:016x}", random(), random());
}

}  // namespace

std::string encode_blob_header(const BlobHeader& header) {
  std::string out(kBlobHeaderSize, '\0');
  std::memcpy(out.data(), kBlobMagic.data(), kBlobMagic.size());
  put_u64(out.data() + 8, header.raw);
  put_u64(out.data() + 16, header.stored);
  // bytes 24..31 reserved (zero)
  const std::string id = digest_bytes(header.id);
  std::memcpy(out.data() + 32, id.data(), id.size());
  return out;
}

std::optional<BlobHeader> decode_blob_header(std::span<const char> bytes, std::uint64_t offset) {
  if (bytes.size() < kBlobHeaderSize ||
      std::memcmp(bytes.data(), kBlobMagic.data(), kBlobMagic.size()) != 0) {
    return std::nullopt;
  }
  for (std::size_t i = 24; i < 32; ++i) {
    if (bytes[i] != 0) return std::nullopt;
  }
  BlobHeader header;
  header.offset = offset;
  header.raw = get_u64(bytes.data() + 8);
  header.stored = get_u64(bytes.data() + 16);
  header.id = digest_hex(std::string_view(bytes.data() + 32, 32));
  return header;
}

std::string pack_file(const std::string& packs_dir, std::string_view name) {
  return fmt::format("{}/{}/{}.pack", packs_dir, name.substr(0, 2), name);
}

BlobCompressor::BlobCompressor(int level) : cctx_(ZSTD_createCCtx()), level_(level) {
  if (cctx_ == nullptr) throw std::bad_alloc();
  ZSTD_CCtx_setParameter(cctx_, ZSTD_c_compressionLevel, level_);
  ZSTD_CCtx_setParameter(cctx_, ZSTD_c_checksumFlag, 1);
  ZSTD_CCtx_setParameter(cctx_, ZSTD_c_contentSizeFlag, 1);
}

BlobCompressor::~BlobCompressor() { ZSTD_freeCCtx(cctx_); }

Expected<std::span<const char>> BlobCompressor::compress(std::span<const char> raw) {
  out_.resize(ZSTD_compressBound(raw.size()));
  const std::size_t n = ZSTD_compress2(cctx_, out_.data(), out_.size(), raw.data(), raw.size());
  if (ZSTD_isError(n)) {
    return retry(fmt::format("archive: compressing: {}", ZSTD_getErrorName(n)));
  }
  return std::span<const char>(out_.data(), n);
}

PackWriter::PackWriter(DiskWriter& disk, std::string packs_dir, std::uint64_t target_size)
    : disk_(disk), packs_dir_(std::move(packs_dir)), target_size_(target_size) {}

Done PackWriter::open_new() {
  name_ = new_pack_name();
  file_ = pack_file(packs_dir_, name_);
  if (auto made = disk_.make_dir(parent_path(file_)); !made) return made.fault();
  disk_.step("pack-create");
  fd_.reset(::open(file_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644));
  if (!fd_) return errno_fault(errno, Side::Archive, fmt::format("creating {}", shown_path(file_)));
  named_durable_ = false;
  if (const int err = write_all(fd_.get(), kPackMagic.data(), kPackMagic.size()); err != 0) {
    fd_.reset();
    return errno_fault(err, Side::Archive, fmt::format("writing {}", shown_path(file_)));
  }
  size_ = kPackMagic.size();
  unsynced_ += kPackMagic.size();
  return Ok{};
}

Expected<BlobRef> PackWriter::append(std::string_view id, std::uint64_t raw,
                                     std::span<const char> frame) {
  if (!is_sha256_hex(id)) return permanent(fmt::format("not a blob id: {}", shown_text(id)));
  if (fd_ && size_ >= target_size_) {
    if (auto synced = sync(); !synced) return synced.fault();
    fd_.reset();
  }
  if (!fd_) {
    if (auto opened = open_new(); !opened) return opened.fault();
  }
  BlobRef ref{name_, size_, frame.size(), raw};
  const std::string header = encode_blob_header({size_, raw, frame.size(), std::string(id)});
  disk_.step("pack-append");
  // One write for header and frame where it fits, so a record is rarely split
  // by a kill.
  int err = write_all(fd_.get(), header.data(), header.size());
  if (err == 0) err = write_all(fd_.get(), frame.data(), frame.size());
  if (err != 0) {
    // The pack's end is unknown now: seal it (what it holds before this blob is
    // intact).
    fd_.reset();
    return errno_fault(err, Side::Archive, fmt::format("writing {}", shown_path(file_)));
  }
  size_ += header.size() + frame.size();
  unsynced_ += header.size() + frame.size();
  return ref;
}

Done PackWriter::sync() {
  if (!fd_ || unsynced_ == 0) return Ok{};
  disk_.step("pack-sync");
  const int rc = named_durable_ ? ::fdatasync(fd_.get()) : ::fsync(fd_.get());
  if (rc != 0)
    return errno_fault(errno, Side::Archive, fmt::format("syncing {}", shown_path(file_)));
  if (!named_durable_) {
    if (auto synced = disk_.sync_dir(parent_path(file_)); !synced) return synced.fault();
    named_durable_ = true;
  }
  unsynced_ = 0;
  return Ok{};
}

Result<std::vector<char>> read_blob(int pack_fd, const BlobRef& ref, std::string_view id,
                                    bool rehash) {
  std::vector<char> frame(kBlobHeaderSize + ref.stored);
  const long got = pread_full(pack_fd, frame.data(), frame.size(), ref.offset);
  if (got < 0) return Error{fmt::format("read error: {}", std::strerror(static_cast<int>(-got)))};
  if (static_cast<std::size_t>(got) < frame.size()) return Error{"truncated (the pack ends first)"};
  const auto header = decode_blob_header(std::span(frame).first(kBlobHeaderSize), ref.offset);
  if (!header) return Error{"not a blob header at its offset"};
  if (header->id != id || header->raw != ref.raw || header->stored != ref.stored) {
    return Error{
        fmt::format("blob header names {} ({} bytes), not {}", header->id, header->raw, id)};
  }
  const char* src = frame.data() + kBlobHeaderSize;
  const unsigned long long size = ZSTD_getFrameContentSize(src, ref.stored);
  if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN || size != ref.raw) {
    return Error{"corrupt compressed data (frame header)"};
  }
  std::vector<char> raw(ref.raw);
  const std::size_t n = ZSTD_decompress(raw.data(), raw.size(), src, ref.stored);
  if (ZSTD_isError(n)) {
    return Error{fmt::format("corrupt compressed data ({})", ZSTD_getErrorName(n))};
  }
  if (n != ref.raw) return Error{"truncated (short frame)"};
  if (!rehash) return raw;
  const std::string digest = sha256_hex(std::string_view(raw.data(), raw.size()));
  if (digest != id) {
    return Error{fmt::format("content checksum mismatch (content hashes to {})", digest)};
  }
  return raw;
}

Result<std::uint64_t> scan_pack(int pack_fd, const std::function<void(const BlobHeader&)>& visit) {
  struct stat st {};
  if (::fstat(pack_fd, &st) != 0) return Error{fmt::format("stat: {}", std::strerror(errno))};
  const auto size = static_cast<std::uint64_t>(st.st_size);
  char magic[kPackMagic.size()];
  const long got = pread_full(pack_fd, magic, sizeof magic, 0);
  if (got < 0) return Error{fmt::format("read error: {}", std::strerror(static_cast<int>(-got)))};
  if (static_cast<std::size_t>(got) < sizeof magic ||
      std::string_view(magic, sizeof magic) != kPackMagic) {
    return Error{"not a pack (no header)"};
  }
  std::uint64_t at = kPackMagic.size();
  char bytes[kBlobHeaderSize];
  while (at + kBlobHeaderSize <= size) {
    const long n = pread_full(pack_fd, bytes, sizeof bytes, at);
    if (n < 0) return Error{fmt::format("read error: {}", std::strerror(static_cast<int>(-n)))};
    if (static_cast<std::size_t>(n) < sizeof bytes) break;
    const auto header = decode_blob_header(std::span<const char>(bytes, sizeof bytes), at);
    if (!header || header->stored > size - at - kBlobHeaderSize) break;  // torn tail
    visit(*header);
    at += kBlobHeaderSize + header->stored;
  }
  return at;
}

}  // namespace tw::archive
