// Times in the archive are nanoseconds since the Unix epoch (UTC). These convert them to
// and from the text operators type and read. Pure functions, safe from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "archive/expected.hpp"

namespace tw::archive {

// "2026-11-22T10:00:00.123456789Z" (UTC, always nine fraction digits).
std::string format_time_ns(std::int64_t ns);

// Accepts ISO-8601 "YYYY-MM-DDTHH:MM[:SS[.fraction]]" with an optional zone ("Z",
// "+HH:MM", "-HHMM"; no zone means local time), the same with a space instead of the
// "T", a bare date "YYYY-MM-DD" (midnight), or Unix seconds "1763805600[.5]" (also
// "@1763805600", "-0.5"). Refuses what names no instant (February 30, month 13, hour 24,
// second 60, a zone offset beyond -23:59 to +23:59) and any instant outside what the
// nanoseconds fit in (1677-09-21T00:12:43.145224192Z to 2262-04-11T23:47:16.854775807Z),
// with a PERMANENT fault whose message says which.
Expected<std::int64_t> parse_time_ns(std::string_view text);

}  // namespace tw::archive
