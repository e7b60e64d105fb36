// The facade's figures of the archive's space (archive/store.hpp): the layout's own, and
// what forget's removals would free.
#include <utility>

#include "archive/paths.hpp"
#include "archive/store.hpp"
#include "archive/store_impl.hpp"

namespace tw::archive {

Expected<SpaceReport> Store::space(const std::vector<DroppedVersions>& left_out) const {
  std::vector<DroppedVersions> canonical;
  canonical.reserve(left_out.size());
  for (const auto& dropped : left_out) {
    TRY_ASSIGN(std::string path, normalize_path(dropped.path));
    canonical.push_back({std::move(path), dropped.numbers, dropped.latest});
  }
  return impl_->layout->space(canonical);
}

Expected<ForgetPlan> Store::plan_forget_space(const RetentionPolicies& policy, std::int64_t now_ns,
                                              const ForgetOptions& options) const {
  // Forget names the versions it removes path by path, in path order: those of one path
  // come together.
  std::vector<DroppedVersions> gone;
  ForgetOptions planned = options;
  planned.dry_run = true;
  planned.on_removal = [&](const std::string& path, const Version& v) {
    if (options.on_removal) options.on_removal(path, v);
    if (gone.empty() || gone.back().path != path) gone.push_back({path, {}, 0});
    gone.back().numbers.push_back(v.number);
  };
  TRY_ASSIGN(ForgetReport report, plan_forget(policy, now_ns, planned));
  auto space = impl_->layout->space(gone);
  if (!space) return ForgetPlan{std::move(report), std::nullopt, space.error()};
  return ForgetPlan{std::move(report), std::move(*space), {}};
}

}  // namespace tw::archive
