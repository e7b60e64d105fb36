#include "support/tree_snapshot.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>
#include <openssl/evp.h>

#include "common/escape.hpp"

namespace tw::test {
namespace {

std::runtime_error failure(const std::string& what, const std::string& path) {
  return std::runtime_error(
      fmt::format("snapshot: {} {}: {}", what, escape_bytes(path), std::strerror(errno)));
}

std::string file_digest(int dir_fd, const std::string& name, const std::string& shown_path) {
  const int fd = ::openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) throw failure("cannot open", shown_path);
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
  char buffer[64 * 1024];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      throw failure("cannot read", shown_path);
    }
    if (n == 0) break;
    EVP_DigestUpdate(ctx.get(), buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx.get(), md, &len);
  std::string hex;
  for (unsigned i = 0; i < len; ++i) hex += fmt::format("{:02x}", md[i]);
  return hex;
}

void walk(int dir_fd, const std::string& relative, TreeSnapshot& out) {
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::fdopendir(::dup(dir_fd)), ::closedir);
  if (!dir) throw failure("cannot list", relative);
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(dir.get())) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  for (const auto& name : names) {
    const std::string path = relative.empty() ? name : relative + "/" + name;
    struct stat st {};
    if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) throw failure("lstat", path);
    TreeEntry entry;
    entry.mode = st.st_mode & 07777;
    entry.uid = st.st_uid;
    entry.gid = st.st_gid;
    entry.mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
    if (S_ISREG(st.st_mode)) {
      entry.type = 'f';
      entry.size = static_cast<std::uint64_t>(st.st_size);
      entry.digest = file_digest(dir_fd, name, path);
    } else if (S_ISLNK(st.st_mode)) {
      entry.type = 'l';
      std::string target(static_cast<std::size_t>(st.st_size) + 1, '\0');
      const ssize_t n = ::readlinkat(dir_fd, name.c_str(), target.data(), target.size());
      if (n < 0) throw failure("readlink", path);
      target.resize(static_cast<std::size_t>(n));
      entry.digest = target;
    } else if (S_ISDIR(st.st_mode)) {
      entry.type = 'd';
      const int sub = ::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub < 0) throw failure("cannot open", path);
      try {
        walk(sub, path, out);
      } catch (...) {
        ::close(sub);
        throw;
      }
      ::close(sub);
    } else {
      continue;  // fifo, socket, device: not archived
    }
    out[path] = entry;
  }
}

std::string time_text(std::int64_t ns) {
  const std::int64_t sec = ns >= 0 ? ns / 1'000'000'000 : -((-ns + 999'999'999) / 1'000'000'000);
  return fmt::format("{}.{:09d}", sec, ns - sec * 1'000'000'000);
}

}  // namespace

TreeSnapshot snapshot_tree(const std::filesystem::path& root) {
  TreeSnapshot out;
  const int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw failure("cannot open", root.native());
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw failure("stat", root.native());
  }
  TreeEntry self;
  self.type = 'd';
  self.mode = st.st_mode & 07777;
  self.uid = st.st_uid;
  self.gid = st.st_gid;
  self.mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  out[""] = self;
  try {
    walk(fd, "", out);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  return out;
}

std::string diff_trees(const TreeSnapshot& expected, const TreeSnapshot& actual,
                       const TreeOptions& options) {
  std::string out;
  const auto line = [&out](const std::string& text) { out += text + "\n"; };
  const auto name = [](const std::string& path) {
    return path.empty() ? std::string("(root)") : escape_bytes(path);
  };
  for (const auto& [path, e] : expected) {
    auto it = actual.find(path);
    if (it == actual.end()) {
      line(fmt::format("missing {} ({})", name(path), e.type));
      continue;
    }
    const TreeEntry& a = it->second;
    if (a.type != e.type) {
      line(fmt::format("{}: type {} != {}", name(path), a.type, e.type));
      continue;
    }
    const bool root = path.empty();
    if (e.type == 'f' && (a.size != e.size || a.digest != e.digest)) {
      line(fmt::format("{}: content differs (size {} != {})", name(path), a.size, e.size));
    }
    if (e.type == 'l' && a.digest != e.digest) {
      line(fmt::format("{}: link target {} != {}", name(path), escape_bytes(a.digest),
                       escape_bytes(e.digest)));
    }
    if (root && !options.root_metadata) continue;
    if (e.type != 'l' && a.mode != e.mode) {
      line(fmt::format("{}: mode {:o} != {:o}", name(path), a.mode, e.mode));
    }
    if (options.owners && (a.uid != e.uid || a.gid != e.gid)) {
      line(fmt::format("{}: owner {}:{} != {}:{}", name(path), a.uid, a.gid, e.uid, e.gid));
    }
    const bool compare_mtime = e.type != 'd' || options.directory_mtimes;
    if (compare_mtime && a.mtime_ns != e.mtime_ns) {
      line(fmt::format("{}: mtime {} != {}", name(path), time_text(a.mtime_ns),
                       time_text(e.mtime_ns)));
    }
  }
  for (const auto& [path, a] : actual) {
    if (!expected.count(path)) line(fmt::format("extra {} ({})", name(path), a.type));
  }
  return out;
}

}  // namespace tw::test
