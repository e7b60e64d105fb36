// Writing a file from its start (archive/file_out.hpp).
#include "archive/file_out.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "archive/disk.hpp"

namespace tw::archive {
namespace {

// The alignment direct I/O on `fd` asks of offsets, lengths and memory, or 0 when the
// file is not a regular one or its filesystem does not say it takes direct I/O.
std::size_t direct_alignment(int fd) {
  struct statx info {};
  if (::statx(fd, "", AT_EMPTY_PATH, STATX_TYPE | STATX_DIOALIGN, &info) != 0) return 0;
  if (!S_ISREG(info.stx_mode) || (info.stx_mask & STATX_DIOALIGN) == 0) return 0;
  if (info.stx_dio_offset_align == 0 || info.stx_dio_mem_align == 0) return 0;
  // One block size for all three; the buffer's size must be a multiple of it.
  const std::size_t align =
      std::max<std::size_t>({info.stx_dio_offset_align, info.stx_dio_mem_align, std::size_t{4096}});
  return FileOut::kDirectBuffer % align == 0 ? align : 0;
}

std::uint64_t round_up(std::uint64_t n, std::uint64_t to) { return (n + to - 1) / to * to; }

}  // namespace

void Writeback::wrote(int fd, std::uint64_t end) {
  if (end - from_ < kWritebackEvery) return;
  ::sync_file_range(fd, static_cast<off_t>(from_), static_cast<off_t>(end - from_),
                    SYNC_FILE_RANGE_WRITE);
  from_ = end;
}

void FileOut::Free::operator()(char* p) const { std::free(p); }

int FileOut::write(std::string_view data) {
  if (!direct_ && !tried_direct_ && pos_ + data.size() >= kDirectFrom) {
    // Through the page cache up to a block boundary (4 KiB: a direct block size is a
    // power of two no smaller), then direct from there when the filesystem takes it.
    const std::uint64_t boundary = round_up(pos_, 4096);
    const auto head =
        static_cast<std::size_t>(std::min<std::uint64_t>(boundary - pos_, data.size()));
    if (head > 0) {
      if (const int err = write_buffered(data.substr(0, head)); err != 0) return err;
      data.remove_prefix(head);
    }
    if (pos_ % 4096 == 0) start_direct();
  }
  return direct_ ? append(data) : write_buffered(data);
}

int FileOut::write_buffered(std::string_view data) {
  if (data.empty()) return 0;
  if (const int err = write_all(fd_, data.data(), data.size()); err != 0) return err;
  pos_ += data.size();
  writeback_.wrote(fd_, pos_);
  return 0;
}

void FileOut::start_direct() {
  tried_direct_ = true;
  align_ = direct_alignment(fd_);
  // (A block larger than 4 KiB, and not on one of its boundaries: no direct writing.)
  if (align_ == 0 || pos_ % align_ != 0) return;
  const int flags = ::fcntl(fd_, F_GETFL);
  if (flags < 0 || ::fcntl(fd_, F_SETFL, flags | O_DIRECT) != 0) return;
  buffer_.reset(static_cast<char*>(std::aligned_alloc(align_, kDirectBuffer)));
  if (!buffer_) {
    ::fcntl(fd_, F_SETFL, flags);
    return;
  }
  at_ = pos_;
  used_ = 0;
  direct_ = true;
}

int FileOut::append(std::string_view data) {
  while (!data.empty()) {
    const std::size_t n = std::min(kDirectBuffer - used_, data.size());
    std::memcpy(buffer_.get() + used_, data.data(), n);
    used_ += n;
    pos_ += n;
    data.remove_prefix(n);
    if (used_ == kDirectBuffer) {
      if (const int err = flush(); err != 0) return err;
    }
  }
  return 0;
}

int FileOut::flush() {
  if (used_ == 0) return 0;
  const auto size = static_cast<std::size_t>(round_up(used_, align_));
  std::memset(buffer_.get() + used_, 0, size - used_);  // the last block's padding
  int err = pwrite_all(fd_, buffer_.get(), size, at_);
  if (err == EINVAL) return fall_back();
  if (err != 0) return err;
  at_ += used_;
  used_ = 0;
  return 0;
}

// A direct write refused: the buffer, and the rest, through the page cache.
int FileOut::fall_back() {
  direct_ = false;
  const int flags = ::fcntl(fd_, F_GETFL);
  if (flags < 0 || ::fcntl(fd_, F_SETFL, flags & ~O_DIRECT) != 0) return errno;
  if (const int err = pwrite_all(fd_, buffer_.get(), used_, at_); err != 0) return err;
  buffer_.reset();
  used_ = 0;
  if (::lseek(fd_, static_cast<off_t>(pos_), SEEK_SET) < 0) return errno;
  return 0;
}

int FileOut::skip(std::uint64_t count) {
  if (!direct_) {
    if (::lseek(fd_, static_cast<off_t>(count), SEEK_CUR) < 0) return errno;
    pos_ += count;
    holes_ = true;
    return 0;
  }
  // The buffer's last block is filled with zeros, then whole blocks are skipped; the zeros
  // left begin the next block.
  const std::uint64_t fill = std::min<std::uint64_t>(round_up(used_, align_) - used_, count);
  std::memset(buffer_.get() + used_, 0, fill);
  used_ += fill;
  pos_ += fill;
  count -= fill;
  if (count == 0) return 0;
  if (const int err = flush(); err != 0) return err;
  if (!direct_) return skip(count);  // fell back
  const std::uint64_t whole = count / align_ * align_;
  at_ += whole;
  pos_ += whole;
  holes_ = holes_ || whole > 0;
  std::memset(buffer_.get(), 0, count - whole);
  used_ = count - whole;
  pos_ += used_;
  return 0;
}

int FileOut::finish() {
  bool padded = false;
  if (direct_ && used_ > 0) {
    padded = used_ % align_ != 0;
    if (const int err = flush(); err != 0) return err;
  }
  if ((holes_ || padded) && ::ftruncate(fd_, static_cast<off_t>(pos_)) != 0) return errno;
  return 0;
}

}  // namespace tw::archive
