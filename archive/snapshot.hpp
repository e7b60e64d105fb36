// The archive's tree as it stood at a moment, over the layout seam (FORMAT.md, "Restore"
// and "Retention"): which version of a path a moment sees, whether retention still holds
// that moment whole, and the versions of a tree read from one snapshot. Restore
// (restore.cpp) and the facade's reads at a moment (store_snapshot.cpp) both stand on it,
// so they never disagree about what existed when. Internal to the archive library.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "archive/expected.hpp"
#include "archive/layout.hpp"
#include "archive/retention.hpp"
#include "archive/types.hpp"

namespace tw::archive {

// The latest version archived at or before `at_limit` (versions are in time order), or
// nullptr.
const Version* pick(const std::vector<Version>& versions, std::int64_t at_limit);

// The version of a path a read starts from, and the time limit for what lies beneath it.
struct Chosen {
  const Version* own = nullptr;  // nullptr: the path had no version then
  std::int64_t at_limit = INT64_MAX;
};

// The version of `path` (whose history is `history`) that `which` picks: by number (its
// archive time then limits what lies beneath), the latest at or before a time, or the
// latest. A number the history lacks is refused.
Expected<Chosen> choose(const std::string& path, const std::vector<Version>& history,
                        const VersionSelector& which);

// A read at `at_ns` gives the tree as it was only when retention kept that moment
// (FORMAT.md, "Retention"): one that the policy of `path`'s scope thinned is refused,
// naming the nearest kept moments.
Done kept_moment(const KeptScopes& kept, const std::string& path, std::int64_t at_ns);

// Leaves out of `within` every folder beneath `path` whose own policy thinned `at_ns`, each
// named in `problems` ("<folder> <left_out>: ...", with its nearest kept moments): the rest
// of the tree is still exactly as it was then.
void leave_out_thinned(const KeptScopes& kept, const std::string& path, std::int64_t at_ns,
                       std::vector<std::string>& within, std::string_view left_out,
                       std::vector<std::string>& problems);

// Names in `problems` what the layout found beneath `path` but cannot place (damage): none
// of it is read, and it is never left out silently. `left_out` says what became of it.
void name_unplaced(Unplaced unplaced, const std::string& path, std::string_view left_out,
                   std::vector<std::string>& problems);

// An entry of a tree read at a moment: its components below the tree's path, and its version.
struct TreeEntry {
  std::vector<std::string> parts;
  Version version;
};

// What reading a tree at a moment met besides its entries.
struct TreeReading {
  std::vector<std::string> problems;  // histories not read, unsafe names; one line each
  std::optional<Fault> unreadable;    // the first history that could not be read, if any
  std::uint64_t skipped = 0;          // paths that did not exist then (tombstones)
};

// The version of each path of `within` (`path` and paths beneath it) at `chosen`, read from
// one snapshot where the layout can, sorted by components below `path`. `path` itself takes
// chosen.own. Paths with no version then or a tombstone are left out; histories that cannot
// be read and names that cannot be a file's are problems of `reading`. `cancelled`
// (optional) stops it with a RETRY fault.
Expected<std::vector<TreeEntry>> tree_entries(Layout& layout, const std::string& path,
                                              std::vector<std::string> within, const Chosen& chosen,
                                              const std::function<bool()>& cancelled,
                                              TreeReading& reading);
// The same entries handed to `each` one at a time, in the same order, as they are read (a
// restore places them meanwhile).
Done each_tree_entry(Layout& layout, const std::string& path, std::vector<std::string> within,
                     const Chosen& chosen, const std::function<bool()>& cancelled,
                     TreeReading& reading, const std::function<void(TreeEntry)>& each);

}  // namespace tw::archive
