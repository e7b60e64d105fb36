#include "cli/check_archive_nodes.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "archiver/sha256.hpp"
#include "common/escape.hpp"
#include "common/fd.hpp"

namespace tw::cli {
namespace {

// Up to `limit` bytes of a file, stopping early once `enough` says so. Nothing when the
// file cannot be opened or read.
template <class Enough>
std::optional<std::string> read_head(const std::string& file, std::size_t limit, Enough enough) {
  UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return std::nullopt;
  std::string text;
  char buffer[16 * 1024];
  while (text.size() < limit) {
    const ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    if (n == 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
    if (enough(text)) break;
  }
  return text;
}

}  // namespace

std::string ArchiveNodes::key_of(std::string_view path) { return archive::sha256_hex(path); }

std::string ArchiveNodes::node_base(std::string_view key) const {
  return fmt::format("{}/nodes/{}/{}", root_, key.substr(0, 2), key);
}

Result<std::vector<std::string>> ArchiveNodes::child_keys(std::string_view path) const {
  std::vector<std::string> keys;
  const std::string dir = node_base(key_of(path)) + ".children";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT || errno == ENOTDIR) return keys;
    return Error{fmt::format("cannot list {}: {}", dir, std::strerror(errno))};
  }
  std::unique_ptr<DIR, int (*)(DIR*)> closer(d, ::closedir);
  errno = 0;
  while (const dirent* entry = ::readdir(d)) {
    if (archive::is_sha256_hex(entry->d_name)) keys.emplace_back(entry->d_name);
  }
  if (errno != 0) return Error{fmt::format("cannot list {}: {}", dir, std::strerror(errno))};
  return keys;
}

std::optional<std::string> ArchiveNodes::path_of(std::string_view key) const {
  const std::string base = node_base(key);
  std::optional<std::string> path =
      read_head(base + ".path", PATH_MAX * 4, [](const std::string&) { return false; });
  if (!path) {
    // A history names its own path on its second line.
    constexpr std::string_view kPathLine = "timewarp-history 1\npath\t";
    auto head = read_head(base + ".history", 64 * 1024, [&](const std::string& text) {
      return text.find('\n', kPathLine.size()) != std::string::npos;
    });
    if (!head || head->compare(0, kPathLine.size(), kPathLine) != 0) return std::nullopt;
    const auto end = head->find('\n', kPathLine.size());
    if (end == std::string::npos) return std::nullopt;
    path = unescape_bytes(std::string_view(*head).substr(kPathLine.size(), end - kPathLine.size()));
  }
  if (!path || path->empty() || path->front() != '/' || key_of(*path) != key) return std::nullopt;
  return path;
}

}  // namespace tw::cli
