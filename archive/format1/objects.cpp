// Format 1's content objects, read only (archive/format1/objects.hpp).
#include "archive/format1/objects.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <vector>

#include <fmt/format.h>
#include <zstd.h>

#include "archive/disk.hpp"

namespace tw::archive {
namespace {

struct DCtxFree {
  void operator()(ZSTD_DCtx* d) const { ZSTD_freeDCtx(d); }
};

// Decompresses an object's frame into a sink, which re-hashes it. The sink's failures are
// RETRY faults in its own words, without archive_fault's prefix: the caller names the
// object.
Expected<std::uint64_t> decompress_fd(int in_fd, const std::string& expected_sha, int out_fd,
                                      bool sparse, const std::function<bool()>& cancelled) {
  std::unique_ptr<ZSTD_DCtx, DCtxFree> dctx(ZSTD_createDCtx());
  if (!dctx) return retry("out of memory for zstd");
  std::vector<char> in(ZSTD_DStreamInSize());
  std::vector<char> out(ZSTD_DStreamOutSize());
  ContentSink sink(out_fd, sparse);
  std::size_t last = 1;  // ZSTD_decompressStream: 0 once a frame is complete
  bool any_input = false;
  // Decompresses what `input` holds (nothing: what the decoder still holds) into the sink.
  const auto drain = [&](ZSTD_inBuffer& input) -> Done {
    do {
      ZSTD_outBuffer output{out.data(), out.size(), 0};
      last = ZSTD_decompressStream(dctx.get(), &output, &input);
      if (ZSTD_isError(last)) {
        return retry(fmt::format("corrupt compressed data ({})", ZSTD_getErrorName(last)));
      }
      TRY(sink.write({out.data(), output.pos}));
      if (input.size == 0 && output.pos == 0) break;
    } while (input.pos < input.size || (input.size == 0 && last != 0));
    return Ok{};
  };
  while (true) {
    if (cancelled && cancelled()) return retry("cancelled");
    const long n = read_some(in_fd, in.data(), in.size());
    if (n < 0) return retry(fmt::format("read error: {}", std::strerror(static_cast<int>(-n))));
    if (n == 0) break;
    any_input = true;
    ZSTD_inBuffer input{in.data(), static_cast<std::size_t>(n), 0};
    TRY(drain(input));
  }
  if (!any_input) return retry("truncated (empty file)");
  // Flush what the decoder still holds once the input is exhausted.
  ZSTD_inBuffer none{nullptr, 0, 0};
  if (last != 0) TRY(drain(none));
  if (last != 0) return retry("truncated (compressed frame incomplete)");
  return sink.finish(expected_sha);
}

}  // namespace

std::string object_file(const std::string& root, const std::string& sha256) {
  return fmt::format("{}/objects/{}/{}.zst", root, sha256.substr(0, 2), sha256);
}

Expected<std::uint64_t> extract_object(const std::string& root, const std::string& sha256,
                                       int out_fd, bool sparse,
                                       const std::function<bool()>& cancelled) {
  const std::string file = object_file(root, sha256);
  UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) {
    return retry(
        fmt::format("object {} {}", sha256, errno == ENOENT ? "is missing" : std::strerror(errno)));
  }
  ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
  auto result = decompress_fd(fd.get(), sha256, out_fd, sparse, cancelled);
  if (!result) return in_context(fmt::format("object {} is damaged", sha256), result.fault());
  return result;
}

Expected<std::uint64_t> check_object_file(const std::string& file,
                                          const std::string& expected_sha) {
  UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return retry(fmt::format("cannot open: {}", std::strerror(errno)));
  ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
  return decompress_fd(fd.get(), expected_sha, -1, false, {});
}

}  // namespace tw::archive
