#include "common/dirs.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>

#include "common/fd.hpp"

namespace tw {

Names directory_names(int dir_fd) {
  const int copy = ::fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);
  if (copy < 0) return Errno{errno};
  DIR* d = ::fdopendir(copy);
  if (d == nullptr) {
    const int error = errno;
    ::close(copy);
    return Errno{error};
  }
  std::unique_ptr<DIR, int (*)(DIR*)> closer(d, ::closedir);
  ::rewinddir(d);  // from the start, wherever the shared read position was
  std::vector<std::string> names;
  errno = 0;
  while (const dirent* entry = ::readdir(d)) {
    const std::string_view name = entry->d_name;
    if (name != "." && name != "..") names.emplace_back(name);
    errno = 0;
  }
  if (errno != 0) return Errno{errno};
  std::sort(names.begin(), names.end());
  return names;
}

Names directory_names(const std::string& dir) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return Errno{errno};
  return directory_names(fd.get());
}

}  // namespace tw
