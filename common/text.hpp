// Reading the fields of the line formats (the archiver protocol, history files, handshake
// and control values): splitting a line on a separator, and a whole field as a number.
// Pure functions, safe from any thread.
#pragma once

#include <charconv>
#include <optional>
#include <string_view>
#include <vector>

namespace tw {

// The pieces of `text` between `separator`s: n separators give n + 1 pieces, empty ones
// included ("a\t\tb" -> "a", "", "b"; "" -> one empty piece).
std::vector<std::string_view> split(std::string_view text, char separator);

// `text` without the spaces and tabs at its ends.
std::string_view trim(std::string_view text);

// `text` as a number in `base` when it is one and nothing else: no sign for unsigned
// types, no '+', no space, no empty text, nothing out of the type's range.
template <class Int>
std::optional<Int> parse_int(std::string_view text, int base = 10) {
  Int value{};
  if (text.empty()) return std::nullopt;
  const char* end = text.data() + text.size();
  const auto [stop, ec] = std::from_chars(text.data(), end, value, base);
  if (ec != std::errc{} || stop != end) return std::nullopt;
  return value;
}

}  // namespace tw
