// How many archiver processes one scheduler runs: the one range behind the `archivers`
// configuration key (MAX_ARCHIVERS), the scheduler's ARCHIVERS handshake line, the
// monitor's timewarp.control row and `timewarp archivers N`. Pure; safe from any thread.
#pragma once

#include <optional>
#include <string_view>

#include "common/text.hpp"

namespace tw {

inline constexpr int kMinArchivers = 1;
inline constexpr int kMaxArchivers = 256;

// `text` as an archiver count: a decimal number from kMinArchivers to kMaxArchivers and
// nothing else (no '+', space or fraction); nothing otherwise.
inline std::optional<int> parse_archivers(std::string_view text) {
  const auto n = parse_int<int>(text);
  if (!n || *n < kMinArchivers || *n > kMaxArchivers) return std::nullopt;
  return n;
}

}  // namespace tw
