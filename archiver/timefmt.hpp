// Times in the archive are nanoseconds since the Unix epoch (UTC). These convert them to
// and from the text operators type and read. Pure functions, safe from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.hpp"

namespace tw::archive {

// "2026-11-22T10:00:00.123456789Z" (UTC, always nine fraction digits).
std::string format_time_ns(std::int64_t ns);

// Accepts ISO-8601 "YYYY-MM-DDTHH:MM[:SS[.fraction]]" with an optional zone ("Z",
// "+HH:MM", "-HHMM"; no zone means local time), the same with a space instead of the
// "T", a bare date "YYYY-MM-DD" (midnight), or Unix seconds "1763805600[.5]" (also
// "@1763805600").
Result<std::int64_t> parse_time_ns(std::string_view text);

// The current CLOCK_REALTIME in nanoseconds.
std::int64_t now_ns();

}  // namespace tw::archive
