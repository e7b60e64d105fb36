// Version's type tests, and the one definition of "unchanged against the archive"
// (archive/types.hpp).
#include <sys/stat.h>

#include "archive/types.hpp"
#include "common/time.hpp"

namespace tw::archive {

bool Version::is_file() const { return exists() && S_ISREG(mode); }
bool Version::is_symlink() const { return exists() && S_ISLNK(mode); }
bool Version::is_directory() const { return exists() && S_ISDIR(mode); }

Difference difference(const Version* live, const Version& now) {
  if (live == nullptr || !live->exists()) return Difference::Content;
  if ((live->mode & S_IFMT) != (now.mode & S_IFMT)) return Difference::Content;
  if (S_ISREG(now.mode) || S_ISLNK(now.mode)) {
    const bool same_content = live->size == now.size && live->mtime_ns == now.mtime_ns &&
                              (now.sha256.empty() || live->sha256 == now.sha256) &&
                              (!S_ISLNK(now.mode) || live->link_target == now.link_target);
    if (!same_content) return Difference::Content;
  } else if (S_ISDIR(now.mode) && live->mtime_ns != now.mtime_ns) {
    return Difference::Metadata;
  }
  if ((live->mode & 07777) != (now.mode & 07777) || live->uid != now.uid || live->gid != now.gid) {
    return Difference::Metadata;
  }
  return Difference::None;
}

Version version_of_stat(const struct stat& st) {
  Version v;
  v.op = Op::Update;
  v.mode = st.st_mode;
  v.uid = st.st_uid;
  v.gid = st.st_gid;
  v.mtime_ns = timespec_ns(st.st_mtim);
  v.dev = static_cast<std::uint64_t>(st.st_dev);
  v.ino = static_cast<std::uint64_t>(st.st_ino);
  if (!S_ISDIR(st.st_mode)) v.size = static_cast<std::uint64_t>(st.st_size);
  return v;
}

}  // namespace tw::archive
