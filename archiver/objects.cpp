#include "archiver/objects.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include <fmt/format.h>
#include <zstd.h>

#include "archiver/sha256.hpp"

namespace tw::archive {
namespace {

constexpr std::size_t kReadBuffer = 256 * 1024;
// Level 1: about twice the speed of the default level 3 for ~10% more bytes; the archiver
// shares small machines with the work it backs up (bench/archive).
constexpr int kCompressionLevel = 1;

struct CCtxFree {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};
struct DCtxFree {
  void operator()(ZSTD_DCtx* d) const { ZSTD_freeDCtx(d); }
};

bool all_zero(const char* p, std::size_t n) {
  return n == 0 || (p[0] == 0 && std::memcmp(p, p + 1, n - 1) == 0);
}

Result<std::uint64_t> decompress_fd(int in_fd, const std::string& expected_sha, int out_fd,
                                    bool sparse, const std::function<bool()>& cancelled) {
  std::unique_ptr<ZSTD_DCtx, DCtxFree> dctx(ZSTD_createDCtx());
  if (!dctx) return Error{"out of memory for zstd"};
  std::vector<char> in(ZSTD_DStreamInSize());
  std::vector<char> out(ZSTD_DStreamOutSize());
  Sha256 sha;
  std::uint64_t total = 0;
  std::size_t last = 1;  // ZSTD_decompressStream: 0 once a frame is complete
  bool seeked = false;
  bool any_input = false;
  while (true) {
    if (cancelled && cancelled()) return Error{"cancelled"};
    const long n = read_some(in_fd, in.data(), in.size());
    if (n < 0) return Error{fmt::format("read error: {}", std::strerror(static_cast<int>(-n)))};
    if (n == 0) break;
    any_input = true;
    ZSTD_inBuffer input{in.data(), static_cast<std::size_t>(n), 0};
    while (input.pos < input.size) {
      ZSTD_outBuffer output{out.data(), out.size(), 0};
      last = ZSTD_decompressStream(dctx.get(), &output, &input);
      if (ZSTD_isError(last)) {
        return Error{fmt::format("corrupt compressed data ({})", ZSTD_getErrorName(last))};
      }
      sha.update(output.dst, output.pos);
      total += output.pos;
      if (out_fd >= 0 && output.pos > 0) {
        if (sparse && all_zero(out.data(), output.pos)) {
          if (::lseek(out_fd, static_cast<off_t>(output.pos), SEEK_CUR) < 0) {
            return Error{fmt::format("seek error: {}", std::strerror(errno))};
          }
          seeked = true;
        } else if (const int err = write_all(out_fd, out.data(), output.pos); err != 0) {
          return Error{fmt::format("write error: {}", std::strerror(err))};
        }
      }
    }
  }
  if (!any_input) return Error{"truncated (empty file)"};
  // Flush what the decoder still holds once the input is exhausted.
  while (last != 0) {
    ZSTD_inBuffer input{nullptr, 0, 0};
    ZSTD_outBuffer output{out.data(), out.size(), 0};
    last = ZSTD_decompressStream(dctx.get(), &output, &input);
    if (ZSTD_isError(last)) {
      return Error{fmt::format("corrupt compressed data ({})", ZSTD_getErrorName(last))};
    }
    if (output.pos == 0) break;
    sha.update(output.dst, output.pos);
    total += output.pos;
    if (out_fd >= 0) {
      if (const int err = write_all(out_fd, out.data(), output.pos); err != 0) {
        return Error{fmt::format("write error: {}", std::strerror(err))};
      }
    }
  }
  if (last != 0) return Error{"truncated (compressed frame incomplete)"};
  if (seeked && ::ftruncate(out_fd, static_cast<off_t>(total)) != 0) {
    return Error{fmt::format("truncate error: {}", std::strerror(errno))};
  }
  const std::string digest = sha.hex_digest();
  if (digest != expected_sha) {
    return Error{fmt::format("content checksum mismatch (content hashes to {})", digest)};
  }
  return total;
}

}  // namespace

ObjectStore::ObjectStore(DiskWriter& disk, std::function<bool()> cancelled)
    : disk_(disk), cancelled_(std::move(cancelled)) {}

std::string ObjectStore::path_of(const std::string& sha256) const {
  return fmt::format("{}/objects/{}/{}.zst", disk_.root(), sha256.substr(0, 2), sha256);
}

bool ObjectStore::contains(const std::string& sha256) const {
  struct stat st {};
  return ::stat(path_of(sha256).c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

Expected<StoredContent> ObjectStore::store(int fd, std::uint64_t expected_size,
                                           const std::string& shown_path) {
  return read_source(fd, expected_size, shown_path, true);
}

Expected<StoredContent> ObjectStore::hash(int fd, std::uint64_t expected_size,
                                          const std::string& shown_path) {
  return read_source(fd, expected_size, shown_path, false);
}

Expected<StoredContent> ObjectStore::read_source(int fd, std::uint64_t expected_size,
                                                 const std::string& shown_path, bool compress) {
  in_.resize(kReadBuffer);
  out_.resize(ZSTD_CStreamOutSize());
  const auto changed = [&] {
    return retry(fmt::format("changed while being read: {}", shown_path));
  };
  std::unique_ptr<ZSTD_CCtx, CCtxFree> cctx;
  UniqueFd temp_fd;
  std::string temp_path;
  // Removes the temporary file on every early return.
  struct TempGuard {
    std::string* path;
    bool armed = true;
    ~TempGuard() {
      if (armed && !path->empty()) ::unlink(path->c_str());
    }
  } guard{&temp_path};
  const auto zstd_fault = [](std::size_t code) {
    return retry(fmt::format("archive: zstd error: {}", ZSTD_getErrorName(code)));
  };
  if (compress) {
    cctx.reset(ZSTD_createCCtx());
    if (!cctx) return retry("archive: out of memory for zstd");
    ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_compressionLevel, kCompressionLevel);
    ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_checksumFlag, 1);
    ZSTD_CCtx_setPledgedSrcSize(cctx.get(), expected_size);
    auto created = disk_.create_temp(temp_path);
    if (!created) return created.fault();
    temp_fd = std::move(created.value());
  }
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  Sha256 sha;
  std::uint64_t total = 0;
  bool first_chunk = true;
  const auto drain = [&](ZSTD_inBuffer& input, ZSTD_EndDirective mode) -> Done {
    while (true) {
      ZSTD_outBuffer output{out_.data(), out_.size(), 0};
      const std::size_t remaining = ZSTD_compressStream2(cctx.get(), &output, &input, mode);
      if (ZSTD_isError(remaining)) return zstd_fault(remaining);
      if (output.pos > 0) {
        if (const int err = write_all(temp_fd.get(), out_.data(), output.pos); err != 0) {
          return errno_fault(err, Side::Archive, fmt::format("writing {}", shown(temp_path)));
        }
        if (first_chunk) {
          first_chunk = false;
          disk_.step("object-data");
        }
      }
      const bool finished = mode == ZSTD_e_end ? remaining == 0 : input.pos == input.size;
      if (finished) return Ok{};
    }
  };
  const auto consume = [&](const char* data, std::size_t n) -> Done {
    sha.update(data, n);
    total += n;
    if (!compress) return Ok{};
    ZSTD_inBuffer input{data, n, 0};
    return drain(input, ZSTD_e_continue);
  };
  // Walks the file region by region: holes (found with SEEK_DATA/SEEK_HOLE) are fed as
  // zeros without reading them, data is read with pread.
  bool sparse_aware = true;
  while (total < expected_size) {
    const off_t pos = static_cast<off_t>(total);
    off_t region_end = static_cast<off_t>(expected_size);
    bool hole = false;
    if (sparse_aware) {
      const off_t data = ::lseek(fd, pos, SEEK_DATA);
      if (data < 0 && errno == ENXIO) {
        hole = true;  // no data after pos
      } else if (data < 0) {
        sparse_aware = false;  // not supported here: read everything
      } else if (data > pos) {
        hole = true;
        region_end = std::min(region_end, data);
      } else {
        const off_t hole_at = ::lseek(fd, pos, SEEK_HOLE);
        if (hole_at > pos) region_end = std::min(region_end, hole_at);
      }
    }
    while (static_cast<off_t>(total) < region_end) {
      if (cancelled_ && cancelled_()) return retry("cancelled");
      const std::size_t want = static_cast<std::size_t>(
          std::min<off_t>(region_end - static_cast<off_t>(total), static_cast<off_t>(in_.size())));
      if (hole) {
        std::memset(in_.data(), 0, want);
        if (auto done = consume(in_.data(), want); !done) return done.fault();
        continue;
      }
      const ssize_t n = ::pread(fd, in_.data(), want, static_cast<off_t>(total));
      if (n < 0) {
        if (errno == EINTR) continue;
        return errno_fault(errno, Side::Source, fmt::format("reading {}", shown_path));
      }
      if (n == 0) return changed();  // shorter than it was
      if (auto done = consume(in_.data(), static_cast<std::size_t>(n)); !done) return done.fault();
    }
  }
  {
    char extra = 0;
    const ssize_t n = ::pread(fd, &extra, 1, static_cast<off_t>(total));
    if (n < 0) return errno_fault(errno, Side::Source, fmt::format("reading {}", shown_path));
    if (n > 0) return changed();  // longer than it was
  }
  if (total != expected_size) return changed();
  StoredContent content{sha.hex_digest(), total, 0};
  if (!compress) return content;
  ZSTD_inBuffer empty{nullptr, 0, 0};
  if (auto done = drain(empty, ZSTD_e_end); !done) return done.fault();
  if (contains(content.sha256)) return content;  // the guard removes the temporary file
  struct stat st {};
  if (::fstat(temp_fd.get(), &st) != 0) {
    return errno_fault(errno, Side::Archive, fmt::format("checking {}", shown(temp_path)));
  }
  const std::string dir = fmt::format("{}/objects/{}", disk_.root(), content.sha256.substr(0, 2));
  if (!path_exists(dir)) {
    if (auto made = disk_.make_dir(dir); !made) return made.fault();
  }
  if (auto done = disk_.commit(temp_fd.get(), temp_path, path_of(content.sha256)); !done) {
    guard.armed = false;  // commit removed it
    return done.fault();
  }
  guard.armed = false;
  content.bytes_added = static_cast<std::uint64_t>(st.st_size);
  return content;
}

Result<std::uint64_t> ObjectStore::extract(const std::string& sha256, int out_fd,
                                           bool sparse) const {
  const std::string file = path_of(sha256);
  UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) {
    return Error{
        fmt::format("object {} {}", sha256, errno == ENOENT ? "is missing" : std::strerror(errno))};
  }
  ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
  auto result = decompress_fd(fd.get(), sha256, out_fd, sparse, cancelled_);
  if (!result) return Error{fmt::format("object {} is damaged: {}", sha256, result.error())};
  return result;
}

Result<std::uint64_t> check_object_file(const std::string& file, const std::string& expected_sha) {
  UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return Error{fmt::format("cannot open: {}", std::strerror(errno))};
  ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
  return decompress_fd(fd.get(), expected_sha, -1, false, {});
}

}  // namespace tw::archive
