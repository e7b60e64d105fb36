#include "archiver/objects.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <zstd.h>

#include "archiver/sha256.hpp"

namespace tw::archive {
namespace {

// Reads of 64 KiB keep the buffers in the core's cache while they are hashed and
// compressed: 256 KiB reads were 20-40% slower on incompressible files (bench/archive).
constexpr std::size_t kReadBuffer = 64 * 1024;
// Files at least this large are hashed by a thread of their own while the calling thread
// reads them, compresses them (through zstd's worker threads when they compress) and
// writes the object; smaller ones are not worth a thread.
constexpr std::uint64_t kThreadsFrom = 4 << 20;
// Read buffers in flight while the hashing thread works.
constexpr std::size_t kReadBuffers = 16;
// A large file whose samples (kReadBuffer at its start and in its middle) shrink by less
// than this, in percent, counts as incompressible.
constexpr std::size_t kCompressibleSaving = 3;

// Automatic compression threads: one per online core, but no more than this. Each one
// holds ~3 zstd jobs of buffers; four keep an archiver under 64 MiB (bench/archive (c)).
constexpr int kAutomaticThreadsMax = 4;

// Job sizes for zstd's workers at levels 1 and below, where zstd itself picks jobs of
// 2 MiB (four of its 512 KiB windows): input bytes per round of jobs, shared among the
// workers, so that a job is kJobBytes / workers, between 2 and 4 MiB. Jobs of 4 MiB compress
// text-like files ~5% faster than 2 MiB with two workers (fewer job hand-overs and
// restarts; bench/archive), for ~13 MiB more memory; with four workers they stay at 2 MiB,
// so the memory bound above holds. From level 2 up zstd's own jobs are 4 MiB or more (and
// must span several of its larger windows): they are left as they are.
constexpr std::size_t kJobBytes = 8 << 20;
constexpr std::size_t kJobSizeMin = 2 << 20;
constexpr std::size_t kJobSizeMax = 4 << 20;

// The job size for `workers` (> 0) zstd workers at `level`; 0: zstd's own.
std::size_t job_size(int workers, int level) {
  if (level > 1) return 0;
  return std::clamp(kJobBytes / static_cast<std::size_t>(workers), kJobSizeMin, kJobSizeMax);
}

}  // namespace

int resolved_threads(int threads) {
  if (threads != 0) return threads;
  return std::clamp(static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN)), 1, kAutomaticThreadsMax);
}

namespace {

// How many zstd workers `threads` (CompressionOptions) asks for: 0 when compression stays
// in the calling thread, also when this libzstd was built without multithreading.
int zstd_workers(int threads) {
  threads = resolved_threads(threads);
  if (threads <= 1) return 0;
  const ZSTD_bounds bounds = ZSTD_cParam_getBounds(ZSTD_c_nbWorkers);
  if (ZSTD_isError(bounds.error) || bounds.upperBound < 1) {
    spdlog::info("libzstd has no multithreading: large files are compressed in one thread");
    return 0;
  }
  return std::min(threads, bounds.upperBound);
}

struct DCtxFree {
  void operator()(ZSTD_DCtx* d) const { ZSTD_freeDCtx(d); }
};

Result<std::uint64_t> decompress_fd(int in_fd, const std::string& expected_sha, int out_fd,
                                    bool sparse, const std::function<bool()>& cancelled) {
  std::unique_ptr<ZSTD_DCtx, DCtxFree> dctx(ZSTD_createDCtx());
  if (!dctx) return Error{"out of memory for zstd"};
  std::vector<char> in(ZSTD_DStreamInSize());
  std::vector<char> out(ZSTD_DStreamOutSize());
  ContentSink sink(out_fd, sparse);
  std::size_t last = 1;  // ZSTD_decompressStream: 0 once a frame is complete
  bool any_input = false;
  // Decompresses what `input` holds (nothing: what the decoder still holds) into the sink.
  const auto drain = [&](ZSTD_inBuffer& input) -> Status {
    do {
      ZSTD_outBuffer output{out.data(), out.size(), 0};
      last = ZSTD_decompressStream(dctx.get(), &output, &input);
      if (ZSTD_isError(last)) {
        return Error{fmt::format("corrupt compressed data ({})", ZSTD_getErrorName(last))};
      }
      if (auto written = sink.write({out.data(), output.pos}); !written) return written;
      if (input.size == 0 && output.pos == 0) break;
    } while (input.pos < input.size || (input.size == 0 && last != 0));
    return Ok{};
  };
  while (true) {
    if (cancelled && cancelled()) return Error{"cancelled"};
    const long n = read_some(in_fd, in.data(), in.size());
    if (n < 0) return Error{fmt::format("read error: {}", std::strerror(static_cast<int>(-n)))};
    if (n == 0) break;
    any_input = true;
    ZSTD_inBuffer input{in.data(), static_cast<std::size_t>(n), 0};
    if (auto done = drain(input); !done) return Error{done.error()};
  }
  if (!any_input) return Error{"truncated (empty file)"};
  // Flush what the decoder still holds once the input is exhausted.
  ZSTD_inBuffer none{nullptr, 0, 0};
  if (last != 0) {
    if (auto done = drain(none); !done) return Error{done.error()};
  }
  if (last != 0) return Error{"truncated (compressed frame incomplete)"};
  return sink.finish(expected_sha);
}

}  // namespace

