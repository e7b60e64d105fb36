#include "common/folder_policy.hpp"

#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "common/paths.hpp"
#include "common/text.hpp"

namespace tw {
namespace {

constexpr double kMaxWithin = 3650 * 86400.0;  // the keep_within key's own limit
constexpr int kMaxCount = 1000000;             // the keep_* counts' own limit

Result<double> seconds(std::string_view value) {
  double number = 0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), number);
  const std::string_view unit(end, value.data() + value.size() - end);
  double scale = 0;
  if (unit.empty() || unit == "s") scale = 1;
  if (unit == "m") scale = 60;
  if (unit == "h") scale = 3600;
  if (unit == "d") scale = 86400;
  if (unit == "w") scale = 7 * 86400;
  if (error != std::errc{} || scale == 0 || !std::isfinite(number) || number < 0 ||
      number * scale > kMaxWithin) {
    return Error{
        fmt::format("keep_within={} is not a time from 0 to 3650 days (seconds, or a "
                    "number with s, m, h, d or w)",
                    value)};
  }
  return number * scale;
}

Result<int> count(std::string_view key, std::string_view value) {
  int number = 0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), number);
  if (error != std::errc{} || end != value.data() + value.size() || number < 0 ||
      number > kMaxCount) {
    return Error{fmt::format("{}={} is not a whole number from 0 to {}", key, value, kMaxCount)};
  }
  return number;
}

// One key=value of the entry, set in `policy`.
Status set_key(std::string_view token, FolderPolicy& policy) {
  const auto equals = token.find('=');
  if (equals == std::string_view::npos) {
    return Error{fmt::format("'{}' is not key=value", token)};
  }
  const std::string_view key = token.substr(0, equals);
  const std::string_view value = token.substr(equals + 1);
  if (key == "keep_within") {
    if (policy.keep_within) return Error{"keep_within is given twice"};
    auto within = seconds(value);
    if (!within) return Error{within.error()};
    policy.keep_within = *within;
    return Ok{};
  }
  std::optional<int>* field = key == "keep_hourly"    ? &policy.keep_hourly
                              : key == "keep_daily"   ? &policy.keep_daily
                              : key == "keep_weekly"  ? &policy.keep_weekly
                              : key == "keep_monthly" ? &policy.keep_monthly
                              : key == "keep_yearly"  ? &policy.keep_yearly
                                                      : nullptr;
  if (field == nullptr) {
    return Error{
        fmt::format("unknown key '{}' (keep_within, keep_hourly, keep_daily, "
                    "keep_weekly, keep_monthly or keep_yearly)",
                    key)};
  }
  if (field->has_value()) return Error{fmt::format("{} is given twice", key)};
  auto number = count(key, value);
  if (!number) return Error{number.error()};
  *field = *number;
  return Ok{};
}

}  // namespace

Result<FolderPolicy> parse_folder_policy(std::string_view entry) {
  const auto colon = entry.rfind(':');
  if (colon == std::string_view::npos) {
    return Error{fmt::format("'{}' is not 'FOLDER: keep_daily=7 ...'", entry)};
  }
  FolderPolicy policy;
  const std::string_view folder = trim(entry.substr(0, colon));
  if (folder.empty() || folder.front() != '/' || folder.find('\0') != std::string_view::npos) {
    return Error{fmt::format("'{}' does not name an absolute folder", entry)};
  }
  policy.folder = absolute_path(std::string(folder)).string();
  std::string rest(entry.substr(colon + 1));
  for (char& c : rest) {
    if (c == ',' || c == '\t') c = ' ';
  }
  bool any = false;
  for (std::size_t at = 0; at < rest.size();) {
    const auto end = std::min(rest.find(' ', at), rest.size());
    const std::string_view token(rest.data() + at, end - at);
    at = end + 1;
    if (token.empty()) continue;
    if (auto set = set_key(token, policy); !set) {
      return Error{fmt::format("{}: {}", policy.folder, set.error())};
    }
    any = true;
  }
  if (!any) return Error{fmt::format("{}: names no keep_* key", policy.folder)};
  return policy;
}

}  // namespace tw
