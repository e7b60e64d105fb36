// A value or an error message: the return type of operations whose failure is expected
// (a malformed line, a vanished file, a bad config value) and handled by the caller.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace tw {

struct Error {
  std::string message;
};

// A value of type T or a failure of type E: the one implementation behind Result (an
// error message) and the archive library's Expected (a protocol fault).
template <class T, class E>
class [[nodiscard]] ValueOr {
 public:
  ValueOr(T value) : v_(std::move(value)) {}    // NOLINT(google-explicit-constructor)
  ValueOr(E failure) : v_(std::move(failure)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  const E& failure() const { return std::get<1>(v_); }
  E&& failure_value() && { return std::get<1>(std::move(v_)); }

 private:
  std::variant<T, E> v_;
};

template <class T>
class [[nodiscard]] Result : public ValueOr<T, Error> {
 public:
  using ValueOr<T, Error>::ValueOr;
  const std::string& error() const { return this->failure().message; }
};

// For operations that return nothing but may fail.
struct Ok {};
using Status = Result<Ok>;

}  // namespace tw
