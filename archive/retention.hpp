// Retention: which moments of the archive a policy keeps, and so which versions it keeps.
//
// What is kept is defined by moments, not by counts of versions: a policy names instants
// (every instant of the last hour, each full hour of the last day, each midnight of the
// last 30 days, ...), and a version is kept when it was its path's state at one of them,
// that is when the span from its archiving to the next version's meets a kept instant.
// `restore --at T` for a kept instant T therefore finds, for every path, the very version
// it found before anything was removed: the whole tree as it was at T. A path's latest
// version is always kept (the archive's "now"), and so is a pinned one.
//
// The archive remembers what earlier runs kept (`KeptMoments`, stored in the catalog):
// an instant thinned away once never comes back, so a later run keeps what both keep.
// Calendar boundaries (full hours, midnights, Mondays, the first of a month or a year) are
// those of the process's local time zone (`TZ`, else /etc/localtime); the programs set
// `TZ` from the `retention_timezone` key before anything reads the clock.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "archive/expected.hpp"
#include "archive/types.hpp"
#include "common/config.hpp"

namespace tw::archive {

// The policy, in restic's vocabulary. Counts are of calendar boundaries back from now,
// the current one included (keep_daily 30: today's midnight and the 29 before it).
struct RetentionPolicy {
  std::int64_t keep_within_ns = 3600LL * 1'000'000'000;  // every instant this recent
  int keep_hourly = 24;
  int keep_daily = 30;
  int keep_weekly = 52;  // Mondays at midnight
  int keep_monthly = 0;  // the first of the month at midnight
  int keep_yearly = 0;   // the first of January at midnight
};

// The policy of the configuration's keep_* keys.
RetentionPolicy retention_policy(const Config& config);

// Every policy of the configuration: the archive's, for paths in no folder of their own,
// and each `retention_folder`'s (its keys left out take the archive's values). The
// deepest folder holding a path gives that path's policy.
struct RetentionPolicies {
  RetentionPolicy archive;
  std::vector<std::pair<std::string, RetentionPolicy>> folders;  // absolute, normal

  RetentionPolicies() = default;
  RetentionPolicies(RetentionPolicy archive_policy)  // NOLINT(google-explicit-constructor)
      : archive(archive_policy) {}

  // The policy of `path`: that of the deepest folder holding it, else the archive's.
  const RetentionPolicy& of(std::string_view path) const;
};

// The configuration's policies. The retention_folder entries were checked when the
// configuration was read; one that fails here anyway is refused, naming the key.
Expected<RetentionPolicies> retention_policies(const Config& config);

// Makes `zone` (a name under /usr/share/zoneinfo; empty: leave the process's zone as it is)
// the zone of the retention calendar: sets TZ for this process. Call before any thread
// starts. A zone that does not exist is refused, naming the retention_timezone key.
Done use_time_zone(const std::string& zone);

// A set of instants: a list of single instants, and every instant from `from_ns` on (all
// that is after the last run, and its keep_within window). Empty `from_ns`: nothing was
// ever thinned, every instant is kept.
struct KeptMoments {
  std::vector<std::int64_t> instants;  // sorted, unique, all before from_ns
  std::optional<std::int64_t> from_ns;

  // Whether some kept instant lies in [begin, end).
  bool meets(std::int64_t begin_ns, std::int64_t end_ns) const;
  // Whether the instant itself is kept.
  bool contains(std::int64_t at_ns) const { return meets(at_ns, at_ns + 1); }
  // The kept instants nearest to `at_ns` at or below it and at or above it (for a thinned
  // instant's message); the one above may be from_ns itself.
  std::optional<std::int64_t> kept_before(std::int64_t at_ns) const;
  std::optional<std::int64_t> kept_after(std::int64_t at_ns) const;

  // What this set and `other` both keep.
  KeptMoments intersect(const KeptMoments& other) const;
  // The same set with `pinned` instants added (a pinned moment is never thinned).
  KeptMoments with(const std::vector<std::int64_t>& pinned) const;
};

// The instants `policy` keeps at `now_ns`: the calendar boundaries of its counts, in the
// local time zone, and every instant from now - keep_within on.
KeptMoments kept_moments(const RetentionPolicy& policy, std::int64_t now_ns);

// What the archive keeps, scope by scope: its own moments for the paths in no folder of
// their own, and each folder's (FORMAT.md, "Retention"). A folder stays a scope once a run
// recorded it, even after its entry leaves the configuration: what its policy thinned stays
// thinned.
struct KeptScopes {
  KeptMoments archive;
  std::map<std::string, KeptMoments> folders;  // by folder: absolute, normal

  // The deepest folder holding `path`, or empty: the archive's scope.
  std::string_view scope_of(std::string_view path) const;
  // The moments kept for `path`: those of its scope.
  const KeptMoments& of(std::string_view path) const;
  // The folders strictly beneath `dir`.
  std::vector<std::string_view> folders_within(std::string_view dir) const;
  // What this and `other` both keep: every scope of either, each keeping what both keep
  // for its folder (a scope one side lacks takes that side's moments for the folder).
  KeptScopes intersect(const KeptScopes& other) const;
};

// The moments every scope of `policies` keeps at `now_ns`.
KeptScopes kept_moments(const RetentionPolicies& policies, std::int64_t now_ns);

// Which versions of one path's history (oldest first) `kept` keeps: a version whose span
// [archived_at, next's archived_at) meets a kept instant, the latest, and a pinned one
// (`pinned` holds version numbers). A tombstone is kept only after a kept version it
// ends: a history whose kept versions would all be tombstones is dropped whole (no kept
// instant sees the path). Returns one flag per version.
std::vector<bool> kept_versions(const std::vector<Version>& history, const KeptMoments& kept,
                                const std::set<std::uint64_t>& pinned = {});

// How `forget` runs (forget.hpp; the facade's Store::forget).
struct ForgetOptions {
  bool dry_run = false;
  // Called for each version that goes (or, in a dry run, would go), in path order.
  std::function<void(const std::string& path, const Version& v)> on_removal;
  // Polled between paths; true stops the run (what is removed so far stays removed).
  std::function<bool()> cancelled;
};

struct ForgetReport {
  KeptScopes kept;                  // what the archive keeps after this run
  std::uint64_t paths = 0;          // paths with a history looked at
  std::uint64_t versions = 0;       // their versions
  std::uint64_t removed = 0;        // versions removed (or that would be)
  std::uint64_t whole_paths = 0;    // paths whose whole history went
  std::uint64_t content_bytes = 0;  // file bytes of the removed versions, before dedup
};

}  // namespace tw::archive
