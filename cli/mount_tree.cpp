// The tree `timewarp mount` shows (mount_tree.hpp).
#include "cli/mount_tree.hpp"

#include <time.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "archive/timefmt.hpp"
#include "common/escape.hpp"
#include "common/paths.hpp"
#include "common/time.hpp"

namespace tw::cli {
namespace ar = tw::archive;
namespace {

using Area = MountNode::Area;

constexpr std::string_view kLatest = "latest";
constexpr std::string_view kAt = "at";
constexpr std::string_view kVersions = "versions";
// What the tree's own folders (the root, at/, a folder known only by name, versions/PATH/ of
// a file) show: readable and searchable by all, owned by root.
constexpr std::uint32_t kFolderMode = S_IFDIR | 0555;

// Local time with the zone's offset to the second ("2026-11-26T10:00:03+0100").
std::string local_second(std::int64_t ns) {
  const time_t seconds = static_cast<time_t>(ns / kNsPerSecond - (ns % kNsPerSecond < 0 ? 1 : 0));
  struct tm local {};
  ::localtime_r(&seconds, &local);
  char text[64];
  const std::size_t n = std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S%z", &local);
  return std::string(text, n);
}

bool is_directory(const std::optional<ar::Version>& v) { return !v || v->is_directory(); }

MountNode make_node(Area area, std::string view = {}, std::optional<std::int64_t> at = {},
                    std::string path = {}, std::optional<ar::Version> version = {}) {
  MountNode n;
  n.area = area;
  n.view = std::move(view);
  n.at_ns = at;
  n.path = std::move(path);
  n.version = std::move(version);
  return n;
}

}  // namespace

std::string version_entry_name(const ar::Version& v) {
  return fmt::format("{}.v{}", local_second(v.archived_at_ns), v.number);
}

std::string instant_name(std::int64_t ns) {
  std::string name = local_second(ns);
  const std::int64_t fraction = ((ns % kNsPerSecond) + kNsPerSecond) % kNsPerSecond;
  if (fraction == 0) return name;
  // The fraction goes before the offset, where parse_time_ns reads it.
  const std::size_t zone = name.size() - 5;
  return fmt::format("{}.{:09}{}", name.substr(0, zone), fraction, name.substr(zone));
}

MountTree::MountTree(ar::Store& store) : store_(store), mounted_ns_(now_ns()) {
  nodes_[kRootIno] = make_node(Area::Root);
  by_key_[key_of(nodes_[kRootIno])] = kRootIno;
}

std::string MountTree::key_of(const Node& n) {
  std::string key(1, static_cast<char>(n.area));
  key += n.view;
  key += '\0';
  key += n.path;
  if (n.area == Area::Entry) {
    key += '\0';
    key += std::to_string(n.version->number);
  }
  return key;
}

Ino MountTree::node(Node n, bool counted) {
  const std::string key = key_of(n);
  auto [at, added] = by_key_.try_emplace(key, next_ino_);
  if (added) ++next_ino_;
  Node& kept = nodes_[at->second];
  const std::uint64_t lookups = kept.lookups;
  kept = std::move(n);  // what was found now (a later version, in latest/)
  kept.lookups = lookups + (counted ? 1 : 0);
  return at->second;
}

void MountTree::forget(Ino ino, std::uint64_t count) {
  const auto it = nodes_.find(ino);
  if (it == nodes_.end() || ino == kRootIno) return;
  it->second.lookups -= std::min(count, it->second.lookups);
  if (it->second.lookups > 0) return;
  by_key_.erase(key_of(it->second));
  nodes_.erase(it);
}

struct stat MountTree::stat_of(Ino ino, const Node& n) const {
  struct stat st {};
  st.st_ino = ino;
  st.st_nlink = 1;
  st.st_blksize = 4096;
  const bool own = n.version && (n.area != Area::Versions || n.version->is_directory());
  const std::int64_t mtime = own ? n.version->mtime_ns : n.at_ns.value_or(mounted_ns_);
  if (own) {
    st.st_mode = n.version->mode;
    st.st_uid = n.version->uid;
    st.st_gid = n.version->gid;
    if (!n.version->is_directory()) st.st_size = static_cast<off_t>(n.version->size);
  } else {
    st.st_mode = kFolderMode;
  }
  if (S_ISDIR(st.st_mode)) st.st_nlink = 2;
  st.st_blocks = (st.st_size + 511) / 512;
  st.st_mtim = ns_timespec(mtime);
  st.st_atim = st.st_mtim;
  st.st_ctim = st.st_mtim;
  return st;
}

Found MountTree::found(Ino ino) const {
  const auto it = nodes_.find(ino);
  if (it == nodes_.end()) return Found{ENOENT};
  return Found{0, ino, stat_of(ino, it->second)};
}

Found MountTree::attributes(Ino ino) const { return found(ino); }

Found MountTree::lookup(Ino parent, const std::string& name) {
  const auto it = nodes_.find(parent);
  if (it == nodes_.end()) return Found{ENOENT};
  const Node dir = it->second;  // a copy: node() may move the map's nodes
  switch (dir.area) {
    case Area::Root:
      if (name == kLatest)
        return found(node(make_node(Area::Tree, std::string(kLatest), {}, "/"), true));
      if (name == kAt) return found(node(make_node(Area::AtList), true));
      if (name == kVersions) return found(node(make_node(Area::Versions, {}, {}, "/"), true));
      return Found{ENOENT};
    case Area::AtList:
      return lookup_at(name);
    case Area::Tree:
      return lookup_tree(dir, name);
    case Area::Versions:
      return lookup_versions(dir, name);
    case Area::Entry:
      return Found{ENOTDIR};
  }
  return Found{ENOENT};
}

Found MountTree::lookup_at(const std::string& name) {
  const auto at = ar::parse_time_ns(name);
  if (!at) {
    spdlog::debug("at/{}: not an instant: {}", shown_path(name), at.error());
    return Found{ENOENT};
  }
  // A moment retention thinned is refused here, for the whole tree at it.
  if (const auto root = store_.version_at("/", *at); !root) {
    spdlog::debug("at/{}: {}", shown_path(name), root.error());
    return Found{ENOENT};
  }
  return found(node(make_node(Area::Tree, fmt::format("{}/{}", kAt, name), *at, "/"), true));
}

bool MountTree::parent_only(const std::string& path) const {
  const auto history = store_.versions(path);
  if (!history || !history->empty()) return false;
  const auto children = store_.children(path);
  return children && !children->empty();
}

Found MountTree::lookup_tree(const Node& dir, const std::string& name) {
  if (!is_directory(dir.version)) return Found{ENOTDIR};
  const std::string path = join_path(dir.path, name);
  const auto version = store_.version_at(path, dir.at_ns);
  if (!version) {
    // A folder whose own retention thinned the moment, or an archive that cannot be read.
    spdlog::debug("{}{}: {}", dir.view, shown_path(path), version.error());
    return Found{version.fault().outcome == Outcome::FailedPermanent ? ENOENT : EIO};
  }
  if (!*version && !parent_only(path)) return Found{ENOENT};
  return found(node(make_node(Area::Tree, dir.view, dir.at_ns, path, *version), true));
}

Found MountTree::lookup_versions(const Node& dir, const std::string& name) {
  if (const auto v = name.rfind(".v"); v != std::string::npos) {
    std::uint64_t number = 0;
    const char* end = name.data() + name.size();
    if (std::from_chars(name.data() + v + 2, end, number).ptr == end) {
      const auto history = store_.versions(dir.path);
      if (!history) return Found{EIO};
      for (const auto& version : *history) {
        if (version.number == number && version.exists() && !version.is_directory() &&
            version_entry_name(version) == name) {
          return found(node(make_node(Area::Entry, {}, {}, dir.path, version), true));
        }
      }
    }
  }
  const std::string path = join_path(dir.path, name);
  const auto history = store_.versions(path);
  if (!history) return Found{EIO};
  if (history->empty() && !parent_only(path)) return Found{ENOENT};
  std::optional<ar::Version> folder;
  for (const auto& version : *history) {
    if (version.exists() && version.is_directory()) folder = version;
  }
  return found(node(make_node(Area::Versions, {}, {}, path, folder), true));
}

std::unique_ptr<Listing> MountTree::list(Ino ino, int& error) {
  const auto it = nodes_.find(ino);
  if (it == nodes_.end()) {
    error = ENOENT;
    return nullptr;
  }
  const Node dir = it->second;
  auto out = std::make_unique<Listing>();
  for (const char* dot : {".", ".."}) out->entries.push_back({dot, make_node(Area::Root)});
  switch (dir.area) {
    case Area::Root:
      out->entries.push_back(
          {std::string(kLatest), make_node(Area::Tree, std::string(kLatest), {}, "/")});
      out->entries.push_back({std::string(kAt), make_node(Area::AtList)});
      out->entries.push_back({std::string(kVersions), make_node(Area::Versions, {}, {}, "/")});
      error = 0;
      break;
    case Area::AtList:
      error = list_at(*out);
      break;
    case Area::Tree:
      error = is_directory(dir.version) ? list_tree(dir, *out) : ENOTDIR;
      break;
    case Area::Versions:
      error = list_versions(dir, *out);
      break;
    case Area::Entry:
      error = ENOTDIR;
  }
  if (error != 0) return nullptr;
  return out;
}

int MountTree::list_at(Listing& out) {
  const auto kept = store_.kept_moments();
  if (!kept) {
    spdlog::warn("at/: {}", kept.error());
    return EIO;
  }
  std::vector<std::int64_t> moments = kept->archive.instants;
  if (kept->archive.from_ns) moments.push_back(*kept->archive.from_ns);
  for (const std::int64_t at : moments) {
    std::string name = instant_name(at);
    out.entries.push_back({name, make_node(Area::Tree, fmt::format("{}/{}", kAt, name), at, "/")});
  }
  return 0;
}

int MountTree::list_tree(const Node& dir, Listing& out) {
  const auto listed = store_.list_at(dir.path, dir.at_ns);
  const auto children = store_.children(dir.path);
  if (!listed || !children) {
    spdlog::warn("{}{}: {}", dir.view, shown_path(dir.path),
                 listed ? children.error() : listed.error());
    return EIO;
  }
  auto next = listed->begin();
  // Both are sorted by path: what the listing left out is a path that did not exist then,
  // or a folder known only as the parent of archived paths, which is shown.
  for (const auto& child : *children) {
    if (next != listed->end() && next->path == child) {
      out.entries.push_back(
          {base_name(child), make_node(Area::Tree, dir.view, dir.at_ns, child, next->version)});
      ++next;
    } else if (parent_only(child)) {
      out.entries.push_back({base_name(child), make_node(Area::Tree, dir.view, dir.at_ns, child)});
    }
  }
  return 0;
}

int MountTree::list_versions(const Node& dir, Listing& out) {
  const auto children = store_.children(dir.path);
  const auto history = store_.versions(dir.path);
  if (!children || !history) {
    spdlog::warn("versions{}: {}", shown_path(dir.path),
                 children ? history.error() : children.error());
    return EIO;
  }
  for (const auto& child : *children) {
    out.entries.push_back({base_name(child), make_node(Area::Versions, {}, {}, child)});
  }
  for (const auto& v : *history) {
    if (!v.exists() || v.is_directory()) continue;
    out.entries.push_back({version_entry_name(v), make_node(Area::Entry, {}, {}, dir.path, v)});
  }
  return 0;
}

Found MountTree::listed(const Listing::Entry& e, bool counted) {
  if (e.name == "." || e.name == "..") {
    // The kernel takes no inode of these from a listing.
    Found dot{0, 0, {}};
    dot.attr.st_mode = kFolderMode;
    return dot;
  }
  return found(node(e.node, counted));
}

std::string MountTree::link_target(Ino ino, int& error) const {
  const auto it = nodes_.find(ino);
  const bool link = it != nodes_.end() && it->second.area != Area::Versions && it->second.version &&
                    it->second.version->is_symlink();
  error = link ? 0 : EINVAL;
  return link ? it->second.version->link_target : std::string();
}

std::optional<ar::Version> MountTree::file_version(Ino ino, int& error) const {
  const auto it = nodes_.find(ino);
  if (it == nodes_.end()) {
    error = ENOENT;
    return std::nullopt;
  }
  const Node& n = it->second;
  if (n.area == Area::Versions || !n.version || !n.version->is_file()) {
    error = n.version && n.area != Area::Versions && !n.version->is_directory() ? EINVAL : EISDIR;
    return std::nullopt;
  }
  error = 0;
  return n.version;
}

bool MountTree::immutable(Ino ino) const {
  const auto it = nodes_.find(ino);
  return it != nodes_.end() && (it->second.area == Area::Entry || it->second.at_ns.has_value());
}

long MountTree::read(const ar::Version& v, std::uint64_t offset, std::span<char> out) {
  const auto got = store_.read_content(v, offset, out);
  if (!got) {
    spdlog::warn("reading version {} ({} bytes) at {}: {}", v.number, v.size, offset, got.error());
    return -EIO;
  }
  return static_cast<long>(*got);
}

}  // namespace tw::cli
