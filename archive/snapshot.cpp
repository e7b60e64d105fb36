// The archive's tree at a moment, over the layout seam (archive/snapshot.hpp).
#include "archive/snapshot.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "archive/paths.hpp"
#include "archive/timefmt.hpp"
#include "common/escape.hpp"

namespace tw::archive {
namespace {

bool valid_component(const std::string& c) {
  return !c.empty() && c != "." && c != ".." && c.find('/') == std::string::npos &&
         c.find('\0') == std::string::npos;
}

// The kept moments nearest to a thinned `at_ns`, as text.
std::string nearest_kept(const KeptMoments& kept, std::int64_t at_ns) {
  const auto before = kept.kept_before(at_ns);
  const auto after = kept.kept_after(at_ns);
  std::string nearest;
  if (before) nearest = format_time_ns(*before);
  if (after) nearest += (nearest.empty() ? "" : " or ") + format_time_ns(*after);
  return nearest.empty() ? "none" : nearest;
}

// Paths in the order of their components ('/' before every byte a name may hold), so that
// the components of a path below another compare as whole vectors would.
bool components_less(const std::string& a, const std::string& b) {
  const auto [ia, ib] = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
  if (ib == b.end()) return false;  // b is a prefix of a (or equal)
  if (ia == a.end()) return true;
  if (*ia == '/' || *ib == '/') return *ia == '/';
  return static_cast<unsigned char>(*ia) < static_cast<unsigned char>(*ib);
}

}  // namespace

const Version* pick(const std::vector<Version>& versions, std::int64_t at_limit) {
  const Version* best = nullptr;
  for (const auto& v : versions) {
    if (v.archived_at_ns <= at_limit) best = &v;
  }
  return best;
}

Expected<Chosen> choose(const std::string& path, const std::vector<Version>& history,
                        const VersionSelector& which) {
  Chosen chosen;
  if (which.number) {
    for (const auto& v : history) {
      if (v.number == *which.number) chosen.own = &v;
    }
    if (chosen.own == nullptr) {
      return permanent(fmt::format("{} has no version {} (it has {})", shown_path(path),
                                   *which.number, history.size()));
    }
    chosen.at_limit = chosen.own->archived_at_ns;
    return chosen;
  }
  if (which.at_ns) chosen.at_limit = *which.at_ns;
  chosen.own = pick(history, chosen.at_limit);
  return chosen;
}

Done kept_moment(const KeptScopes& kept, const std::string& path, std::int64_t at_ns) {
  const KeptMoments& moments = kept.of(path);
  if (moments.contains(at_ns)) return Ok{};
  const std::string_view scope = kept.scope_of(path);
  if (scope.empty()) {
    return permanent(fmt::format(
        "the archive no longer holds the state at {}: the retention policy thinned that moment; "
        "the nearest moments kept are {} (give one to --at)",
        format_time_ns(at_ns), nearest_kept(moments, at_ns)));
  }
  return permanent(fmt::format(
      "the archive no longer holds the state of {} at {}: the retention policy thinned that "
      "moment there (the folder's own, retention_folder); the nearest moments kept there are "
      "{} (give one to --at)",
      shown_path(scope), format_time_ns(at_ns), nearest_kept(moments, at_ns)));
}

void leave_out_thinned(const KeptScopes& kept, const std::string& path, std::int64_t at_ns,
                       std::vector<std::string>& within, std::string_view left_out,
                       std::vector<std::string>& problems) {
  for (const std::string_view folder : kept.folders_within(path)) {
    const KeptMoments& moments = kept.folders.find(std::string(folder))->second;
    if (moments.contains(at_ns)) continue;
    const auto before = within.size();
    std::erase_if(within, [&](const std::string& p) { return kept.scope_of(p) == folder; });
    if (within.size() == before) continue;
    problems.push_back(fmt::format(
        "{} {}: its retention policy thinned the moment {}; its nearest moments kept are {}",
        shown_path(folder), left_out, format_time_ns(at_ns), nearest_kept(moments, at_ns)));
  }
}

void name_unplaced(Unplaced unplaced, const std::string& path, std::string_view left_out,
                   std::vector<std::string>& problems) {
  const std::uint64_t unreachable = unplaced.unreachable;
  if (unreachable > 0) {
    problems.push_back(fmt::format(
        "{} archived entr{} beneath {} cannot be reached and {} {} (timewarp verify names the "
        "damage)",
        unreachable, unreachable == 1 ? "y" : "ies", shown_path(path),
        unreachable == 1 ? "was" : "were", left_out));
  }
  for (auto& line : unplaced.named) problems.push_back(std::move(line));
}

Done each_tree_entry(Layout& layout, const std::string& path, std::vector<std::string> within,
                     const Chosen& chosen, const std::function<bool()>& cancelled,
                     TreeReading& reading, const std::function<void(TreeEntry)>& each) {
  // In the order of their components: a folder before what is in it.
  std::sort(within.begin(), within.end(), components_less);
  bool stopped = false;
  TRY(layout.each_history(within, [&](std::size_t i, Expected<std::vector<Version>> history) {
    if (cancelled && cancelled()) {
      stopped = true;
      return false;
    }
    const std::string& p = within[i];
    std::optional<Version> version;
    if (p == path) {
      if (chosen.own != nullptr) version = *chosen.own;
    } else if (!history) {
      if (!reading.unreadable) reading.unreadable = history.fault();
      reading.problems.push_back(history.error());
      return true;
    } else if (const Version* v = pick(*history, chosen.at_limit)) {
      version = *v;
    }
    if (!version) return true;  // not archived yet then, or a parent known only by name
    if (!version->exists()) {
      ++reading.skipped;
      return true;
    }
    auto parts = components_below(p, path);
    if (!std::all_of(parts.begin(), parts.end(), valid_component)) {
      reading.problems.push_back(fmt::format("refusing unsafe archived path {}", shown_path(p)));
      return true;
    }
    each(TreeEntry{std::move(parts), std::move(*version)});
    return true;
  }));
  if (stopped) return retry("cancelled");
  return Ok{};
}

Expected<std::vector<TreeEntry>> tree_entries(Layout& layout, const std::string& path,
                                              std::vector<std::string> within, const Chosen& chosen,
                                              const std::function<bool()>& cancelled,
                                              TreeReading& reading) {
  std::vector<TreeEntry> entries;
  TRY(each_tree_entry(layout, path, std::move(within), chosen, cancelled, reading,
                      [&](TreeEntry entry) { entries.push_back(std::move(entry)); }));
  return entries;
}

}  // namespace tw::archive
