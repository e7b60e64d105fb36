// Store::verify: re-reads every object and history (FORMAT.md, "Verify").
#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <climits>
#include <map>
#include <memory>
#include <optional>
#include <unordered_map>

#include <fmt/format.h>

#include "archiver/paths.hpp"
#include "archiver/sha256.hpp"
#include "archiver/store_impl.hpp"
#include "common/dirs.hpp"
#include "common/paths.hpp"

namespace tw::archive {
namespace {

// The entry names of a directory (without . and ..), sorted; empty when it cannot be read
// (`failed`, when given, says whether it exists but could not be read).
std::vector<std::string> list_dir(const std::string& dir, bool* failed = nullptr) {
  auto names = directory_names(dir);
  if (failed != nullptr) *failed = !names && names.failure().value != ENOENT;
  return names ? std::move(names.value()) : std::vector<std::string>{};
}

bool is_bucket(const std::string& name) {
  return name.size() == 2 && is_sha256_hex(name + std::string(62, '0'));
}

std::string users_text(const std::vector<std::string>& users) {
  if (users.empty()) return "used by no version";
  constexpr std::size_t kShown = 20;
  std::string text = "used by ";
  for (std::size_t i = 0; i < users.size() && i < kShown; ++i) {
    if (i > 0) text += ", ";
    text += users[i];
  }
  if (users.size() > kShown) text += fmt::format(" and {} more", users.size() - kShown);
  return text;
}

// Format 2: the catalog's own check; every history numbered without gaps; every blob a
// version names in the blob index; every indexed blob read from its pack, decompressed and
// re-hashed, pack by pack in file order; and pack records no commit names counted.
VerifyReport verify_format2(Store::Impl& impl,
                            const std::function<void(std::string_view)>& progress) {
  VerifyReport report;
  const Catalog& catalog = *impl.catalog;
  if (auto problems = catalog.integrity_problems(); !problems) {
    report.problems.push_back(problems.error());
  } else if (!problems->empty()) {
    report.problems.push_back("catalog.db is damaged: " + *problems);
  }
  std::map<std::string, std::vector<std::string>> users;  // blob id -> "path vN"
  auto paths = catalog.archived_paths();
  if (!paths) {
    report.problems.push_back(paths.error());
    return report;
  }
  for (const auto& path : *paths) {
    if (impl.cancelled()) {
      report.problems.push_back("cancelled");
      return report;
    }
    auto versions = catalog.versions(path);
    if (!versions) {
      report.problems.push_back(versions.error());
      continue;
    }
    ++report.histories;
    std::uint64_t expected = 1;
    for (const auto& v : *versions) {
      ++report.versions;
      if (v.number != expected++) {
        report.problems.push_back(fmt::format("history of {} skips from version {} to {}",
                                              shown_path(path), expected - 2, v.number));
        expected = v.number + 1;
      }
      if (v.exists() && v.is_file() && v.size > 0 && v.chunks.empty()) {
        report.problems.push_back(fmt::format("{} v{}: a file of {} bytes that names no blob",
                                              shown_path(path), v.number, v.size));
      }
      for (const auto& id : v.chunks) {
        users[id].push_back(fmt::format("{} v{}", shown_path(path), v.number));
      }
    }
  }
  auto blobs = catalog.all_blobs();
  if (!blobs) {
    report.problems.push_back(blobs.error());
    return report;
  }
  const std::string packs = impl.root + "/packs";
  std::string open_name;
  UniqueFd pack;
  std::map<std::string, std::uint64_t> indexed_per_pack;
  for (const auto& [id, ref] : *blobs) {
    if (impl.cancelled()) {
      report.problems.push_back("cancelled");
      return report;
    }
    ++report.objects;
    ++indexed_per_pack[ref.pack];
    const auto used = users.find(id);
    if (used == users.end()) ++report.unreferenced_objects;
    if (ref.pack != open_name) {
      open_name = ref.pack;
      pack.reset(::open(pack_file(packs, ref.pack).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    }
    const std::vector<std::string> none;
    const auto& who = used == users.end() ? none : used->second;
    if (!pack) {
      report.problems.push_back(
          fmt::format("blob {} is in pack {}, which cannot be opened ({}); {}", id, ref.pack,
                      std::strerror(errno), users_text(who)));
    } else if (auto read = read_blob(pack.get(), ref, id); !read) {
      report.problems.push_back(fmt::format("damaged blob {} in pack {}: {}; {}", id, ref.pack,
                                            read.error(), users_text(who)));
    }
    if (used != users.end()) users.erase(used);
    if (progress && report.objects % 1000 == 0) {
      progress(fmt::format("checked {} blobs", report.objects));
    }
  }
  // Blobs named by a version but not in the index.
  for (const auto& [id, who] : users) {
    report.problems.push_back(fmt::format("missing blob {}; {}", id, users_text(who)));
  }
  // Records in packs that no commit names: an interrupted request's, harmless.
  for (const auto& bucket : list_dir(packs)) {
    for (const auto& name : list_dir(packs + "/" + bucket)) {
      UniqueFd fd(
          ::open((packs + "/" + bucket + "/" + name).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
      std::uint64_t records = 0;
      if (!fd || !scan_pack(fd.get(), [&](const BlobHeader&) { ++records; })) {
        report.problems.push_back(
            fmt::format("packs/{}/{} is not a readable pack", bucket, shown_path(name)));
        continue;
      }
      const std::string pack_name = name.size() > 5 ? name.substr(0, name.size() - 5) : name;
      const auto indexed = indexed_per_pack[pack_name];
      if (records > indexed) report.unreferenced_objects += records - indexed;
    }
  }
  return report;
}

}  // namespace

VerifyReport Store::verify(const std::function<void(std::string_view)>& progress) const {
  if (impl_->format == 2) return verify_format2(*impl_, progress);
  VerifyReport report;
  const std::string& root = impl_->root;
  std::map<std::string, std::vector<std::string>> users;  // digest -> "path vN"
  bool failed = false;

  // Nodes and histories. Each node's name, and the markers of its children, are gathered
  // first; the tree they make is checked after.
  struct Node {
    std::optional<std::string> path;
    std::vector<std::string> children;  // finished markers (child keys)
    std::vector<std::string> pending;   // markers of a first archiving not finished
  };
  std::unordered_map<std::string, Node> tree;
  const std::string nodes = root + "/nodes";
  for (const auto& bucket : list_dir(nodes, &failed)) {
    if (!is_bucket(bucket)) {
      report.problems.push_back(fmt::format("unexpected entry nodes/{}", shown_path(bucket)));
      continue;
    }
    std::map<std::string, std::vector<std::string>> keys;  // key -> suffixes present
    for (const auto& name : list_dir(nodes + "/" + bucket)) {
      const auto dot = name.find('.');
      const std::string key = name.substr(0, dot);
      const std::string suffix = dot == std::string::npos ? std::string() : name.substr(dot);
      if (!is_sha256_hex(key) || key.substr(0, 2) != bucket ||
          (suffix != ".history" && suffix != ".path" && suffix != ".lock" &&
           suffix != ".children")) {
        report.problems.push_back(
            fmt::format("unexpected entry nodes/{}/{}", bucket, shown_path(name)));
        continue;
      }
      keys[key].push_back(suffix);
    }
    for (const auto& entry : keys) {
      const std::string& key = entry.first;
      const std::vector<std::string>& suffixes = entry.second;
      const auto has = [&suffixes](const char* s) {
        return std::find(suffixes.begin(), suffixes.end(), s) != suffixes.end();
      };
      const std::string base = nodes + "/" + bucket + "/" + key;
      Node& node = tree[key];
      if (has(".path")) {
        auto named = read_small_file(base + ".path", PATH_MAX * 4);
        if (!named || Impl::key_of(*named) != key) {
          report.problems.push_back(fmt::format("damaged node name {}.path", base));
        } else {
          node.path = std::move(named.value());
        }
      }
      if (has(".history")) {
        auto history = Impl::read_history_file(base + ".history");
        if (!history) {
          report.problems.push_back(history.error());
        } else if (Impl::key_of(history->path) != key ||
                   (node.path && *node.path != history->path)) {
          report.problems.push_back(
              fmt::format("history {}.history is filed under the wrong key ({})", base,
                          shown_path(history->path)));
        } else {
          node.path = history->path;
          ++report.histories;
          report.versions += history->versions.size();
          for (const auto& v : history->versions) {
            if (!v.sha256.empty())
              users[v.sha256].push_back(fmt::format("{} v{}", shown_path(*node.path), v.number));
          }
        }
      }
      if (!has(".children")) continue;
      for (std::string child : list_dir(base + ".children")) {
        const bool pending = child.size() > kPendingSuffix.size() &&
                             child.compare(child.size() - kPendingSuffix.size(),
                                           kPendingSuffix.size(), kPendingSuffix) == 0;
        if (pending) child.resize(child.size() - kPendingSuffix.size());
        if (!is_sha256_hex(child)) {
          report.problems.push_back(
              fmt::format("unexpected entry {}.children/{}", base, shown_path(child)));
          continue;
        }
        (pending ? node.pending : node.children).push_back(child);
      }
    }
  }
  // The tree: every finished marker names a node, every named node is linked from its
  // parent, and every parent has a name. (A pending marker naming nothing was left by an
  // interrupted first archiving: harmless.)
  std::map<std::string, std::uint64_t> lost_parents;  // parent path -> children seen
  for (const auto& [key, node] : tree) {
    const std::string where =
        node.path ? shown_path(*node.path) : "nodes/" + key.substr(0, 2) + "/" + key;
    for (const auto& child : node.children) {
      auto it = tree.find(child);
      if (it == tree.end() || !it->second.path) {
        report.problems.push_back(
            fmt::format("lost history: {} lists a child whose node has no history or name "
                        "(nodes/{}/{}); what was archived there cannot be listed or restored",
                        where, child.substr(0, 2), child));
      } else if (node.path && parent_path(*it->second.path) != *node.path) {
        report.problems.push_back(
            fmt::format("{} is listed as a child of {}", shown_path(*it->second.path), where));
      }
    }
    if (!node.path || *node.path == "/") continue;
    const std::string parent = parent_path(*node.path);
    auto up = tree.find(Impl::key_of(parent));
    if (up == tree.end() || !up->second.path) {
      ++lost_parents[parent];
      continue;
    }
    const auto& siblings = up->second;
    if (std::find(siblings.children.begin(), siblings.children.end(), key) ==
            siblings.children.end() &&
        std::find(siblings.pending.begin(), siblings.pending.end(), key) ==
            siblings.pending.end()) {
      report.problems.push_back(fmt::format(
          "lost child marker: {} is not linked from {}; a restore of {} would leave it out",
          shown_path(*node.path), shown_path(parent), shown_path(parent)));
    }
  }
  for (const auto& [parent, count] : lost_parents) {
    report.problems.push_back(fmt::format(
        "lost directory node: {} has no node, though {} archived path{} lie{} beneath it",
        shown_path(parent), count, count == 1 ? "" : "s", count == 1 ? "s" : ""));
  }
  if (failed) report.problems.push_back(fmt::format("cannot read {}", nodes));
  if (progress)
    progress(
        fmt::format("checked {} histories with {} versions", report.histories, report.versions));

  // Objects.
  failed = false;
  const std::string objects = root + "/objects";
  for (const auto& bucket : list_dir(objects, &failed)) {
    if (!is_bucket(bucket)) {
      report.problems.push_back(fmt::format("unexpected entry objects/{}", shown_path(bucket)));
      continue;
    }
    for (const auto& name : list_dir(objects + "/" + bucket)) {
      if (impl_->cancelled()) {
        report.problems.push_back("verify cancelled before it finished");
        return report;
      }
      const std::string digest = name.size() == 68 ? name.substr(0, 64) : std::string();
      if (!is_sha256_hex(digest) || name.substr(64) != ".zst" || digest.substr(0, 2) != bucket) {
        report.problems.push_back(
            fmt::format("unexpected file objects/{}/{}", bucket, shown_path(name)));
        continue;
      }
      ++report.objects;
      auto found = users.find(digest);
      auto checked = check_object_file(objects + "/" + bucket + "/" + name, digest);
      if (!checked) {
        report.problems.push_back(fmt::format(
            "damaged object {}: {}; {}", digest, checked.error(),
            users_text(found != users.end() ? found->second : std::vector<std::string>{})));
      }
      if (found == users.end()) {
        ++report.unreferenced_objects;
      } else {
        users.erase(found);
      }
      if (progress && report.objects % 1000 == 0) {
        progress(fmt::format("checked {} objects", report.objects));
      }
    }
  }
  if (failed) report.problems.push_back(fmt::format("cannot read {}", objects));
  for (const auto& [digest, who] : users) {
    report.problems.push_back(fmt::format("missing object {}; {}", digest, users_text(who)));
  }
  return report;
}

}  // namespace tw::archive
