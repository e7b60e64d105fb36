#include "archiver/history.hpp"

#include <sys/stat.h>

#include <charconv>
#include <optional>

#include <fmt/format.h>

#include "archiver/sha256.hpp"
#include "common/escape.hpp"

namespace tw::archive {
namespace {

constexpr std::string_view kHeader = "timewarp-history 1\n";

std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (true) {
    const auto at = text.find(sep, start);
    if (at == std::string_view::npos) {
      parts.push_back(text.substr(start));
      return parts;
    }
    parts.push_back(text.substr(start, at - start));
    start = at + 1;
  }
}

template <class Int>
std::optional<Int> to_int(std::string_view text, int base = 10) {
  Int value{};
  if (text.empty()) return std::nullopt;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, base);
  if (ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return value;
}

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

Result<Version> parse_version(std::string_view line, std::uint64_t expected_number) {
  const auto fields = split(line, '\t');
  if (fields.size() < 2 || fields[0] != "v") return Error{"not a version line"};
  const auto number = to_int<std::uint64_t>(fields[1]);
  if (!number || *number != expected_number) {
    return Error{
        fmt::format("version number {} where {} was expected", fields[1], expected_number)};
  }
  Version v;
  v.number = *number;
  unsigned seen = 0;
  enum : unsigned {
    kAt = 1,
    kOp = 2,
    kSize = 4,
    kSha = 8,
    kMode = 16,
    kUid = 32,
    kGid = 64,
    kMtime = 128,
    kAll = 255
  };
  for (std::size_t i = 2; i < fields.size(); ++i) {
    const auto eq = fields[i].find('=');
    if (eq == std::string_view::npos)
      return Error{fmt::format("field without '=' in version {}", v.number)};
    const std::string_view key = fields[i].substr(0, eq);
    const std::string_view value = fields[i].substr(eq + 1);
    const auto bad = [&] { return Error{fmt::format("bad {} in version {}", key, v.number)}; };
    if (key == "at") {
      const auto n = to_int<std::int64_t>(value);
      if (!n) return bad();
      v.archived_at_ns = *n;
      seen |= kAt;
    } else if (key == "op") {
      const auto op = parse_op(value);
      if (!op) return bad();
      v.op = *op;
      seen |= kOp;
    } else if (key == "size") {
      const auto n = to_int<std::uint64_t>(value);
      if (!n) return bad();
      v.size = *n;
      seen |= kSize;
    } else if (key == "sha256") {
      if (value != "-" && !is_sha256_hex(value)) return bad();
      v.sha256 = value == "-" ? std::string() : std::string(value);
      seen |= kSha;
    } else if (key == "mode") {
      const auto n = to_int<std::uint32_t>(value, 8);
      if (!n) return bad();
      v.mode = *n;
      seen |= kMode;
    } else if (key == "uid") {
      const auto n = to_int<std::uint32_t>(value);
      if (!n) return bad();
      v.uid = *n;
      seen |= kUid;
    } else if (key == "gid") {
      const auto n = to_int<std::uint32_t>(value);
      if (!n) return bad();
      v.gid = *n;
      seen |= kGid;
    } else if (key == "mtime") {
      const auto n = to_int<std::int64_t>(value);
      if (!n) return bad();
      v.mtime_ns = *n;
      seen |= kMtime;
    } else if (key == "dev" || key == "ino") {
      const auto n = to_int<std::uint64_t>(value);
      if (!n) return bad();
      (key == "dev" ? v.dev : v.ino) = *n;
    } else if (key == "link" || key == "from" || key == "to") {
      auto raw = unescape_bytes(value);
      if (!raw || raw->empty()) return bad();
      (key == "link" ? v.link_target : key == "from" ? v.moved_from : v.moved_to) = std::move(*raw);
    }
    // Unknown keys are left for newer writers.
  }
  if (seen != kAll) return Error{fmt::format("version {} lacks a required field", v.number)};
  if (v.exists() && v.is_file() && v.sha256.empty()) {
    return Error{fmt::format("version {} is a file without content digest", v.number)};
  }
  return v;
}

}  // namespace

bool Version::is_file() const { return exists() && S_ISREG(mode); }
bool Version::is_symlink() const { return exists() && S_ISLNK(mode); }
bool Version::is_directory() const { return exists() && S_ISDIR(mode); }

bool same_state(const Version& a, const Version& b) {
  return a.exists() && b.exists() && a.mode == b.mode && a.uid == b.uid && a.gid == b.gid &&
         a.mtime_ns == b.mtime_ns && a.size == b.size && a.sha256 == b.sha256 &&
         a.link_target == b.link_target;
}

std::string serialize_history(const History& history) {
  std::string text(kHeader);
  text += "path\t" + escape_bytes(history.path) + "\n";
  for (const auto& v : history.versions) text += format_version(v);
  text += "end\t" + sha256_hex(text) + "\n";
  return text;
}

Result<History> parse_history(std::string_view text) {
  if (text.substr(0, kHeader.size()) != kHeader)
    return Error{"missing 'timewarp-history 1' header"};
  if (text.empty() || text.back() != '\n') return Error{"truncated (no final newline)"};
  const auto end_at = text.rfind("end\t");
  if (end_at == std::string_view::npos || (end_at > 0 && text[end_at - 1] != '\n')) {
    return Error{"truncated (no end line)"};
  }
  const std::string_view body = text.substr(0, end_at);
  const std::string_view digest = text.substr(end_at + 4, text.size() - end_at - 5);
  if (digest != sha256_hex(body)) return Error{"checksum mismatch"};
  auto lines = split(body.substr(kHeader.size()), '\n');
  lines.pop_back();  // after the last newline
  if (lines.empty() || lines[0].substr(0, 5) != "path\t") return Error{"missing path line"};
  History history;
  auto path = unescape_bytes(lines[0].substr(5));
  if (!path || path->empty() || path->front() != '/') return Error{"bad path line"};
  history.path = std::move(*path);
  for (std::size_t i = 1; i < lines.size(); ++i) {
    auto version = parse_version(lines[i], i);
    if (!version) return Error{version.error()};
    history.versions.push_back(std::move(*version));
  }
  return history;
}

}  // namespace tw::archive
