// Where the watcher's file events come from: the kernel's inotify, behind a small
// interface so a test can inject what inotify does rarely (a queue overflow, a watch that
// cannot be added). One thread at a time.
#pragma once

#include <sys/inotify.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/fd.hpp"
#include "common/noncopyable.hpp"

namespace tw::monitor {

struct RawEvent {
  int wd = -1;
  std::uint32_t mask = 0;
  std::uint32_t cookie = 0;
  std::string name;  // raw bytes; empty for an event on the watched directory itself
};

class EventSource : NonCopyable {
 public:
  virtual ~EventSource() = default;

  // A descriptor that polls readable when events wait.
  virtual int fd() const = 0;
  // Adds (or updates) the watch of directory `path`; the watch descriptor, or -errno.
  virtual int add_watch(const std::string& path, std::uint32_t mask) = 0;
  virtual void remove_watch(int wd) = 0;
  // The events waiting now, without blocking (empty when none).
  virtual std::vector<RawEvent> read_events() = 0;
};

// The real one. Throws std::runtime_error naming fs.inotify.max_user_instances when the
// kernel refuses another inotify instance.
class InotifySource final : public EventSource {
 public:
  InotifySource();
  int fd() const override { return fd_.get(); }
  int add_watch(const std::string& path, std::uint32_t mask) override;
  void remove_watch(int wd) override;
  std::vector<RawEvent> read_events() override;

 private:
  UniqueFd fd_;
};

// Reads one number from /proc/sys/fs/inotify/<name>, or -1.
long inotify_limit(const char* name);

}  // namespace tw::monitor
