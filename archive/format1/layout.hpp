// Format 1, the layout of the first releases (FORMAT.md, "Appendix: format 1"), read only:
// one node per archived path under <root>/nodes/<kk>/<key> (key: the SHA-256 of the raw
// path) with its history file (history.hpp) or, for a path known only as a parent, a .path
// file; each node's children as markers in its .children folder; contents as objects
// (objects.hpp). `timewarp upgrade-archive` copies such an archive into format 2. Internal
// to the archive library; one Format1Layout belongs to one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "archive/layout.hpp"
#include "common/fd.hpp"

namespace tw::archive {

class Format1Layout final : public Layout {
 public:
  Format1Layout(std::string root, std::function<bool()> cancelled);

  ArchiveFormat format() const override { return ArchiveFormat::V1; }
  std::unique_ptr<Layout> reader() const override {
    return std::make_unique<Format1Layout>(root_, cancelled_);
  }
  // Grouped by where format 1 keeps what they read.
  // A path's history: the history file of its node (the key is the path's SHA-256).
  Expected<std::vector<Version>> versions(std::string_view path) override;
  // Every path with a history: only a scan of every node under nodes/ finds them all.
  Expected<std::vector<std::string>> archived_paths() override;
  // The tree: a walk of the nodes' .children markers, each naming a child's node, whose
  // .path file or history names its path.
  Expected<std::vector<std::string>> children(std::string_view dir) override;
  Expected<std::vector<std::string>> paths_within(std::string_view dir,
                                                  Unplaced* unplaced) override;
  // Contents: one object per SHA-256 under objects/ (objects.hpp), so a version names one
  // content id, its digest, and none when it has no content.
  Expected<std::uint64_t> extract(const Version& v, int fd, bool sparse) override;
  // An object is one zstd frame, only read from its start: a content read at random is
  // extracted whole, once, into a memory file (holes kept), and read from there. The last
  // ones stay while they take no more than kReadCacheBytes (the one read last always).
  Expected<std::size_t> read_content(const Version& v, std::uint64_t offset,
                                     std::span<char> out) override;
  std::vector<std::string> content_ids(const Version& v) const override;
  // The tree the nodes make, then every object read back (verify.cpp).
  void verify_storage(ContentUsers users, VerifyReport& report,
                      const std::function<void(std::string_view)>& progress) override;
  // Format 1 is never thinned (no release removed versions from it) and has no pins.
  Expected<KeptScopes> kept_moments() override { return KeptScopes{}; }
  Expected<std::uint64_t> forgotten(std::string_view) override { return std::uint64_t{0}; }
  Expected<std::set<std::uint64_t>> pinned(std::string_view) override {
    return std::set<std::uint64_t>{};
  }
  Expected<std::optional<CollectReport>> last_collection() override {
    return std::optional<CollectReport>{};
  }
  // The objects and the nodes' files on disk; every object counts as used, and no freed
  // figure is given (nothing is ever removed from a format-1 archive).
  Expected<SpaceReport> space(const std::vector<DroppedVersions>& left_out) override;

 private:
  // A node as the whole-archive scan found it: its name (from its .path file or its
  // history's path line) and the markers in its .children.
  struct Node {
    std::optional<std::string> path;
    bool has_history = false;
    std::vector<std::string> children;  // finished markers (child keys)
    std::vector<std::string> pending;   // markers of a first archiving not finished
  };
  // Every node, scanned at the start of each verify and each restore (nothing writes a
  // format-1 archive any more; damage may change it); what the scan found wrong on the way is
  // in `scan_problems_`.
  const std::unordered_map<std::string, Node>& nodes();
  void scan_bucket(const std::string& bucket);
  void scan_node(const std::string& base, const std::string& key,
                 const std::vector<std::string>& suffixes);
  std::string node_base(std::string_view key) const;
  // Whether `name` is a bucket of nodes/ or objects/ (two hex digits).
  static bool is_bucket(const std::string& name);
  // The path a node stands for, if it has one.
  std::optional<std::string> path_of_key(std::string_view key) const;
  // The named children of `path` by its markers; `unnamed` counts finished markers whose
  // node has no name (damage).
  Expected<std::vector<std::string>> child_paths(std::string_view path, std::uint64_t* unnamed);
  // Verify's checks of the tree the nodes make, and of the objects.
  void verify_tree(VerifyReport& report);
  void verify_objects(ContentUsers& users, VerifyReport& report,
                      const std::function<void(std::string_view)>& progress);

  std::string root_;
  std::function<bool()> cancelled_;
  std::optional<std::unordered_map<std::string, Node>> nodes_;  // key -> node, once scanned
  std::vector<std::string> scan_problems_;
  // Contents extracted for read_content, most recently read first.
  struct Extracted {
    std::string sha256;
    UniqueFd fd;
    std::uint64_t size = 0;
  };
  std::list<Extracted> extracted_;
};

}  // namespace tw::archive
