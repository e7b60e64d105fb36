#include "archive/format1/history.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <bitset>
#include <iterator>
#include <type_traits>

#include <fmt/format.h>

#include "archive/sha256.hpp"
#include "common/escape.hpp"
#include "common/text.hpp"
#include "common/time.hpp"

namespace tw::archive {
namespace {

constexpr std::string_view kHeader = "timewarp-history 1\n";

// Reads the value of one key=value field of a version line into `v`; false when bad.
using FieldReader = bool (*)(std::string_view value, Version& v);

template <auto member, int base = 10>
bool read_number(std::string_view value, Version& v) {
  using Int = std::remove_reference_t<decltype(v.*member)>;
  const auto n = parse_int<Int>(value, base);
  if (n) v.*member = *n;
  return n.has_value();
}

template <auto member>
bool read_escaped(std::string_view value, Version& v) {
  auto raw = unescape_bytes(value);
  if (!raw || raw->empty()) return false;
  v.*member = std::move(*raw);
  return true;
}

bool read_op(std::string_view value, Version& v) {
  const auto op = parse_op(value);
  if (op) v.op = *op;
  return op.has_value();
}

bool read_sha256(std::string_view value, Version& v) {
  if (value != "-" && !is_sha256_hex(value)) return false;
  v.sha256 = value == "-" ? std::string() : std::string(value);
  return true;
}

struct VersionField {
  std::string_view key;
  bool required;
  FieldReader read;
};

// The fields of a version line (FORMAT.md, "History files"); format_version writes them.
constexpr VersionField kVersionFields[] = {
    {"at", true, read_number<&Version::archived_at_ns>},
    {"op", true, read_op},
    {"size", true, read_number<&Version::size>},
    {"sha256", true, read_sha256},
    {"mode", true, read_number<&Version::mode, 8>},
    {"uid", true, read_number<&Version::uid>},
    {"gid", true, read_number<&Version::gid>},
    {"mtime", true, read_number<&Version::mtime_ns>},
    {"dev", false, read_number<&Version::dev>},
    {"ino", false, read_number<&Version::ino>},
    {"link", false, read_escaped<&Version::link_target>},
    {"from", false, read_escaped<&Version::moved_from>},
    {"to", false, read_escaped<&Version::moved_to>},
};

std::string format_version(const Version& v) {
  std::string line = fmt::format(
      "v\t{}\tat={}\top={}\tsize={}\tsha256={}\tmode={:o}\tuid={}\tgid={}"
      "\tmtime={}",
      v.number, v.archived_at_ns, to_string(v.op), v.size, v.sha256.empty() ? "-" : v.sha256,
      v.mode, v.uid, v.gid, v.mtime_ns);
  if (v.ino != 0) line += fmt::format("\tdev={}\tino={}", v.dev, v.ino);
  if (!v.link_target.empty()) line += "\tlink=" + escape_bytes(v.link_target);
  if (!v.moved_from.empty()) line += "\tfrom=" + escape_bytes(v.moved_from);
  if (!v.moved_to.empty()) line += "\tto=" + escape_bytes(v.moved_to);
  line += '\n';
  return line;
}

Expected<Version> parse_version(std::string_view line, std::uint64_t expected_number) {
  const auto fields = split(line, '\t');
  if (fields.size() < 2 || fields[0] != "v") return retry("not a version line");
  const auto number = parse_int<std::uint64_t>(fields[1]);
  if (!number || *number != expected_number) {
    return retry(
        fmt::format("version number {} where {} was expected", fields[1], expected_number));
  }
  Version v;
  v.number = *number;
  std::bitset<std::size(kVersionFields)> seen;
  for (std::size_t i = 2; i < fields.size(); ++i) {
    const auto eq = fields[i].find('=');
    if (eq == std::string_view::npos)
      return retry(fmt::format("field without '=' in version {}", v.number));
    const std::string_view key = fields[i].substr(0, eq);
    const auto* field = std::find_if(std::begin(kVersionFields), std::end(kVersionFields),
                                     [&](const VersionField& f) { return f.key == key; });
    if (field == std::end(kVersionFields)) continue;  // unknown keys are left for newer writers
    if (!field->read(fields[i].substr(eq + 1), v)) {
      return retry(fmt::format("bad {} in version {}", key, v.number));
    }
    seen.set(static_cast<std::size_t>(field - std::begin(kVersionFields)));
  }
  for (std::size_t f = 0; f < seen.size(); ++f) {
    if (kVersionFields[f].required && !seen.test(f)) {
      return retry(fmt::format("version {} lacks a required field", v.number));
    }
  }
  if (v.exists() && v.is_file() && v.sha256.empty()) {
    return retry(fmt::format("version {} is a file without content digest", v.number));
  }
  return v;
}

}  // namespace

std::string serialize_history(const History& history) {
  std::string text(kHeader);
  text += "path\t" + escape_bytes(history.path) + "\n";
  for (const auto& v : history.versions) text += format_version(v);
  text += "end\t" + sha256_hex(text) + "\n";
  return text;
}

Expected<History> parse_history(std::string_view text) {
  if (text.substr(0, kHeader.size()) != kHeader)
    return retry("missing 'timewarp-history 1' header");
  if (text.empty() || text.back() != '\n') return retry("truncated (no final newline)");
  const auto end_at = text.rfind("end\t");
  if (end_at == std::string_view::npos || (end_at > 0 && text[end_at - 1] != '\n')) {
    return retry("truncated (no end line)");
  }
  const std::string_view body = text.substr(0, end_at);
  const std::string_view digest = text.substr(end_at + 4, text.size() - end_at - 5);
  if (digest != sha256_hex(body)) return retry("checksum mismatch");
  auto lines = split(body.substr(kHeader.size()), '\n');
  lines.pop_back();  // after the last newline
  if (lines.empty() || lines[0].substr(0, 5) != "path\t") return retry("missing path line");
  History history;
  auto path = unescape_bytes(lines[0].substr(5));
  if (!path || path->empty() || path->front() != '/') return retry("bad path line");
  history.path = std::move(*path);
  for (std::size_t i = 1; i < lines.size(); ++i) {
    TRY_ASSIGN(Version version, parse_version(lines[i], i));
    history.versions.push_back(std::move(version));
  }
  return history;
}

}  // namespace tw::archive
