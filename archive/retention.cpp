#include "archive/retention.hpp"

#include <stdlib.h>
#include <time.h>

#include <algorithm>
#include <climits>
#include <ctime>
#include <filesystem>

#include <fmt/format.h>

#include "common/folder_policy.hpp"
#include "common/paths.hpp"
#include "common/time.hpp"

namespace tw::archive {
namespace {

// Calendar arithmetic in the local time zone through mktime, which normalises fields out
// of range (a day 0, an hour -3) and, with tm_isdst = -1, finds whether summer time holds:
// a boundary is the UTC instant at which the local clock read that time.
std::int64_t local_instant(std::tm fields) {
  fields.tm_isdst = -1;
  const time_t t = ::mktime(&fields);
  return static_cast<std::int64_t>(t) * kNsPerSecond;
}

std::tm local_fields(std::int64_t at_ns) {
  // The second that holds the instant, before the epoch too (ns_timespec floors).
  const time_t seconds = ns_timespec(at_ns).tv_sec;
  std::tm fields{};
  ::localtime_r(&seconds, &fields);
  return fields;
}

enum class Unit { Hour, Day, Week, Month, Year };

// The `count` boundaries of `unit` at or before `now_ns`, newest first: the start of the
// current hour (day, week, ...) and the `count - 1` before it.
void add_boundaries(Unit unit, int count, std::int64_t now_ns, std::vector<std::int64_t>& out) {
  if (count <= 0) return;
  std::tm start = local_fields(now_ns);
  start.tm_sec = 0;
  start.tm_min = 0;
  if (unit != Unit::Hour) start.tm_hour = 0;
  if (unit == Unit::Week) start.tm_mday -= (start.tm_wday + 6) % 7;  // back to Monday
  if (unit == Unit::Month || unit == Unit::Year) start.tm_mday = 1;
  if (unit == Unit::Year) start.tm_mon = 0;
  // Each boundary back is one step of a field of the calendar (a week: 7 days).
  int std::tm::*const field = unit == Unit::Hour    ? &std::tm::tm_hour
                              : unit == Unit::Month ? &std::tm::tm_mon
                              : unit == Unit::Year  ? &std::tm::tm_year
                                                    : &std::tm::tm_mday;
  const int step = unit == Unit::Week ? 7 : 1;
  for (int i = 0; i < count; ++i) {
    std::tm fields = start;
    fields.*field -= step * i;
    out.push_back(local_instant(fields));
  }
}

void sort_unique(std::vector<std::int64_t>& instants) {
  std::sort(instants.begin(), instants.end());
  instants.erase(std::unique(instants.begin(), instants.end()), instants.end());
}

}  // namespace

RetentionPolicy retention_policy(const Config& config) {
  RetentionPolicy policy;
  policy.keep_within_ns = static_cast<std::int64_t>(config.keep_within * kNsPerSecond);
  policy.keep_hourly = config.keep_hourly;
  policy.keep_daily = config.keep_daily;
  policy.keep_weekly = config.keep_weekly;
  policy.keep_monthly = config.keep_monthly;
  policy.keep_yearly = config.keep_yearly;
  return policy;
}

Expected<RetentionPolicies> retention_policies(const Config& config) {
  RetentionPolicies policies(retention_policy(config));
  for (const auto& entry : config.retention_folder) {
    auto parsed = parse_folder_policy(entry);
    if (!parsed) return permanent(fmt::format("retention_folder: {}", parsed.error()));
    const FolderPolicy& f = *parsed;
    RetentionPolicy policy = policies.archive;
    if (f.keep_within)
      policy.keep_within_ns = static_cast<std::int64_t>(*f.keep_within * kNsPerSecond);
    policy.keep_hourly = f.keep_hourly.value_or(policy.keep_hourly);
    policy.keep_daily = f.keep_daily.value_or(policy.keep_daily);
    policy.keep_weekly = f.keep_weekly.value_or(policy.keep_weekly);
    policy.keep_monthly = f.keep_monthly.value_or(policy.keep_monthly);
    policy.keep_yearly = f.keep_yearly.value_or(policy.keep_yearly);
    for (const auto& [folder, _] : policies.folders) {
      if (folder == f.folder) {
        return permanent(fmt::format("retention_folder: {} has two entries", f.folder));
      }
    }
    policies.folders.emplace_back(f.folder, policy);
  }
  return policies;
}

const RetentionPolicy& RetentionPolicies::of(std::string_view path) const {
  const RetentionPolicy* deepest = &archive;
  std::size_t depth = 0;
  for (const auto& [folder, policy] : folders) {
    if (folder.size() >= depth && path_within(path, folder)) {
      deepest = &policy;
      depth = folder.size();
    }
  }
  return *deepest;
}

Done use_time_zone(const std::string& zone) {
  if (zone.empty()) return Ok{};
  // glibc falls back to UTC, silently, for a zone it cannot find: look first. A name is
  // a relative path below the zone folder, never one that climbs out of it.
  const std::filesystem::path file = std::filesystem::path("/usr/share/zoneinfo") / zone;
  std::error_code error;
  if (zone.front() == '/' || zone.find("..") != std::string::npos ||
      !std::filesystem::is_regular_file(file, error)) {
    return permanent(fmt::format(
        "retention_timezone: no time zone named '{}' (a name under /usr/share/zoneinfo, such "
        "as Europe/Berlin or UTC)",
        zone));
  }
  ::setenv("TZ", zone.c_str(), 1);
  ::tzset();
  return Ok{};
}

bool KeptMoments::meets(std::int64_t begin_ns, std::int64_t end_ns) const {
  if (begin_ns >= end_ns) return false;
  if (!from_ns || end_ns > *from_ns) return true;
  auto first = std::lower_bound(instants.begin(), instants.end(), begin_ns);
  return first != instants.end() && *first < end_ns;
}

std::optional<std::int64_t> KeptMoments::kept_before(std::int64_t at_ns) const {
  if (contains(at_ns)) return at_ns;
  auto above = std::lower_bound(instants.begin(), instants.end(), at_ns);
  if (above == instants.begin()) return std::nullopt;
  return *std::prev(above);
}

std::optional<std::int64_t> KeptMoments::kept_after(std::int64_t at_ns) const {
  if (contains(at_ns)) return at_ns;
  auto above = std::upper_bound(instants.begin(), instants.end(), at_ns);
  return above != instants.end() ? *above : *from_ns;
}

KeptMoments KeptMoments::intersect(const KeptMoments& other) const {
  if (!from_ns) return other;
  if (!other.from_ns) return *this;
  KeptMoments both;
  both.from_ns = std::max(*from_ns, *other.from_ns);
  for (const auto at : instants) {
    if (at < *both.from_ns && other.contains(at)) both.instants.push_back(at);
  }
  for (const auto at : other.instants) {
    if (at < *both.from_ns && contains(at)) both.instants.push_back(at);
  }
  sort_unique(both.instants);
  return both;
}

KeptMoments KeptMoments::with(const std::vector<std::int64_t>& pinned) const {
  if (!from_ns) return *this;
  KeptMoments more = *this;
  for (const auto at : pinned) {
    if (at < *from_ns) more.instants.push_back(at);
  }
  sort_unique(more.instants);
  return more;
}

KeptMoments kept_moments(const RetentionPolicy& policy, std::int64_t now_ns) {
  KeptMoments kept;
  // The window reaches back keep_within from now, and never past now itself: the latest
  // moment is always kept.
  kept.from_ns = now_ns - std::max<std::int64_t>(policy.keep_within_ns, 0);
  add_boundaries(Unit::Hour, policy.keep_hourly, now_ns, kept.instants);
  add_boundaries(Unit::Day, policy.keep_daily, now_ns, kept.instants);
  add_boundaries(Unit::Week, policy.keep_weekly, now_ns, kept.instants);
  add_boundaries(Unit::Month, policy.keep_monthly, now_ns, kept.instants);
  add_boundaries(Unit::Year, policy.keep_yearly, now_ns, kept.instants);
  std::erase_if(kept.instants, [&](std::int64_t at) { return at >= *kept.from_ns; });
  sort_unique(kept.instants);
  return kept;
}

std::string_view KeptScopes::scope_of(std::string_view path) const {
  std::string_view deepest;
  for (const auto& [folder, _] : folders) {
    if (folder.size() > deepest.size() && path_within(path, folder)) deepest = folder;
  }
  return deepest;
}

const KeptMoments& KeptScopes::of(std::string_view path) const {
  const std::string_view scope = scope_of(path);
  return scope.empty() ? archive : folders.find(std::string(scope))->second;
}

std::vector<std::string_view> KeptScopes::folders_within(std::string_view dir) const {
  std::vector<std::string_view> within;
  for (const auto& [folder, _] : folders) {
    if (folder != dir && path_within(folder, dir)) within.emplace_back(folder);
  }
  return within;
}

KeptScopes KeptScopes::intersect(const KeptScopes& other) const {
  KeptScopes both;
  both.archive = archive.intersect(other.archive);
  for (const auto* side : {this, &other}) {
    for (const auto& [folder, _] : side->folders) {
      if (!both.folders.contains(folder)) {
        both.folders.emplace(folder, of(folder).intersect(other.of(folder)));
      }
    }
  }
  return both;
}

KeptScopes kept_moments(const RetentionPolicies& policies, std::int64_t now_ns) {
  KeptScopes kept;
  kept.archive = kept_moments(policies.archive, now_ns);
  for (const auto& [folder, policy] : policies.folders) {
    kept.folders.emplace(folder, kept_moments(policy, now_ns));
  }
  return kept;
}

std::vector<bool> kept_versions(const std::vector<Version>& history, const KeptMoments& kept,
                                const std::set<std::uint64_t>& pinned) {
  std::vector<bool> keep(history.size(), false);
  const Version* last_kept = nullptr;
  for (std::size_t i = 0; i < history.size(); ++i) {
    const Version& v = history[i];
    const bool latest = i + 1 == history.size();
    const std::int64_t end = latest ? INT64_MAX : history[i + 1].archived_at_ns;
    bool wanted = latest || kept.meets(v.archived_at_ns, end);
    // A tombstone only ends the span of a live version kept before it; with none, every
    // kept instant it meets finds the path absent without it.
    if (!v.exists()) wanted = wanted && last_kept != nullptr && last_kept->exists();
    if (wanted || pinned.contains(v.number)) {
      keep[i] = true;
      last_kept = &v;
    }
  }
  // A history that keeps anything keeps its latest version too, a tombstone included
  // (deleted again between kept instants): the latest number stays the history's highest,
  // so the next version is never given a number an earlier one had, and verify counts the
  // removed versions as gaps below it (FORMAT.md, "Retention").
  if (last_kept != nullptr && !history.empty()) keep.back() = true;
  return keep;
}

}  // namespace tw::archive
