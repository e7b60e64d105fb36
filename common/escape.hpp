// Path escaping shared by the line protocol and the database (DESIGN.md, "The scheduler ↔
// archiver interface"): bytes 0x00-0x1F, 0x7F and '%' become %XX (upper-case hex), and so
// does every byte that is not part of valid UTF-8. Everything else stays as it is, so any
// file name Linux allows round-trips byte for byte. Pure functions, safe from any thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tw {

// Escapes raw file-name bytes into the text form used on pipes and in path columns.
std::string escape_bytes(std::string_view raw);

// Reverses escape_bytes. Returns nothing when `escaped` is not a well-formed escaped text:
// a '%' not followed by two hex digits, a raw control byte, or invalid UTF-8.
std::optional<std::string> unescape_bytes(std::string_view escaped);

}  // namespace tw
