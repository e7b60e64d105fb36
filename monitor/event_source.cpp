#include "monitor/event_source.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>

namespace tw::monitor {

long inotify_limit(const char* name) {
  std::ifstream in(fmt::format("/proc/sys/fs/inotify/{}", name));
  long value = -1;
  if (!(in >> value)) return -1;
  return value;
}

InotifySource::InotifySource() : fd_(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) {
  if (!fd_) {
    if (errno == EMFILE) {
      throw std::runtime_error(
          fmt::format("cannot start inotify: the limit of inotify instances per user is reached "
                      "(fs.inotify.max_user_instances = {}); raise it, e.g. sysctl -w "
                      "fs.inotify.max_user_instances={}",
                      inotify_limit("max_user_instances"),
                      std::max(256L, inotify_limit("max_user_instances") * 2)));
    }
    throw std::runtime_error(fmt::format("cannot start inotify: {}", std::strerror(errno)));
  }
}

int InotifySource::add_watch(const std::string& path, std::uint32_t mask) {
  const int wd = ::inotify_add_watch(fd_.get(), path.c_str(), mask);
  return wd >= 0 ? wd : -errno;
}

void InotifySource::remove_watch(int wd) { ::inotify_rm_watch(fd_.get(), wd); }

std::vector<RawEvent> InotifySource::read_events() {
  std::vector<RawEvent> events;
  alignas(inotify_event) char buffer[64 * 1024];
  while (true) {
    const ssize_t n = ::read(fd_.get(), buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) continue;
      break;  // EAGAIN: nothing more now
    }
    if (n == 0) break;
    for (ssize_t offset = 0; offset < n;) {
      const auto* e = reinterpret_cast<const inotify_event*>(buffer + offset);
      RawEvent event;
      event.wd = e->wd;
      event.mask = e->mask;
      event.cookie = e->cookie;
      if (e->len > 0) event.name.assign(e->name, ::strnlen(e->name, e->len));
      events.push_back(std::move(event));
      offset += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
    }
    if (events.size() >= 16384) break;  // let the caller work through these first
  }
  return events;
}

}  // namespace tw::monitor
