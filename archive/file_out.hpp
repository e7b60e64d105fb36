// Writing a file from its start: the writeback hint, and the writing side of a restored
// file's content (ContentSink, archive/disk.hpp). Internal to the archive library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

namespace tw::archive {

// How often writeback of a file being written is started (sync_file_range), so that its
// sync at the end waits for the last few MiB only.
inline constexpr std::uint64_t kWritebackEvery = 8 << 20;

// Starts writeback of a file written from its start every kWritebackEvery bytes. Only a
// hint: durability is still the file's sync (an error shows again there).
class Writeback {
 public:
  // `end`: how many bytes of the file `fd` are written now.
  void wrote(int fd, std::uint64_t end);

 private:
  std::uint64_t from_ = 0;  // where the next writeback starts
};

// A file is written through the page cache until a write takes it past kDirectFrom
// bytes; from the next 4 KiB boundary on, where the filesystem takes direct I/O (statx's
// STATX_DIOALIGN), the rest goes with O_DIRECT from an aligned buffer of kDirectBuffer
// bytes. A large restore then neither copies its bytes into the page cache nor leaves them
// dirty there for the sync at its end, and the host's cost of first touching page-cache
// memory is not paid. A filesystem that refuses a direct write (EINVAL) gets the rest
// through the page cache. Small files never see O_DIRECT.
class FileOut {
 public:
  static constexpr std::uint64_t kDirectFrom = 4 << 20;
  static constexpr std::size_t kDirectBuffer = 4 << 20;

  explicit FileOut(int fd) : fd_(fd) {}
  // Each returns 0 or an errno.
  int write(std::string_view data);
  // `count` zero bytes as a hole (a seek; whole blocks only once direct).
  int skip(std::uint64_t count);
  // Gives the file its length (`written()` bytes) where holes or the last block's padding
  // left it otherwise.
  int finish();
  std::uint64_t written() const { return pos_; }
  bool direct() const { return direct_; }

 private:
  struct Free {
    void operator()(char* p) const;
  };
  int write_buffered(std::string_view data);
  void start_direct();
  int append(std::string_view data);
  int flush();  // all of the buffer, its last block padded with zeros
  int fall_back();

  int fd_;
  std::uint64_t pos_ = 0;  // bytes written or skipped
  bool holes_ = false;
  Writeback writeback_;
  // Direct writing: `buffer_` holds [at_, at_ + used_), `at_` a multiple of `align_`.
  bool tried_direct_ = false;
  bool direct_ = false;
  std::size_t align_ = 0;
  std::unique_ptr<char, Free> buffer_;
  std::size_t used_ = 0;
  std::uint64_t at_ = 0;
};

}  // namespace tw::archive
