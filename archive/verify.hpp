// Verify (FORMAT.md, "Verify"), written once over the layout seam: every history is read
// and checked, and every piece of content it names is counted against its users; the
// layout then reads its storage back (Layout::verify_storage). Internal to the archive
// library.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "archive/layout.hpp"
#include "archive/types.hpp"

namespace tw::archive {

// Verifies the archive under `root` in `layout`; `cancelled` (optional) stops it early.
VerifyReport verify_archive(Layout& layout, const std::string& root,
                            const std::function<bool()>& cancelled,
                            const std::function<void(std::string_view)>& progress);

// The entry names of a directory (without . and ..), sorted; empty when it cannot be read
// (`failed`, when given, says whether it exists but could not be read).
std::vector<std::string> list_dir(const std::string& dir, bool* failed = nullptr);

}  // namespace tw::archive
