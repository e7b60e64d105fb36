// Restore (FORMAT.md, "Restore"), written once over the layout seam: a file, a link, or a
// directory with everything archived beneath it, as it was at the chosen version or time,
// written below the destination without following a link there. Internal to the archive
// library.
#pragma once

#include <functional>
#include <string_view>

#include "archive/layout.hpp"
#include "archive/types.hpp"
#include "common/result.hpp"

namespace tw::archive {

// Restores `path` from `layout`. Fails when nothing could be restored; entries that failed
// inside a directory, and archived entries the layout cannot reach, are listed in the
// report's problems. `cancelled` (optional) stops it early.
Result<RestoreReport> restore_archived(Layout& layout, std::string_view path,
                                       const RestoreOptions& options,
                                       const std::function<bool()>& cancelled);

}  // namespace tw::archive
