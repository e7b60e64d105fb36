// The archive library's one error shape: a failure is a value (Fault) carrying the protocol
// outcome it maps to (FAILED RETRY or FAILED PERMANENT) and a one-line message; an
// operation returns Expected<T> (a T or a Fault), propagated with TRY / TRY_ASSIGN (as
// ccache's util/expected.hpp), and cleans up with one scope guard (Defer). The facade
// (store.hpp) returns Expected too; the macros and Defer are for the archive library's own
// code. Plain values, safe from any thread.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "common/escape.hpp"  // shown_path: how messages name paths
#include "common/protocol.hpp"
#include "common/result.hpp"

namespace tw::archive {

struct Fault {
  Outcome outcome = Outcome::FailedRetry;
  std::string message;   // valid UTF-8: paths in it are shown_path()
  bool changed = false;  // the source changed while it was read: a new look may succeed
};

inline Fault retry(std::string message) { return {Outcome::FailedRetry, std::move(message)}; }
inline Fault permanent(std::string message) {
  return {Outcome::FailedPermanent, std::move(message)};
}

// `fault` with `context` (the step or the path it concerns) before its message; the same
// outcome.
inline Fault in_context(std::string_view context, Fault fault) {
  fault.message = std::string(context) + ": " + fault.message;
  return fault;
}

template <class T>
class [[nodiscard]] Expected : public ValueOr<T, Fault> {
 public:
  using ValueOr<T, Fault>::ValueOr;
  const Fault& fault() const { return this->failure(); }
  // The message alone, as Result's error() gives it: for callers that only report it.
  const std::string& error() const { return this->failure().message; }
};

using Done = Expected<Ok>;

// The words before the message of a failure to read or write the archive.
inline constexpr std::string_view kArchiveFaultPrefix = "archive: ";

// An Error (a plain message: the catalog's and the chunk store's words, where their
// failures start) as a Fault: the archive could not be read or written, so the request
// may succeed later (RETRY).
inline Fault archive_fault(const Error& error) {
  return retry(std::string(kArchiveFaultPrefix) + error.message);
}

// The message of an archive_fault without its prefix: the failure in the words of the part
// that met it, for the callers that report it so (a catalog commit, a blob looked up while
// content is stored, verify's findings).
inline std::string unprefixed_message(const Fault& fault) {
  const std::string_view message = fault.message;
  return std::string(message.starts_with(kArchiveFaultPrefix)
                         ? message.substr(kArchiveFaultPrefix.size())
                         : message);
}

// TRY and TRY_ASSIGN take an Expected, in functions that return Expected: the Fault goes on
// as it is. (A Result of common/ is no Expected: its caller gives its Error an outcome, with
// archive_fault or by hand.)

// Returns the failure of `expr` from the enclosing function.
#define TRY(expr)                                         \
  do {                                                    \
    auto&& tw_try_result_ = (expr);                       \
    if (!tw_try_result_) return tw_try_result_.failure(); \
  } while (false)

#define TW_TRY_CONCAT2(a, b) a##b
#define TW_TRY_CONCAT(a, b) TW_TRY_CONCAT2(a, b)
// `TRY_ASSIGN(auto x, f());` declares x as f()'s value, or returns f()'s failure (as TRY).
#define TRY_ASSIGN(declaration, expr) \
  TW_TRY_ASSIGN_IMPL(TW_TRY_CONCAT(tw_try_assign_, __LINE__), declaration, expr)
#define TW_TRY_ASSIGN_IMPL(temp, declaration, expr)  \
  auto temp = (expr);                                \
  if (!temp) return std::move(temp).failure_value(); \
  declaration = std::move(temp).value()

// Runs a callable when the scope ends, unless dismissed: the one scope guard.
template <class F>
class [[nodiscard]] Defer {
 public:
  explicit Defer(F f) : f_(std::move(f)) {}
  Defer(const Defer&) = delete;
  Defer& operator=(const Defer&) = delete;
  ~Defer() {
    if (armed_) f_();
  }
  void dismiss() { armed_ = false; }

 private:
  F f_;
  bool armed_ = true;
};

// Which side of the copy an errno came from: the file being archived, or the archive.
enum class Side { Source, Archive };

// Maps an errno to an outcome. Source side: ENOENT/ENOTDIR mean the path changed since it
// was looked at (RETRY, `changed`: the request looks again and, the path being gone,
// records a tombstone and completes); EACCES/EPERM and anything not transient give
// PERMANENT; ENOSPC, EIO, EAGAIN, EBUSY and other transient errors give RETRY. Archive
// side: always RETRY (the item is fine, the archive is not). `what` names the action and
// the path (shown_path).
Fault errno_fault(int err, Side side, std::string_view what);

}  // namespace tw::archive
