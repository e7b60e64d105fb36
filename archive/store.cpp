// The facade (archive/store.hpp): each request, read and check goes to the generic
// algorithms over the archive's layout.
#include "archive/store.hpp"

#include <unordered_set>

#include "archive/paths.hpp"
#include "archive/reconcile.hpp"
#include "archive/restore.hpp"
#include "archive/store_impl.hpp"
#include "archive/verify.hpp"
#include "common/paths.hpp"

namespace tw::archive {
namespace {

ArchiveResult to_archive_result(const Expected<std::uint64_t>& result) {
  if (result) return ArchiveResult{Outcome::Complete, *result, {}};
  return ArchiveResult{result.fault().outcome, 0, result.fault().message};
}

// Runs `request` on a Reconciler of this request, when the store takes new versions.
template <class Request>
ArchiveResult reconciled(Store::Impl& impl, QueueOrder order, Request request) {
  if (impl.writer == nullptr) {
    return ArchiveResult{Outcome::FailedPermanent, 0,
                         "archive " + impl.root + " is open read-only"};
  }
  Reconciler reconciler(*impl.writer, impl.hooks, order);
  return to_archive_result(request(reconciler));
}

}  // namespace

Store::Store(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Store::Store(Store&&) noexcept = default;
Store& Store::operator=(Store&&) noexcept = default;
Store::~Store() = default;

const std::string& Store::root() const { return impl_->root; }
ArchiveFormat Store::format() const { return impl_->layout->format(); }

ArchiveResult Store::update(std::string_view path, QueueOrder order) {
  return reconciled(*impl_, order, [&](Reconciler& r) { return r.reconcile(path, Op::Update); });
}
ArchiveResult Store::stat(std::string_view path, QueueOrder order) {
  return reconciled(*impl_, order, [&](Reconciler& r) { return r.reconcile(path, Op::Stat); });
}
ArchiveResult Store::remove(std::string_view path, QueueOrder order) {
  return reconciled(*impl_, order, [&](Reconciler& r) { return r.reconcile(path, Op::Delete); });
}
ArchiveResult Store::move(std::string_view from, std::string_view to, QueueOrder order) {
  return reconciled(*impl_, order, [&](Reconciler& r) { return r.move(from, to); });
}
ArchiveResult Store::scan(std::string_view path, QueueOrder order, const Filter* filter) {
  return reconciled(*impl_, order, [&](Reconciler& r) { return r.scan(path, filter); });
}

Expected<std::vector<Version>> Store::versions(std::string_view raw) const {
  TRY_ASSIGN(const std::string path, normalize_path(raw));
  return impl_->layout->versions(path);
}

Expected<std::vector<std::string>> Store::paths_within(std::string_view raw) const {
  TRY_ASSIGN(const std::string path, normalize_path(raw));
  return impl_->layout->paths_within(path, nullptr);
}

Expected<std::vector<std::string>> Store::children(std::string_view raw,
                                                   const std::vector<std::string>& except) const {
  TRY_ASSIGN(const std::string path, normalize_path(raw));
  TRY_ASSIGN(std::vector<std::string> children, impl_->layout->children(path));
  if (except.empty()) return children;
  const std::unordered_set<std::string> skip(except.begin(), except.end());
  std::erase_if(children,
                [&](const std::string& child) { return skip.count(base_name(child)) > 0; });
  return children;
}

Expected<RestoreReport> Store::restore(std::string_view path, const RestoreOptions& options) const {
  return restore_archived(*impl_->layout, path, options, impl_->hooks.cancelled);
}

VerifyReport Store::verify(const std::function<void(std::string_view)>& progress) const {
  return verify_archive(*impl_->layout, impl_->root, impl_->hooks.cancelled, progress);
}

// --- Group commit ------------------------------------------------------------------------

void Store::begin_group() {
  if (impl_->writer != nullptr) impl_->writer->begin_group();
}

void Store::close_group(std::function<void(const Done&)> on_durable) {
  if (impl_->writer == nullptr) {
    on_durable(Ok{});
    return;
  }
  impl_->writer->close_group(std::move(on_durable));
}

void Store::advance() {
  if (impl_->writer != nullptr) impl_->writer->advance();
}

int Store::group_fd() const { return impl_->writer != nullptr ? impl_->writer->group_fd() : -1; }

bool Store::syncing() const { return impl_->writer != nullptr && impl_->writer->syncing(); }

Done Store::flush() {
  if (impl_->writer == nullptr) return Ok{};
  return impl_->writer->flush();
}

Expected<bool> Store::fold_journal() {
  return impl_->writer != nullptr ? impl_->writer->fold_journal() : Expected<bool>(true);
}

std::size_t Store::staged_versions() const {
  return impl_->writer != nullptr ? impl_->writer->staged_versions() : 0;
}
std::uint64_t Store::staged_bytes() const {
  return impl_->writer != nullptr ? impl_->writer->staged_bytes() : 0;
}

}  // namespace tw::archive
