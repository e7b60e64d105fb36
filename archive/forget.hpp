// Forget: the retention policy applied to the archive over the layout seam (FORMAT.md,
// "Retention"). The moments the policy keeps now are intersected with those every earlier
// run kept, recorded first (so a kill at any later instant leaves an archive that knows
// which moments it can still restore exactly), then each history loses the versions no
// kept moment sees, a few paths per short transaction, beside archivers that keep writing.
// Internal to the archive library; the facade's Store::forget runs it.
#pragma once

#include <cstdint>

#include "archive/layout.hpp"
#include "archive/retention.hpp"
#include "archive/types.hpp"

namespace tw::archive {

// Applies `policies` as of `now_ns` to `layout`, each path the policy of the deepest folder
// holding it (every pinned version stays), through `writer` (the same layout, writable);
// with none, or options.dry_run, only says what would go.
Expected<ForgetReport> forget_versions(Layout& layout, WritableLayout* writer,
                                       const RetentionPolicies& policies, std::int64_t now_ns,
                                       const ForgetOptions& options);

}  // namespace tw::archive
