// Failures of archive operations as values: each carries the protocol outcome it maps to
// (FAILED RETRY or FAILED PERMANENT) and a one-line message. Internal to the archive
// library. Plain values, safe from any thread.
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

template <class T>
class [[nodiscard]] Expected : public ValueOr<T, Fault> {
 public:
  using ValueOr<T, Fault>::ValueOr;
  const Fault& fault() const { return this->failure(); }
};

using Done = Expected<Ok>;

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
