// Base of a type that must not be copied: one that owns a thread, a child process or a
// descriptor, and every interface used through a pointer to it (a copy would slice).
// Deleting the copies also leaves the type without implicit moves.
#pragma once

namespace tw {

class NonCopyable {
 public:
  NonCopyable(const NonCopyable&) = delete;
  NonCopyable& operator=(const NonCopyable&) = delete;

 protected:
  NonCopyable() = default;
  ~NonCopyable() = default;
};

}  // namespace tw
