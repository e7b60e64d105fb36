#include "common/escape.hpp"

#include <cstdint>

namespace tw {
namespace {

constexpr char kHex[] = "0123456789ABCDEF";

bool must_escape_ascii(unsigned char c) { return c < 0x20 || c == 0x7F || c == '%'; }

// Length of the valid UTF-8 sequence of two or more bytes starting at s[i], or 0 when
// the bytes there are not one (overlong forms, surrogates and code points past U+10FFFF
// are not valid UTF-8).
std::size_t utf8_sequence_length(std::string_view s, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const auto cont = [&](std::size_t k) { return i + k < s.size() && (byte(k) & 0xC0) == 0x80; };
  const unsigned char b0 = byte(0);
  if (b0 >= 0xC2 && b0 <= 0xDF) return cont(1) ? 2 : 0;
  if (b0 >= 0xE0 && b0 <= 0xEF) {
    if (!cont(1) || !cont(2)) return 0;
    if (b0 == 0xE0 && byte(1) < 0xA0) return 0;  // overlong
    if (b0 == 0xED && byte(1) > 0x9F) return 0;  // UTF-16 surrogate
    return 3;
  }
  if (b0 >= 0xF0 && b0 <= 0xF4) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    if (b0 == 0xF0 && byte(1) < 0x90) return 0;  // overlong
    if (b0 == 0xF4 && byte(1) > 0x8F) return 0;  // past U+10FFFF
    return 4;
  }
  return 0;
}

// The code point of the valid UTF-8 sequence of `n` bytes at s[i].
char32_t decode(std::string_view s, std::size_t i, std::size_t n) {
  const auto byte = [&](std::size_t k) {
    return static_cast<char32_t>(static_cast<unsigned char>(s[i + k]));
  };
  if (n == 2) return ((byte(0) & 0x1F) << 6) | (byte(1) & 0x3F);
  if (n == 3) return ((byte(0) & 0x0F) << 12) | ((byte(1) & 0x3F) << 6) | (byte(2) & 0x3F);
  return ((byte(0) & 0x07) << 18) | ((byte(1) & 0x3F) << 12) | ((byte(2) & 0x3F) << 6) |
         (byte(3) & 0x3F);
}

// Code points that change how a terminal or a text view shows what follows them.
bool display_control(char32_t cp) {
  return (cp >= 0x80 && cp <= 0x9F) ||      // C1 controls (U+009B: CSI)
         cp == 0x061C ||                    // ARABIC LETTER MARK
         cp == 0x200E || cp == 0x200F ||    // LEFT-TO-RIGHT and RIGHT-TO-LEFT MARK
         (cp >= 0x202A && cp <= 0x202E) ||  // embeddings and overrides, POP DIRECTIONAL
         (cp >= 0x2066 && cp <= 0x2069) ||  // isolates, POP DIRECTIONAL ISOLATE
         cp == 0x2028 || cp == 0x2029;      // LINE and PARAGRAPH SEPARATOR
}

struct Escaping {
  bool percent;   // '%' becomes %25 (the text is raw bytes, not escaped already)
  bool controls;  // display controls (above) become %XX too
};
constexpr Escaping kForMachines{true, false};
constexpr Escaping kForPeople{true, true};
constexpr Escaping kTextForPeople{false, true};

std::string escaped(std::string_view raw, Escaping how) {
  std::string out;
  out.reserve(raw.size());
  const auto put_escaped = [&out](unsigned char c) {
    out.push_back('%');
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 0x0F]);
  };
  for (std::size_t i = 0; i < raw.size();) {
    const auto c = static_cast<unsigned char>(raw[i]);
    if (c < 0x80) {
      if (must_escape_ascii(c) && (c != '%' || how.percent)) {
        put_escaped(c);
      } else {
        out.push_back(static_cast<char>(c));
      }
      ++i;
      continue;
    }
    const std::size_t n = utf8_sequence_length(raw, i);
    if (n == 0) {
      put_escaped(c);
      ++i;
    } else if (how.controls && display_control(decode(raw, i, n))) {
      for (std::size_t k = 0; k < n; ++k) put_escaped(static_cast<unsigned char>(raw[i + k]));
      i += n;
    } else {
      out.append(raw.substr(i, n));
      i += n;
    }
  }
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

std::string escape_bytes(std::string_view raw) { return escaped(raw, kForMachines); }

std::string shown_path(std::string_view raw) { return escaped(raw, kForPeople); }

std::string shown_text(std::string_view text, std::size_t limit) {
  std::string out = escaped(text, kTextForPeople);
  if (limit == 0 || out.size() <= limit) return out;
  // Cut between characters, never inside a UTF-8 sequence or a %XX escape.
  std::size_t cut = limit;
  while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) --cut;
  if (cut >= 1 && out[cut - 1] == '%') {
    cut -= 1;
  } else if (cut >= 2 && out[cut - 2] == '%') {
    cut -= 2;
  }
  out.resize(cut);
  return out + "...";
}

std::optional<std::string> unescape_bytes(std::string_view escaped) {
  std::string out;
  out.reserve(escaped.size());
  for (std::size_t i = 0; i < escaped.size();) {
    const auto c = static_cast<unsigned char>(escaped[i]);
    if (c == '%') {
      if (i + 2 >= escaped.size()) return std::nullopt;
      const int hi = hex_value(escaped[i + 1]);
      const int lo = hex_value(escaped[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 3;
    } else if (c < 0x80) {
      if (c < 0x20 || c == 0x7F) return std::nullopt;
      out.push_back(static_cast<char>(c));
      ++i;
    } else {
      const std::size_t n = utf8_sequence_length(escaped, i);
      if (n == 0) return std::nullopt;
      out.append(escaped.substr(i, n));
      i += n;
    }
  }
  return out;
}

}  // namespace tw
