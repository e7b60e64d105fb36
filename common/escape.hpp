// Path escaping shared by the line protocol and the database (ARCHITECTURE.md, "Path
// escaping"): bytes 0x00-0x1F, 0x7F and '%' become %XX (upper-case hex), and so
// does every byte that is not part of valid UTF-8. Everything else stays as it is, so any
// file name Linux allows round-trips byte for byte.
//
// What a person reads (terminal output, logs, error messages) is escaped further: the C1
// controls U+0080-U+009F (a terminal takes U+009B as an escape sequence's start) and the
// bidirectional-text controls (U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069,
// which reorder what is shown around them: "evil\u202Etxt.exe") and the line and paragraph
// separators U+2028, U+2029 become %XX of each of their UTF-8 bytes. The result is still
// escaped text: unescape_bytes gives the raw name back. Machine-read forms (pipes,
// database columns, history files, --json) keep escape_bytes, exact and lossless.
// Pure functions, safe from any thread.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace tw {

// Escapes raw file-name bytes into the text form used on pipes and in path columns.
std::string escape_bytes(std::string_view raw);

// What a person is shown (terminal, log, error message) goes through one of these two,
// chosen by what the caller holds:
//
// shown_path: raw bytes (a file name as the filesystem gives it): escape_bytes, and C1
// and bidirectional controls too.
std::string shown_path(std::string_view raw);

// shown_text: text that is escaped already or may hold escaped names (a path column of the
// database, a path on the pipes, an archiver's message): control bytes, bytes not part of
// valid UTF-8, C1 and bidirectional controls become %XX; everything else, '%' included,
// stays as it is, so shown_text(escape_bytes(raw)) == shown_path(raw). With a `limit`
// (bytes), a longer result is cut to at most that, between characters and never inside a
// %XX escape, and "..." is added.
std::string shown_text(std::string_view text, std::size_t limit = 0);

// Reverses escape_bytes (and shown_path). Returns nothing when `escaped` is not a well-formed
// escaped text: a '%' not followed by two hex digits, a raw control byte, or invalid UTF-8.
std::optional<std::string> unescape_bytes(std::string_view escaped);

}  // namespace tw
