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
#include <vector>

#include "archiver/fault.hpp"

namespace tw::archive {

struct ChunkSizes {
  std::size_t min = 256 << 10;  // no cut before this many bytes (except at the end)
  std::size_t avg = 1 << 20;    // the normal size: a power of two
  std::size_t max = 4 << 20;    // always a cut here

  // True when min < avg < max, avg is a power of two between 64 B and 1 GiB,
  // and min >= 64 (the gear hash's window, so a cut depends on content alone).
  bool valid() const;
};

class Chunker {
 public:
  explicit Chunker(ChunkSizes sizes = {});

  const ChunkSizes& sizes() const { return sizes_; }

  // The length of the chunk that starts at data[0]: where the first cut falls
  // within `data`, or data.size() when there is none before the end. A caller
  // that has more bytes after `data` must offer at least sizes().max bytes (or
  // all that is left), so that a cut is never decided on a shortened view.
  std::size_t cut(std::span<const std::uint8_t> data) const;

  // The gear table: 256 fixed pseudo-random words. Changing it moves every cut
  // (content still restores, but nothing chunked before deduplicates against
  // what comes after), so it is part of the format.
  static const std::uint64_t* gear();

 private:
  ChunkSizes sizes_;
  std::uint64_t mask_small_;  // harder to match: used before the normal size
  std::uint64_t mask_large_;  // easier: used after it
};

// Reads a file descriptor to its end in content-defined chunks through one
// buffer of 2 x sizes.max bytes, so a file of any size takes bounded memory.
class ChunkReader {
 public:
  // `shown` names the file in messages (shown_path). `buffer` (grown to 2 x sizes.max) is
  // the caller's, so that many files in a row reuse one allocation.
  ChunkReader(const Chunker& chunker, int fd, std::string shown, std::vector<std::uint8_t>& buffer);

  // The next chunk (valid until the following call), empty at the end of the
  // file; a read error is a Fault naming the file (Side::Source).
  Expected<std::span<const std::uint8_t>> next();
  // Bytes handed out so far.
  std::uint64_t offset() const { return offset_; }
  // True when the file's end was read and every byte handed out: the next chunk is empty.
  bool at_end() const { return eof_ && begin_ == end_; }

 private:
  Done fill();

  const Chunker& chunker_;
  int fd_;
  std::string shown_;
  std::vector<std::uint8_t>& buffer_;
  std::size_t begin_ = 0;  // the next chunk starts here
  std::size_t end_ = 0;    // bytes read into buffer_
  bool eof_ = false;
  std::uint64_t offset_ = 0;
};

}  // namespace tw::archive