void ObjectStore::CCtxFree::operator()(ZSTD_CCtx* cctx) const { ZSTD_freeCCtx(cctx); }

ObjectStore::ObjectStore(DiskWriter& disk, std::function<bool()> cancelled,
                         CompressionOptions compression)
    : disk_(disk),
      cancelled_(std::move(cancelled)),
      level_(compression.level),
      threads_(compression.threads) {}

bool ObjectStore::threaded(std::uint64_t size) {
  if (workers_ < 0) workers_ = zstd_workers(threads_);
  return workers_ > 0 && size >= kThreadsFrom;
}

ZSTD_CCtx* ObjectStore::context(bool multi) {
  CCtxPtr& cctx = multi ? multi_ : single_;
  if (cctx) return cctx.get();
  cctx.reset(ZSTD_createCCtx());
  if (!cctx) return nullptr;
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_compressionLevel, level_);
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_checksumFlag, 1);
  if (multi && ZSTD_isError(ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_nbWorkers, workers_))) {
    spdlog::info("zstd refused {} worker threads: files are compressed in one thread", workers_);
    workers_ = 0;
    multi_.reset();
    return context(false);
  }
  if (multi) {
    // A libzstd that refuses it keeps its own job size: the frame is the same either way.
    ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_jobSize,
                           static_cast<int>(job_size(workers_, level_)));
  }
  return cctx.get();
}

ZSTD_CCtx* ObjectStore::compressor(std::uint64_t size, bool multi) {
  ZSTD_CCtx* cctx = context(multi);
  if (cctx == nullptr) return nullptr;
  ZSTD_CCtx_reset(cctx, ZSTD_reset_session_only);  // ends a frame left unfinished
  ZSTD_CCtx_setPledgedSrcSize(cctx, size);
  return cctx;
}

