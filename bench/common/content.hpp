// Seeded content for the benchmarks: text-like (compresses ~2.3:1 at zstd level 1, like
// source code or documents) and random (incompressible, like media or encrypted files).
// The same seed gives the same bytes, so runs and tools can be compared.
#pragma once
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace tw::bench {

enum class Content { Text, Random };

// Text-like content: random words from a small vocabulary with numbers mixed in.
inline void fill_text(std::string& buffer, std::mt19937_64& random) {
  static const std::vector<std::string> kWords = [] {
    std::vector<std::string> words;
    std::mt19937_64 r(7);
    for (int i = 0; i < 2000; ++i) {
      std::string w;
      const int len = 2 + static_cast<int>(r() % 9);
      for (int j = 0; j < len; ++j) w.push_back(static_cast<char>('a' + r() % 26));
      words.push_back(w);
    }
    return words;
  }();
  std::size_t i = 0;
  while (i < buffer.size()) {
    const std::uint64_t r = random();
    std::string piece = (r & 7) == 0 ? std::to_string(r >> 40) : kWords[(r >> 8) % kWords.size()];
    piece.push_back((r & 0xF0) == 0 ? '\n' : ' ');
    const std::size_t n = std::min(piece.size(), buffer.size() - i);
    std::memcpy(&buffer[i], piece.data(), n);
    i += n;
  }
}

// Random bytes.
inline void fill_random(std::string& buffer, std::mt19937_64& random) {
  for (std::size_t i = 0; i < buffer.size(); i += 8) {
    const std::uint64_t r = random();
    std::memcpy(&buffer[i], &r, std::min<std::size_t>(8, buffer.size() - i));
  }
}

// Writes `size` bytes of `content` to `path`: a new file, or appended to an existing one
// with `append`.
inline void write_file(const std::string& path, std::uint64_t size, std::mt19937_64& random,
                       Content content = Content::Text, bool append = false) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC),
                        0644);
  if (fd < 0)
    throw std::runtime_error(fmt::format("cannot create {}: {}", path, std::strerror(errno)));
  std::string chunk(std::min<std::uint64_t>(size, 4 << 20), '\0');
  for (std::uint64_t done = 0; done < size;) {
    const std::size_t n =
        static_cast<std::size_t>(std::min<std::uint64_t>(chunk.size(), size - done));
    if (content == Content::Text) {
      fill_text(chunk, random);
    } else {
      fill_random(chunk, random);
    }
    if (::write(fd, chunk.data(), n) != static_cast<ssize_t>(n)) {
      ::close(fd);
      throw std::runtime_error(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
    }
    done += n;
  }
  ::close(fd);
}

}  // namespace tw::bench
