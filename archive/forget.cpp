// Forget over the layout seam (archive/forget.hpp).
#include "archive/forget.hpp"

#include <utility>
#include <vector>

namespace tw::archive {
namespace {

// Versions go a few hundred at a time: each batch is one short transaction, so archivers
// committing beside the run wait for one batch at most, and a kill loses none of the work
// committed before it.
constexpr std::size_t kBatchVersions = 512;

class Forgetter {
 public:
  Forgetter(Layout& layout, WritableLayout* writer, const ForgetOptions& options)
      : layout_(layout), writer_(writer), options_(options) {}

  Done path(const std::string& path, const KeptMoments& kept, ForgetReport& report) {
    TRY_ASSIGN(const std::vector<Version> history, layout_.versions(path));
    if (history.empty()) return Ok{};
    TRY_ASSIGN(const std::set<std::uint64_t> pinned, layout_.pinned(path));
    ++report.paths;
    report.versions += history.size();
    const std::vector<bool> keep = kept_versions(history, kept, pinned);
    DroppedVersions dropped{path, {}, history.back().number};
    for (std::size_t i = 0; i < history.size(); ++i) {
      if (keep[i]) continue;
      const Version& v = history[i];
      if (v.is_file()) report.content_bytes += v.size;
      if (options_.on_removal) options_.on_removal(path, v);
      dropped.numbers.push_back(v.number);
    }
    if (dropped.numbers.empty()) return Ok{};
    report.removed += dropped.numbers.size();
    if (dropped.numbers.size() == history.size()) ++report.whole_paths;
    if (writer_ == nullptr) return Ok{};
    pending_versions_ += dropped.numbers.size();
    pending_.push_back(std::move(dropped));
    if (pending_versions_ >= kBatchVersions) return flush();
    return Ok{};
  }

  Done flush() {
    if (pending_.empty()) return Ok{};
    TRY(writer_->drop_versions(pending_));
    pending_.clear();
    pending_versions_ = 0;
    return Ok{};
  }

 private:
  Layout& layout_;
  WritableLayout* writer_;  // null: a dry run
  const ForgetOptions& options_;
  std::vector<DroppedVersions> pending_;
  std::size_t pending_versions_ = 0;
};

}  // namespace

Expected<ForgetReport> forget_versions(Layout& layout, WritableLayout* writer,
                                       const RetentionPolicies& policies, std::int64_t now_ns,
                                       const ForgetOptions& options) {
  if (options.dry_run) writer = nullptr;
  ForgetReport report;
  const KeptScopes now = kept_moments(policies, now_ns);
  // Recorded before any version goes: from here on a restore at a moment this run thins
  // is refused as thinned, whether or not the run gets to that moment's versions. What is
  // recorded is what this run and every earlier one keep.
  if (writer == nullptr) {
    TRY_ASSIGN(const KeptScopes before, layout.kept_moments());
    report.kept = now.intersect(before);
  } else {
    TRY_ASSIGN(report.kept, writer->record_kept(now));
  }
  TRY_ASSIGN(const std::vector<std::string> paths, layout.archived_paths());
  Forgetter forgetter(layout, writer, options);
  for (const auto& path : paths) {
    if (options.cancelled && options.cancelled()) {
      TRY(forgetter.flush());
      return retry("forget: stopped before the end (what it removed so far stays removed)");
    }
    TRY(forgetter.path(path, report.kept.of(path), report));
  }
  TRY(forgetter.flush());
  return report;
}

}  // namespace tw::archive
