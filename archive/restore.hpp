// Restore (FORMAT.md, "Restore"), written once over the layout seam: a file, a link, or a
// directory with everything archived beneath it, as it was at the chosen version or time,
// written below the destination without following a link there. Internal to the archive
// library.
#pragma once

#include <functional>
#include <string_view>

#include "archive/expected.hpp"
#include "archive/layout.hpp"
#include "archive/types.hpp"

namespace tw::archive {

// Restores `path` from `layout`. Fails when nothing could be restored; entries that failed
// inside a directory, and what the layout finds beneath it but cannot place (entries it
// cannot reach, names that cannot be a file's, parts of its tree whose place is lost), are
// listed in the report's problems. `cancelled` (optional) stops it early. A restore is no
// request of the protocol, but its fault says which side failed: RETRY when the archive
// could not be read (or it was cancelled), PERMANENT for what restore refuses or cannot
// write at the destination.
Expected<RestoreReport> restore_archived(Layout& layout, std::string_view path,
                                         const RestoreOptions& options,
                                         const std::function<bool()>& cancelled);

}  // namespace tw::archive