bool ObjectStore::compressible(int fd, std::uint64_t size) {
  ZSTD_CCtx* cctx = context(false);
  if (cctx == nullptr) return true;
  std::uint64_t read = 0;
  std::uint64_t compressed = 0;
  for (const std::uint64_t at : {std::uint64_t{0}, size / 2}) {
    const ssize_t n = ::pread(fd, in_[0].data(), kReadBuffer, static_cast<off_t>(at));
    if (n <= 0) return true;  // the real read reports what went wrong
    const std::size_t c =
        ZSTD_compress2(cctx, out_.data(), out_.size(), in_[0].data(), static_cast<std::size_t>(n));
    if (ZSTD_isError(c)) return true;
    read += static_cast<std::uint64_t>(n);
    compressed += c;
  }
  return compressed * 100 < read * (100 - kCompressibleSaving);
}

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
  const bool parallel = compress && threaded(expected_size);
  in_.resize(parallel ? kReadBuffers : 1);
  for (auto& buffer : in_) buffer.resize(kReadBuffer);
  out_.resize(ZSTD_CStreamOutSize());
  const auto changed = [&] {
    return retry(fmt::format("changed while being read: {}", shown_path));
  };
  ZSTD_CCtx* cctx = nullptr;
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
    // zstd's workers only for content that compresses: on incompressible content their
    // extra buffer copies cost more than they save, and one thread keeps up (bench/archive).
    cctx = compressor(expected_size, parallel && compressible(fd, expected_size));
    if (cctx == nullptr) return retry("archive: out of memory for zstd");
    auto created = disk_.create_temp(temp_path);
    if (!created) return created.fault();
    temp_fd = std::move(created.value());
  }
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  Sha256 sha;
  std::optional<Sha256Thread> sha_thread;
  if (parallel) sha_thread.emplace();
  // With the hashing thread, read buffers are used in turn; tickets[i] is the hashing
  // ticket of buffer i's last content, which must be hashed before the buffer is reused.
  std::uint64_t tickets[kReadBuffers] = {};
  std::size_t current = 0;
  const auto next_buffer = [&]() -> char* {
    if (sha_thread) sha_thread->wait(tickets[current]);
    return in_[current].data();
  };
  std::uint64_t total = 0;
  std::uint64_t written = 0;
  std::uint64_t writeback_from = 0;
  const auto drain = [&](ZSTD_inBuffer& input, ZSTD_EndDirective mode) -> Done {
    while (true) {
      ZSTD_outBuffer output{out_.data(), out_.size(), 0};
      const std::size_t remaining = ZSTD_compressStream2(cctx, &output, &input, mode);
      if (ZSTD_isError(remaining)) return zstd_fault(remaining);
      if (output.pos > 0) {
        if (const int err = write_all(temp_fd.get(), out_.data(), output.pos); err != 0) {
          return errno_fault(err, Side::Archive,
                             fmt::format("writing {}", tw::shown_path(temp_path)));
        }
        if (written == 0) disk_.step("object-data");
        written += output.pos;
        // Start writing the object to disk while it is being made, so that the fsync at
        // the end waits for the last few MiB only. A hint: errors show in that fsync.
        if (written - writeback_from >= kWritebackEvery) {
          ::sync_file_range(temp_fd.get(), static_cast<off_t>(writeback_from),
                            static_cast<off_t>(written - writeback_from), SYNC_FILE_RANGE_WRITE);
          writeback_from = written;
        }
      }
      const bool finished = mode == ZSTD_e_end ? remaining == 0 : input.pos == input.size;
      if (finished) return Ok{};
    }
  };
  const auto consume = [&](const char* data, std::size_t n) -> Done {
    if (sha_thread) {
      tickets[current] = sha_thread->add(data, n);
      current = (current + 1) % in_.size();
    } else {
      sha.update(data, n);
    }
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
          std::min<off_t>(region_end - static_cast<off_t>(total), static_cast<off_t>(kReadBuffer)));
      char* buffer = next_buffer();
      if (hole) {
        std::memset(buffer, 0, want);
        if (auto done = consume(buffer, want); !done) return done.fault();
        continue;
      }
      const ssize_t n = ::pread(fd, buffer, want, static_cast<off_t>(total));
      if (n < 0) {
        if (errno == EINTR) continue;
        return errno_fault(errno, Side::Source, fmt::format("reading {}", shown_path));
      }
      if (n == 0) return changed();  // shorter than it was
      if (auto done = consume(buffer, static_cast<std::size_t>(n)); !done) return done.fault();
    }
  }
  {
    char extra = 0;
    const ssize_t n = ::pread(fd, &extra, 1, static_cast<off_t>(total));
    if (n < 0) return errno_fault(errno, Side::Source, fmt::format("reading {}", shown_path));
    if (n > 0) return changed();  // longer than it was
  }
  if (total != expected_size) return changed();
  StoredContent content{sha_thread ? sha_thread->hex_digest() : sha.hex_digest(), total, 0};
  if (!compress) return content;
  ZSTD_inBuffer empty{nullptr, 0, 0};
  if (auto done = drain(empty, ZSTD_e_end); !done) return done.fault();
  if (contains(content.sha256)) return content;  // the guard removes the temporary file
  struct stat st {};
  if (::fstat(temp_fd.get(), &st) != 0) {
    return errno_fault(errno, Side::Archive, fmt::format("checking {}", tw::shown_path(temp_path)));
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
