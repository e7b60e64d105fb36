// Content-defined chunking for archive format 2 (FORMAT.md, "Format 2"):
// FastCDC's gear hash with normalized chunking (Xia et al., 2016/2020). A cut
// point depends only on the bytes shortly before it, so an insertion, deletion
// or append moves the cuts near the edit and leaves every other chunk as it
// was: a large file that changes a little stores little more. Internal to the
// archive library. Chunker is immutable after construction and safe from any
// thread; a ChunkReader belongs to one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "archive/expected.hpp"
#include "common/buffer.hpp"

namespace tw::archive {

// The sizes of a new archive's chunks (Borg's; restic cuts at 512 KiB-8 MiB around 1 MiB).
// An archive keeps the sizes it was made with (FORMAT.md, "The FORMAT file"), so that a file
// changed after an upgrade is cut where it was before and deduplicates against its chunks.
struct ChunkSizes {
  std::size_t min = 512 << 10;  // no cut before this many bytes (except at the end)
  std::size_t avg = 2 << 20;    // the normal size: a power of two
  std::size_t max = 8 << 20;    // always a cut here

  // True when min < avg < max <= 1 GiB, avg is a power of two, and min >= 64 (the gear
  // hash's window, so a cut depends on content alone).
  bool valid() const;
};

// The sizes of archives whose FORMAT file names none: those the first releases of format 2
// made.
inline constexpr ChunkSizes kFirstChunkSizes{.min = 256 << 10, .avg = 1 << 20, .max = 4 << 20};

// A FORMAT file's line for `sizes`: "chunks MIN AVG MAX\n" (bytes, in decimal).
std::string chunk_sizes_line(const ChunkSizes& sizes);

// The sizes what follows format 2's first line in a FORMAT file names: kFirstChunkSizes
// when it is empty, else one chunk_sizes_line of valid sizes (a PERMANENT fault saying what
// is wrong otherwise).
Expected<ChunkSizes> parse_chunk_sizes(std::string_view rest);

class Chunker {
 public:
  explicit Chunker(ChunkSizes sizes = {});

  const ChunkSizes& sizes() const { return sizes_; }

  // The length of the chunk that starts at data[0]: where the first cut falls
  // within `data`, or data.size() when there is none before the end. A caller
  // that has more bytes after `data` must offer at least sizes().max bytes (or
  // all that is left), so that a cut is never decided on a shortened view.
  std::size_t cut(std::span<const std::uint8_t> data) const;

  // How far the bytes of one chunk were looked at, for a cut decided over bytes that come in
  // parts (cut_more).
  struct Scan {
    std::size_t looked = 0;  // bytes of the chunk the hash has taken in
    std::uint64_t fp = 0;    // the gear hash after them
  };
  // cut() over the bytes of a chunk that come in parts: `data` is every byte of the chunk so
  // far, `end` whether the file ends after them. Returns the cut, or 0 when more bytes are
  // needed to decide it; each byte is looked at once, however many parts it takes.
  std::size_t cut_more(std::span<const std::uint8_t> data, bool end, Scan& scan) const;

  // The gear table: 256 fixed pseudo-random words. Changing it moves every cut
  // (content still restores, but nothing chunked before deduplicates against
  // what comes after), so it is part of the format.
  static const std::uint64_t* gear();

 private:
  ChunkSizes sizes_;
  std::uint64_t mask_small_;  // harder to match: used before the normal size
  std::uint64_t mask_large_;  // easier: used after it
};

// The reader's buffer: grown without being zeroed (common/buffer.hpp), so a 16 MiB buffer
// used for files of a few KiB costs a few KiB of resident memory.
using ReadBuffer = UninitializedVector<std::uint8_t>;

// Reads a file descriptor to its end in content-defined chunks through one
// buffer of 2 x sizes.max bytes, so a file of any size takes bounded memory. next() cuts one
// chunk at a time; held(), read_more() and take() let a caller cut several chunks in place
// and read only as far as their cuts need (ChunkStore's windows).
class ChunkReader {
 public:
  // `shown` names the file in messages (shown_path). `buffer` (grown to 2 x sizes.max) is
  // the caller's, so that many files in a row reuse one allocation. With `size`, the
  // file's size when it was opened, a read asks for at most one byte past it, and one that
  // comes back short exactly there has met the file's end: no further read is made to find
  // it (a small file's second read, which returned nothing). A file that has grown gives
  // that byte, and is read on to its end as without `size`.
  static constexpr std::uint64_t kUnknownSize = UINT64_MAX;
  ChunkReader(const Chunker& chunker, int fd, std::string shown, ReadBuffer& buffer,
              std::uint64_t size = kUnknownSize);

  // The next chunk (valid until the following call), empty at the end of the
  // file; a read error is a Fault naming the file (Side::Source).
  Expected<std::span<const std::uint8_t>> next();
  // The bytes not yet handed out, without handing them out: at least sizes().max of them,
  // or all that is left of the file (empty at its end). Valid until the next call of
  // peek(), next() or compact().
  Expected<std::span<const std::uint8_t>> peek();
  // The bytes read and not yet handed out; no read is made.
  std::span<const std::uint8_t> held() const { return {buffer_.data() + begin_, end_ - begin_}; }
  // Moves what is held to the buffer's start (what held() returned before is no longer valid).
  void compact();
  // Reads up to `bytes` more after what is held, without moving it: fewer at the file's end
  // or where the buffer ends. False when nothing more could be read.
  Expected<bool> read_more(std::size_t bytes);
  // Hands out the first `length` bytes of what is held (next() is peek(), a cut and take()).
  void take(std::size_t length);
  // True when what is held ends at the file's end.
  bool reaches_end() const { return eof_; }
  // Bytes handed out so far.
  std::uint64_t offset() const { return offset_; }
  // True when the file's end was read and every byte handed out: the next chunk is empty.
  bool at_end() const { return eof_ && begin_ == end_; }

 private:
  Done fill();

  const Chunker& chunker_;
  int fd_;
  std::string shown_;
  ReadBuffer& buffer_;
  std::size_t begin_ = 0;  // the next chunk starts here
  std::size_t end_ = 0;    // bytes read into buffer_
  std::uint64_t size_;     // the file's size when opened, or kUnknownSize
  bool eof_ = false;
  std::uint64_t offset_ = 0;
};

}  // namespace tw::archive
