// Verify over the layout seam (archive/verify.hpp).
#include "archive/verify.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "archive/sha256.hpp"
#include "common/dirs.hpp"
#include "common/escape.hpp"

namespace tw::archive {
namespace {

constexpr std::size_t kUsersShown = 20;

// One history: numbered from 1, its gaps those retention made (`forgotten` versions
// removed: FORMAT.md, "Retention"), and no file that names no content.
void check_history(const std::string& path, const std::vector<Version>& versions,
                   std::uint64_t forgotten, const Layout& layout, ContentUsers& users,
                   VerifyReport& report) {
  ++report.histories;
  report.versions += versions.size();
  report.forgotten += forgotten;
  std::uint64_t previous = 0;
  for (const auto& v : versions) {
    if (v.number <= previous) {
      report.problems.push_back(fmt::format("history of {} has version {} after version {}",
                                            shown_path(path), v.number, previous));
    }
    previous = v.number;
  }
  const std::uint64_t missing = previous - std::min<std::uint64_t>(previous, versions.size());
  if (missing != forgotten) {
    report.problems.push_back(fmt::format(
        "history of {} lacks {} of its {} versions, of which retention removed {}: the rest "
        "are lost",
        shown_path(path), missing, previous, forgotten));
  }
  bool path_kept = false;  // by `users`, once a version of it names content
  for (const auto& v : versions) {
    if (!v.exists() || !v.is_file()) continue;
    const auto ids = layout.content_ids(v);
    if (v.size > 0 && ids.empty()) {
      report.problems.push_back(fmt::format("{} v{}: a file of {} bytes that names no content",
                                            shown_path(path), v.number, v.size));
    }
    if (!ids.empty() && !std::exchange(path_kept, true)) users.begin_path(path);
    for (const auto& id : ids) users.add(id, v.number);
  }
}

// The archive is private: a folder or file under the root that others may read is named
// (not damage: a warning).
void check_private(const std::string& root, VerifyReport& report) {
  struct stat st {};
  if (::lstat(root.c_str(), &st) != 0) return;
  if ((st.st_mode & 0077) != 0) {
    report.warnings.push_back(fmt::format(
        "{} is readable by others (mode {:04o}): archived file names and contents are exposed; "
        "chmod -R go-rwx {}",
        shown_path(root), st.st_mode & 07777, shown_path(root)));
  }
}

}  // namespace

void ContentUsers::begin_path(std::string path) { paths_.push_back(std::move(path)); }

std::optional<ContentUsers::Key> ContentUsers::key_of(const std::string& id) const {
  Key key;
  if (digest_bytes(id, key.bytes)) return key;  // runs for every use and every blob
  const auto found = odd_at_.find(id);
  if (found == odd_at_.end()) return std::nullopt;
  key.odd = found->second;
  return key;
}

void ContentUsers::add(const std::string& id, std::uint64_t number) {
  Key key;
  if (auto digest = key_of(id)) {
    key = *digest;
  } else {  // an odd id, seen first
    odd_.push_back(id);
    key.odd = static_cast<std::uint32_t>(odd_.size());
    odd_at_.emplace(id, key.odd);
  }
  uses_.push_back(Use{key, static_cast<std::uint32_t>(paths_.size() - 1), false, number});
}

std::span<ContentUsers::Use> ContentUsers::uses_of(const Key& key) const {
  const auto by_key = [](const Use& a, const Use& b) { return a.key < b.key; };
  if (sorted_ != uses_.size()) {  // those added since the last look-up merged in, in order
    std::stable_sort(uses_.begin() + static_cast<std::ptrdiff_t>(sorted_), uses_.end(), by_key);
    std::inplace_merge(uses_.begin(), uses_.begin() + static_cast<std::ptrdiff_t>(sorted_),
                       uses_.end(), by_key);
    sorted_ = uses_.size();
  }
  const auto [from, to] = std::equal_range(uses_.begin(), uses_.end(), Use{key}, by_key);
  return {from, to};
}

bool ContentUsers::erase(const std::string& id) {
  const auto key = key_of(id);
  if (!key) return false;
  bool had = false;
  for (auto& use : uses_of(*key)) had |= !std::exchange(use.erased, true);
  return had;
}

std::string ContentUsers::text(const std::string& id) const {
  const auto key = key_of(id);
  std::vector<const Use*> uses;
  if (key) {
    for (const auto& use : uses_of(*key)) {
      if (!use.erased) uses.push_back(&use);
    }
  }
  if (uses.empty()) return "used by no version";
  std::string text = "used by ";
  for (std::size_t i = 0; i < uses.size() && i < kUsersShown; ++i) {
    if (i > 0) text += ", ";
    text += fmt::format("{} v{}", shown_path(paths_[uses[i]->path]), uses[i]->number);
  }
  if (uses.size() > kUsersShown) text += fmt::format(" and {} more", uses.size() - kUsersShown);
  return text;
}

std::vector<std::string> ContentUsers::ids() const {
  uses_of(Key{});  // sorts
  std::vector<std::string> out;
  const Key* last = nullptr;  // that of the last id put out
  for (const Use& use : uses_) {
    if (use.erased || (last != nullptr && *last == use.key)) continue;
    last = &use.key;
    out.push_back(use.key.odd > 0 ? odd_[use.key.odd - 1]
                                  : digest_hex(std::string_view(
                                        reinterpret_cast<const char*>(use.key.bytes.data()),
                                        use.key.bytes.size())));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> list_dir(const std::string& dir, bool* failed) {
  auto names = directory_names(dir);
  if (failed != nullptr) *failed = !names && names.failure().value != ENOENT;
  return names ? std::move(names.value()) : std::vector<std::string>{};
}

VerifyReport verify_archive(Layout& layout, const std::string& root,
                            const std::function<bool()>& cancelled,
                            const std::function<void(std::string_view)>& progress) {
  VerifyReport report;
  check_private(root, report);
  ContentUsers users;
  layout.begin_verify_storage();
  auto paths = layout.archived_paths();
  if (!paths) {
    report.problems.push_back(paths.error());
    return report;
  }
  // One snapshot for every history (and, read inside it, what retention removed of each).
  bool stopped = false;
  const auto each = [&](std::size_t i, Expected<std::vector<Version>> versions) {
    if (cancelled && cancelled()) {
      stopped = true;
      return false;
    }
    const std::string& path = (*paths)[i];
    if (!versions) {
      report.problems.push_back(versions.error());
      return true;
    }
    auto forgotten = layout.forgotten(path);
    if (!forgotten) {
      report.problems.push_back(forgotten.error());
      return true;
    }
    check_history(path, *versions, *forgotten, layout, users, report);
    return true;
  };
  if (auto read = layout.each_history(*paths, each); !read) {
    report.problems.push_back(read.error());
    return report;
  }
  if (stopped) {
    report.problems.push_back("verify cancelled before it finished");
    return report;
  }
  if (progress) {
    progress(
        fmt::format("checked {} histories with {} versions", report.histories, report.versions));
  }
  layout.verify_storage(std::move(users), report, progress);
  return report;
}

}  // namespace tw::archive
