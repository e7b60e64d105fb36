// The facade's reads of the archive's tree at a moment (archive/store.hpp), on the same
// choice of versions as restore (archive/snapshot.hpp).
#include <climits>
#include <utility>

#include "archive/paths.hpp"
#include "archive/snapshot.hpp"
#include "archive/store.hpp"
#include "archive/store_impl.hpp"
#include "common/paths.hpp"

namespace tw::archive {
namespace {

// What a read left out is named as in its problems.
constexpr std::string_view kLeftOut = "left out";

// What the archive keeps, when a read is at a moment: refused, as restore --at refuses it,
// when `path`'s scope thinned that moment. Nothing is read for a read of now.
Expected<KeptScopes> kept_for(Layout& layout, const std::string& path,
                              std::optional<std::int64_t> at_ns) {
  if (!at_ns) return KeptScopes{};
  TRY_ASSIGN(KeptScopes kept, layout.kept_moments());
  TRY(kept_moment(kept, path, *at_ns));
  return kept;
}

// The entries of a tree read below `dir`, each named by its whole path.
std::vector<Store::EntryAt> named_below(const std::string& dir, std::vector<TreeEntry> entries) {
  std::vector<Store::EntryAt> named;
  named.reserve(entries.size());
  for (auto& entry : entries) {
    std::string path = dir;
    for (const auto& part : entry.parts) path = join_path(path, part);
    named.push_back(Store::EntryAt{std::move(path), std::move(entry.version)});
  }
  return named;
}

}  // namespace

Expected<std::optional<Version>> Store::version_at(std::string_view raw,
                                                   std::optional<std::int64_t> at_ns) const {
  TRY_ASSIGN(const std::string path, normalize_path(raw));
  Layout& layout = *impl_->layout;
  TRY(kept_for(layout, path, at_ns));
  TRY_ASSIGN(const auto history, layout.versions(path));
  TRY_ASSIGN(const Chosen chosen, choose(path, history, VersionSelector{std::nullopt, at_ns}));
  if (chosen.own == nullptr || !chosen.own->exists()) return std::optional<Version>();
  return std::optional<Version>(*chosen.own);
}

Expected<std::vector<Store::EntryAt>> Store::list_at(std::string_view raw,
                                                     std::optional<std::int64_t> at_ns) const {
  TRY_ASSIGN(const std::string dir, normalize_path(raw));
  Layout& layout = *impl_->layout;
  TRY_ASSIGN(const KeptScopes kept, kept_for(layout, dir, at_ns));
  TRY_ASSIGN(auto children, layout.children(dir));
  // A listing has no room for problems: a child folder its own policy thinned is left out
  // here, and a read of it refuses the moment, naming the nearest kept ones.
  std::vector<std::string> unlisted;
  if (at_ns) leave_out_thinned(kept, dir, *at_ns, children, kLeftOut, unlisted);
  const Chosen chosen{nullptr, at_ns.value_or(INT64_MAX)};
  TreeReading reading;
  TRY_ASSIGN(auto entries, tree_entries(layout, dir, std::move(children), chosen,
                                        impl_->hooks.cancelled, reading));
  // A history that could not be read fails the listing rather than hiding an entry; a name
  // that cannot be a file's (damage, which verify names) is left out.
  if (reading.unreadable) return *reading.unreadable;
  return named_below(dir, std::move(entries));
}

Expected<Store::TreeAt> Store::tree_at(std::string_view raw,
                                       std::optional<std::int64_t> at_ns) const {
  TRY_ASSIGN(const std::string dir, normalize_path(raw));
  Layout& layout = *impl_->layout;
  TRY_ASSIGN(const KeptScopes kept, kept_for(layout, dir, at_ns));
  TRY_ASSIGN(const auto history, layout.versions(dir));
  TRY_ASSIGN(const Chosen chosen, choose(dir, history, VersionSelector{std::nullopt, at_ns}));
  Unplaced unplaced;
  TRY_ASSIGN(auto within, layout.paths_within(dir, &unplaced));
  TreeAt tree;
  name_unplaced(std::move(unplaced), dir, kLeftOut, tree.problems);
  if (at_ns) leave_out_thinned(kept, dir, *at_ns, within, kLeftOut, tree.problems);
  TreeReading reading;
  TRY_ASSIGN(auto entries,
             tree_entries(layout, dir, std::move(within), chosen, impl_->hooks.cancelled, reading));
  for (auto& line : reading.problems) tree.problems.push_back(std::move(line));
  tree.entries = named_below(dir, std::move(entries));
  return tree;
}

}  // namespace tw::archive
