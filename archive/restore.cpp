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
#include "archive/snapshot.hpp"
#include "archive/timefmt.hpp"
#include "common/escape.hpp"
#include "common/paths.hpp"

namespace tw::archive {
namespace {

std::string when(const VersionSelector& which, std::int64_t at_limit) {
  if (which.at_ns) return fmt::format("at {}", format_time_ns(at_limit));
  return "at present";
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

// A directory and everything archived beneath it, made durable as choose_durability says.
// The entries are placed as they are read, unless the pool's workers read `layout` itself.
Expected<RestoreReport> restore_tree(Layout& layout, const std::string& path,
                                     std::vector<std::string> within, const Chosen& chosen,
                                     const RestoreOptions& options,
                                     const std::function<bool()>& cancelled, RestoreReport report) {
  const std::string dest = options.destination.empty() ? path : options.destination;
  report.destination = dest;
  bool created_root = false;
  TRY_ASSIGN(const UniqueFd root_fd, open_destination(dest, true, &created_root));
  const auto meminfo = read_small_file("/proc/meminfo", 1 << 16);
  PlacePool pool(
      layout, options,
      choose_durability(options.durability, meminfo ? *meminfo : std::string(), within.size()));
  TreeWriter writer(pool, options, root_fd.get(), dest, report);
  const std::size_t found_before = report.problems.size();
  TreeReading reading;
  if (pool.uses_layout()) {
    TRY_ASSIGN(auto entries,
               tree_entries(layout, path, std::move(within), chosen, cancelled, reading));
    for (auto& entry : entries) {
      if (cancelled && cancelled()) return retry("cancelled");
      writer.write(std::move(entry), created_root);
    }
  } else {
    TRY(each_tree_entry(layout, path, std::move(within), chosen, cancelled, reading,
                        [&](TreeEntry entry) { writer.write(std::move(entry), created_root); }));
  }
  // What the reading met comes before what the writing did.
  report.problems.insert(report.problems.begin() + static_cast<std::ptrdiff_t>(found_before),
                         std::make_move_iterator(reading.problems.begin()),
                         std::make_move_iterator(reading.problems.end()));
  report.skipped += reading.skipped;
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
  name_unplaced(std::move(unplaced), path, "not restored", report.problems);
  if (options.which.at_ns) {
    leave_out_thinned(kept, path, *options.which.at_ns, within, "not restored", report.problems);
  }
  return restore_tree(layout, path, std::move(within), chosen, options, cancelled,
                      std::move(report));
}

}  // namespace tw::archive
