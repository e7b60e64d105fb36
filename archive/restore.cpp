// Restore over the layout seam: puts archived versions back on disk (archive/restore.hpp;
// FORMAT.md, "Restore").
#include "archive/restore.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include <fmt/format.h>

#include "archive/disk.hpp"
#include "archive/paths.hpp"
#include "archive/restore_pool.hpp"
#include "archive/restore_writer.hpp"
#include "archive/timefmt.hpp"
#include "common/escape.hpp"
#include "common/paths.hpp"

namespace tw::archive {
namespace {

// The latest version archived at or before `at_limit` (versions are in time order).
const Version* pick(const std::vector<Version>& versions, std::int64_t at_limit) {
  const Version* best = nullptr;
  for (const auto& v : versions) {
    if (v.archived_at_ns <= at_limit) best = &v;
  }
  return best;
}

bool valid_component(const std::string& c) {
  return !c.empty() && c != "." && c != ".." && c.find('/') == std::string::npos &&
         c.find('\0') == std::string::npos;
}

std::string when(const VersionSelector& which, std::int64_t at_limit) {
  if (which.at_ns) return fmt::format("at {}", format_time_ns(at_limit));
  return "at present";
}

// The version of PATH a restore starts from, and the time limit for what lies beneath it.
struct Chosen {
  const Version* own = nullptr;  // nullptr: PATH had no version then
  std::int64_t at_limit = INT64_MAX;
};

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

// Why nothing can be restored from PATH at the chosen time, if so.
std::optional<Fault> nothing_there(const std::string& path, const std::vector<Version>& history,
                                   const Chosen& chosen, const VersionSelector& which,
                                   bool has_descendants) {
  const Version* own = chosen.own;
  if (own != nullptr && !own->exists()) {
    const char* how = own->op == Op::Delete ? "deleted" : "moved away";
    if (which.number) {
      return permanent(fmt::format("version {} of {} records that it stopped existing there ({})",
                                   own->number, shown_path(path), how));
    }
    const std::string gone =
        fmt::format("{} at {}{}", how, format_time_ns(own->archived_at_ns),
                    own->moved_to.empty() ? "" : " to " + shown_path(own->moved_to));
    if (!which.at_ns) {
      return permanent(
          fmt::format("{} no longer exists ({}); pick an earlier one with --at or --version",
                      shown_path(path), gone));
    }
    return permanent(fmt::format("{} did not exist {} ({})", shown_path(path),
                                 when(which, chosen.at_limit), gone));
  }
  if (own != nullptr || has_descendants) return std::nullopt;
  if (history.empty()) return permanent(fmt::format("{} is not in the archive", shown_path(path)));
  return permanent(fmt::format("{} did not exist {} (first archived at {})", shown_path(path),
                               when(which, chosen.at_limit),
                               format_time_ns(history.front().archived_at_ns)));
}

// One file or link: into the destination's folder, or into an existing folder (not a link
// to one) or a destination ending in '/', under its own name.
Expected<RestoreReport> restore_one(Layout& layout, const std::string& path, const Version& own,
                                    const RestoreOptions& options, RestoreReport report) {
  const std::string dest = options.destination.empty() ? path : options.destination;
  std::string parent = parent_path(dest);
  std::string name = base_name(dest);
  if (!options.destination.empty() &&
      (dest.back() == '/' || open_destination(dest, false, nullptr))) {
    parent = dest;
    name = base_name(path);
  }
  if (name.empty() || name == "." || name == "..") {
    return permanent(fmt::format("cannot restore a file to {}", shown_path(dest)));
  }
  TRY_ASSIGN(const UniqueFd dir, open_destination(parent, true, nullptr));
  while (parent.size() > 1 && parent.back() == '/') parent.pop_back();
  report.destination = parent == "/" ? "/" + name : parent + "/" + name;
  Restorer restorer(layout, options, report);
  TRY(restorer.place(dir.get(), name, own, report.destination));
  // Its name is durable once its folder is.
  if (::fsync(dir.get()) != 0) {
    return permanent(fmt::format("cannot sync {}: {}", shown_path(parent), std::strerror(errno)));
  }
  return report;
}

// The version of each path of `within` at the chosen time (read from one snapshot where the
// layout can), sorted by components. Paths that did not exist then are counted as skipped;
// histories that cannot be read and names that cannot be a file's are problems.
Expected<std::vector<TreeEntry>> tree_entries(Layout& layout, const std::string& path,
                                              const std::vector<std::string>& within,
                                              const Chosen& chosen,
                                              const std::function<bool()>& cancelled,
                                              RestoreReport& report) {
  std::vector<TreeEntry> entries;
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
      report.problems.push_back(history.error());
      return true;
    } else if (const Version* v = pick(*history, chosen.at_limit)) {
      version = *v;
    }
    if (!version) return true;  // not archived yet then, or a parent known only by name
    if (!version->exists()) {
      ++report.skipped;
      return true;
    }
    auto parts = components_below(p, path);
    if (!std::all_of(parts.begin(), parts.end(), valid_component)) {
      report.problems.push_back(fmt::format("refusing unsafe archived path {}", shown_path(p)));
      return true;
    }
    entries.push_back(TreeEntry{std::move(parts), std::move(*version)});
    return true;
  }));
  if (stopped) return retry("cancelled");
  std::sort(entries.begin(), entries.end(),
            [](const TreeEntry& a, const TreeEntry& b) { return a.parts < b.parts; });
  return entries;
}

