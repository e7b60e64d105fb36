// FastCDC with normalized chunking (archiver/chunker.hpp).
#include "archive/format2/chunker.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "archive/disk.hpp"
#include "common/escape.hpp"

namespace tw::archive {
namespace {

// The gear hash forgets a byte 64 bytes after it: fp = (fp << 1) + gear[byte].
constexpr std::size_t kWindow = 64;

// splitmix64 from a fixed seed: the table is part of the format, so it is
// computed the same way by every build (and checked by a test against known
// words).
constexpr std::array<std::uint64_t, 256> make_gear() {
  std::array<std::uint64_t, 256> table{};
  std::uint64_t state = 0x54494d4557415250ULL;  // "TIMEWARP"
  for (auto& word : table) {
    state += 0x9e3779b97f4a7c15ULL;
    std::uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    word = z ^ (z >> 31);
  }
  return table;
}

constexpr std::array<std::uint64_t, 256> kGear = make_gear();

// A mask of `bits` ones in the highest positions: bit k of the gear hash
// depends on the last k + 1 bytes only, so the high bits see (nearly) the whole
// 64-byte window.
constexpr std::uint64_t top_bits(int bits) { return bits <= 0 ? 0 : ~0ULL << (64 - bits); }

// What is wrong with sizes that are not valid().
std::string invalid(const ChunkSizes& sizes) {
  return fmt::format(
      "chunk sizes {}/{}/{}: need 64 <= min < avg < max <= 1 GiB with avg a "
      "power of two",
      sizes.min, sizes.avg, sizes.max);
}

}  // namespace

bool ChunkSizes::valid() const {
  return min >= kWindow && min < avg && avg < max && std::has_single_bit(avg) && avg >= 64 &&
         max <= (std::size_t{1} << 30);
}

std::string chunk_sizes_line(const ChunkSizes& sizes) {
  return fmt::format("chunks {} {} {}\n", sizes.min, sizes.avg, sizes.max);
}

Expected<ChunkSizes> parse_chunk_sizes(std::string_view rest) {
  if (rest.empty()) return kFirstChunkSizes;
  const auto malformed = [&] {
    return permanent(fmt::format("expected 'chunks MIN AVG MAX' after the first line, found '{}'",
                                 shown_path(rest.substr(0, 60))));
  };
  constexpr std::string_view kKey = "chunks";
  if (!rest.starts_with(kKey) || !rest.ends_with('\n')) return malformed();
  std::string_view numbers = rest.substr(kKey.size(), rest.size() - kKey.size() - 1);
  std::array<std::size_t, 3> values{};
  for (auto& value : values) {
    if (!numbers.starts_with(' ')) return malformed();
    numbers.remove_prefix(1);
    const auto [end, err] = std::from_chars(numbers.data(), numbers.data() + numbers.size(), value);
    if (err != std::errc{} || end == numbers.data()) return malformed();
    numbers.remove_prefix(static_cast<std::size_t>(end - numbers.data()));
  }
  if (!numbers.empty()) return malformed();
  const ChunkSizes sizes{.min = values[0], .avg = values[1], .max = values[2]};
  if (!sizes.valid()) return permanent(invalid(sizes));
  return sizes;
}

const std::uint64_t* Chunker::gear() { return kGear.data(); }

Chunker::Chunker(ChunkSizes sizes) : sizes_(sizes) {
  if (!sizes_.valid()) {
    throw std::invalid_argument(invalid(sizes_));
  }
  const int bits = std::countr_zero(sizes_.avg);
  // Normalization level 2 (FastCDC): two bits harder before the normal size,
  // two easier after it, which narrows the spread of chunk sizes around avg.
  mask_small_ = top_bits(bits + 2);
  mask_large_ = top_bits(bits - 2);
}

std::size_t Chunker::cut(std::span<const std::uint8_t> data) const {
  Scan scan;
  return cut_more(data, true, scan);
}

std::size_t Chunker::cut_more(std::span<const std::uint8_t> data, bool end, Scan& scan) const {
  const std::size_t n = data.size();
  if (n <= sizes_.min) return end ? n : 0;
  const std::size_t limit = std::min(n, sizes_.max);
  const std::size_t normal = std::min(sizes_.avg, limit);
  const std::uint8_t* d = data.data();
  std::uint64_t fp = scan.fp;
  std::size_t i = scan.looked;
  if (i < sizes_.min - kWindow) {  // warm the window up: the first cut tested at min
    i = sizes_.min - kWindow;
    fp = 0;
  }
  for (; i < sizes_.min; ++i) fp = (fp << 1) + kGear[d[i]];
  for (; i < normal; ++i) {
    fp = (fp << 1) + kGear[d[i]];
    if ((fp & mask_small_) == 0) return i + 1;
  }
  for (; i < limit; ++i) {
    fp = (fp << 1) + kGear[d[i]];
    if ((fp & mask_large_) == 0) return i + 1;
  }
  if (end || limit == sizes_.max) return limit;
  scan = {i, fp};
  return 0;
}

ChunkReader::ChunkReader(const Chunker& chunker, int fd, std::string shown, ReadBuffer& buffer,
                         std::uint64_t size)
    : chunker_(chunker), fd_(fd), shown_(std::move(shown)), buffer_(buffer), size_(size) {
  if (buffer_.size() < 2 * chunker.sizes().max) buffer_.resize(2 * chunker.sizes().max);
}

Done ChunkReader::fill() {
  const std::size_t want = chunker_.sizes().max;
  if (eof_ || end_ - begin_ >= want) return Ok{};
  if (begin_ + want > buffer_.size()) compact();  // room for a whole max-sized view
  while (end_ - begin_ < want) {
    auto got = read_more(buffer_.size() - end_);
    if (!got) return got.fault();
    if (!*got) break;
  }
  return Ok{};
}

void ChunkReader::compact() {
  if (begin_ == 0) return;
  std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
  end_ -= begin_;
  begin_ = 0;
}

Expected<bool> ChunkReader::read_more(std::size_t bytes) {
  bytes = std::min(bytes, buffer_.size() - end_);
  if (eof_ || bytes == 0) return false;
  const std::uint64_t read_to = offset_ + (end_ - begin_);  // the file offset of end_
  if (size_ != kUnknownSize && read_to <= size_) {
    bytes = static_cast<std::size_t>(std::min<std::uint64_t>(bytes, size_ - read_to + 1));
  }
  const long got = read_some(fd_, buffer_.data() + end_, bytes);
  if (got < 0) return errno_fault(static_cast<int>(-got), Side::Source, "reading " + shown_);
  if (got == 0) {
    eof_ = true;
    return false;
  }
  end_ += static_cast<std::size_t>(got);
  if (static_cast<std::size_t>(got) < bytes && read_to + static_cast<std::uint64_t>(got) == size_) {
    eof_ = true;
  }
  return true;
}

Expected<std::span<const std::uint8_t>> ChunkReader::peek() {
  if (auto filled = fill(); !filled) return filled.fault();
  return held();
}

void ChunkReader::take(std::size_t length) {
  begin_ += length;
  offset_ += length;
}

Expected<std::span<const std::uint8_t>> ChunkReader::next() {
  auto view = peek();
  if (!view) return view.fault();
  const std::size_t length = chunker_.cut(*view);
  take(length);
  return view->first(length);
}

}  // namespace tw::archive
