// Buffers whose bytes are left uninitialized when they grow, for memory that is written
// before it is read (file reads, compressed frames): their pages are then touched, and
// counted in the process's resident memory, only as far as they are filled, where a
// std::vector's resize would zero every byte of its largest size.
#pragma once

#include <memory>
#include <new>
#include <utility>
#include <vector>

namespace tw {

// std::allocator, except that value-initialization (resize, the count constructor)
// default-initializes: for bytes, no write at all.
template <class T>
struct UninitializedAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = UninitializedAllocator<U>;
  };
  UninitializedAllocator() = default;
  template <class U>
  explicit UninitializedAllocator(const UninitializedAllocator<U>& /*other*/) noexcept {}
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

template <class T>
using UninitializedVector = std::vector<T, UninitializedAllocator<T>>;

}  // namespace tw