// A directory and everything archived beneath it, made durable as choose_durability says.
Expected<RestoreReport> restore_tree(Layout& layout, const std::string& path,
                                     const std::vector<std::string>& within, const Chosen& chosen,
                                     const RestoreOptions& options,
                                     const std::function<bool()>& cancelled, RestoreReport report) {
  TRY_ASSIGN(const auto entries, tree_entries(layout, path, within, chosen, cancelled, report));
  const std::string dest = options.destination.empty() ? path : options.destination;
  report.destination = dest;
  bool created_root = false;
  TRY_ASSIGN(const UniqueFd root_fd, open_destination(dest, true, &created_root));
  const auto meminfo = read_small_file("/proc/meminfo", 1 << 16);
  PlacePool pool(
      layout, options,
      choose_durability(options.durability, meminfo ? *meminfo : std::string(), entries.size()));
  TreeWriter writer(pool, options, root_fd.get(), dest, report);
  for (const auto& entry : entries) {
    if (cancelled && cancelled()) return retry("cancelled");
    writer.write(entry, created_root);
  }
  writer.finish();
  // A destination made here is an entry of the folder above it.
  if (created_root) {
    UniqueFd above(::openat(root_fd.get(), "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (above) pool.sync(std::move(above), parent_path(dest));
  }
  pool.finish(report, root_fd.get(), dest);
  if (report.files + report.symlinks + report.directories == 0 && report.problems.empty()) {
    return permanent(fmt::format("nothing under {} existed {}", shown_path(path),
                                 when(options.which, chosen.at_limit)));
  }
  return report;
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

// A restore at `at_ns` gives back the tree as it was only when retention kept that moment
// (FORMAT.md, "Retention"): one that the policy of PATH's scope thinned is refused, naming
// the nearest kept moments.
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

// Leaves out of `within` every folder beneath PATH whose own policy thinned `at_ns`, each
// named in the report with its nearest kept moments: the rest of the tree is still exactly
// as it was then.
void leave_out_thinned(const KeptScopes& kept, const std::string& path, std::int64_t at_ns,
                       std::vector<std::string>& within, RestoreReport& report) {
  for (const std::string_view folder : kept.folders_within(path)) {
    const KeptMoments& moments = kept.folders.find(std::string(folder))->second;
    if (moments.contains(at_ns)) continue;
    const auto before = within.size();
    std::erase_if(within, [&](const std::string& p) { return kept.scope_of(p) == folder; });
    if (within.size() == before) continue;
    report.problems.push_back(fmt::format(
        "{} not restored: its retention policy thinned the moment {}; its nearest moments "
        "kept are {}",
        shown_path(folder), format_time_ns(at_ns), nearest_kept(moments, at_ns)));
  }
}

}  // namespace

Expected<RestoreReport> restore_archived(Layout& layout, std::string_view raw,
                                         const RestoreOptions& options,
                                         const std::function<bool()>& cancelled) {
  TRY_ASSIGN(const std::string path, normalize_path(raw));
  TRY_ASSIGN(const KeptScopes kept, layout.kept_moments());
  if (options.which.at_ns) TRY(kept_moment(kept, path, *options.which.at_ns));
  TRY_ASSIGN(const auto history, layout.versions(path));
  TRY_ASSIGN(const Chosen chosen, choose(path, history, options.which));
  if (chosen.own != nullptr && chosen.own->exists() && !chosen.own->is_directory()) {
    return restore_one(layout, path, *chosen.own, options, RestoreReport{});
  }
  Unplaced unplaced;  // what the layout finds beneath PATH but cannot place: damage
  TRY_ASSIGN(auto within, layout.paths_within(path, &unplaced));
  if (auto none = nothing_there(path, history, chosen, options.which, within.size() > 1)) {
    return *none;
  }
  // What cannot be placed is named, one line each, and makes the restore fail (exit 1),
  // never left out silently.
  RestoreReport report;
  const std::uint64_t unreachable = unplaced.unreachable;
  if (unreachable > 0) {
    report.problems.push_back(fmt::format(
        "{} archived entr{} beneath {} cannot be reached and {} not restored (timewarp verify "
        "names the damage)",
        unreachable, unreachable == 1 ? "y" : "ies", shown_path(path),
        unreachable == 1 ? "was" : "were"));
  }
  for (auto& line : unplaced.named) report.problems.push_back(std::move(line));
  if (options.which.at_ns) leave_out_thinned(kept, path, *options.which.at_ns, within, report);
  return restore_tree(layout, path, within, chosen, options, cancelled, std::move(report));
}

}  // namespace tw::archive
