// Format 1's part of verify (FORMAT.md, "Appendix: format 1"): the tree the nodes make,
// and every object read back, decompressed and re-hashed.
#include <fmt/format.h>

#include "archive/format1/layout.hpp"
#include "archive/format1/objects.hpp"
#include "archive/sha256.hpp"
#include "archive/verify.hpp"
#include "common/escape.hpp"
#include "common/paths.hpp"

namespace tw::archive {
void Format1Layout::verify_storage(ContentUsers users, VerifyReport& report,
                                   const std::function<void(std::string_view)>& progress) {
  nodes();
  report.problems.insert(report.problems.end(), scan_problems_.begin(), scan_problems_.end());
  verify_tree(report);
  verify_objects(users, report, progress);
}

// Every finished marker names a node, every named node is linked from its parent, and every
// parent has a name. (A pending marker naming nothing was left by an interrupted first
// archiving: harmless.)
void Format1Layout::verify_tree(VerifyReport& report) {
  const auto& tree = nodes();
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
    auto up = tree.find(sha256_hex(parent));
    if (up == tree.end() || !up->second.path) {
      ++lost_parents[parent];
      continue;
    }
    const auto& siblings = up->second;
    const auto listed = [&wanted = key](const std::vector<std::string>& keys) {
      return std::find(keys.begin(), keys.end(), wanted) != keys.end();
    };
    if (!listed(siblings.children) && !listed(siblings.pending)) {
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
}

void Format1Layout::verify_objects(ContentUsers& users, VerifyReport& report,
                                   const std::function<void(std::string_view)>& progress) {
  bool failed = false;
  const std::string objects = root_ + "/objects";
  for (const auto& bucket : list_dir(objects, &failed)) {
    if (!is_bucket(bucket)) {
      report.problems.push_back(fmt::format("unexpected entry objects/{}", shown_path(bucket)));
      continue;
    }
    for (const auto& name : list_dir(objects + "/" + bucket)) {
      if (cancelled_ && cancelled_()) {
        report.problems.push_back("verify cancelled before it finished");
        return;
      }
      const std::string digest = name.size() == 68 ? name.substr(0, 64) : std::string();
      if (!is_sha256_hex(digest) || name.substr(64) != ".zst" || digest.substr(0, 2) != bucket) {
        report.problems.push_back(
            fmt::format("unexpected file objects/{}/{}", bucket, shown_path(name)));
        continue;
      }
      ++report.objects;
      if (auto checked = check_object_file(objects + "/" + bucket + "/" + name, digest); !checked) {
        report.problems.push_back(
            fmt::format("damaged object {}: {}; {}", digest, checked.error(), users.text(digest)));
      }
      if (!users.erase(digest)) ++report.unreferenced_objects;
      if (progress && report.objects % 1000 == 0) {
        progress(fmt::format("checked {} objects", report.objects));
      }
    }
  }
  if (failed) report.problems.push_back(fmt::format("cannot read {}", objects));
  for (const auto& digest : users.ids()) {
    report.problems.push_back(fmt::format("missing object {}; {}", digest, users.text(digest)));
  }
}

}  // namespace tw::archive
