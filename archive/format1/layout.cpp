// Format 1's layout, read only (archive/format1/layout.hpp).
#include "archive/format1/layout.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <deque>
#include <limits>
#include <set>

#include <fmt/format.h>

#include "archive/disk.hpp"
#include "archive/format1/history.hpp"
#include "archive/format1/objects.hpp"
#include "archive/paths.hpp"
#include "archive/sha256.hpp"
#include "archive/verify.hpp"
#include "common/escape.hpp"
#include "common/paths.hpp"

namespace tw::archive {
namespace {

// The suffix of a child marker whose node was being named when the writer stopped.
constexpr std::string_view kPendingSuffix = ".pending";
// The start of a history file, up to its path.
constexpr std::string_view kPathLine = "timewarp-history 1\npath\t";
constexpr std::size_t kHeadLimit = 64 * 1024;

// A marker's key, and whether it is pending; nullopt when the name is no marker.
std::optional<std::pair<std::string, bool>> parse_marker(std::string name) {
  const bool pending = name.size() > kPendingSuffix.size() && name.ends_with(kPendingSuffix);
  if (pending) name.resize(name.size() - kPendingSuffix.size());
  if (!is_sha256_hex(name)) return std::nullopt;
  return std::make_pair(std::move(name), pending);
}

// The path on a history's path line: only its first lines are read (verify checks the rest).
std::optional<std::string> history_path(const std::string& file) {
  UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return std::nullopt;
  std::string head;
  char buffer[16 * 1024];
  while (head.size() < kHeadLimit) {
    const long n = read_some(fd.get(), buffer, sizeof buffer);
    if (n <= 0) break;
    head.append(buffer, static_cast<std::size_t>(n));
    if (head.find('\n', kPathLine.size()) != std::string::npos) break;
  }
  const auto end = head.find('\n', kPathLine.size());
  if (!head.starts_with(kPathLine) || end == std::string::npos) return std::nullopt;
  auto path =
      unescape_bytes(std::string_view(head).substr(kPathLine.size(), end - kPathLine.size()));
  if (!path || path->empty() || (*path)[0] != '/') return std::nullopt;
  return path;
}

}  // namespace

Format1Layout::Format1Layout(std::string root, std::function<bool()> cancelled)
    : root_(std::move(root)), cancelled_(std::move(cancelled)) {}

bool Format1Layout::is_bucket(const std::string& name) {
  return name.size() == 2 && is_sha256_hex(name + std::string(62, '0'));
}

std::string Format1Layout::node_base(std::string_view key) const {
  return fmt::format("{}/nodes/{}/{}", root_, key.substr(0, 2), key);
}

std::optional<std::string> Format1Layout::path_of_key(std::string_view key) const {
  const std::string base = node_base(key);
  std::optional<std::string> path;
  if (auto named = read_small_file(base + ".path", PATH_MAX * 4); named) {
    path = std::move(named.value());
  } else {
    path = history_path(base + ".history");
  }
  if (!path || sha256_hex(*path) != key) return std::nullopt;
  return path;
}

// Reads of a format-1 archive fail with RETRY faults (the archive cannot be read), each
// naming the file.

Expected<std::vector<Version>> Format1Layout::versions(std::string_view path) {
  const std::string file = node_base(sha256_hex(path)) + ".history";
  if (!path_exists(file)) return std::vector<Version>{};  // never archived
  TRY_ASSIGN(const std::string text,
             read_small_file(file, std::numeric_limits<std::size_t>::max()));
  auto history = parse_history(text);
  if (!history) return in_context(fmt::format("damaged history {}", file), history.fault());
  if (history->path != path) {
    return retry(fmt::format("damaged history {}: it is for {}, not {}", file,
                             shown_path(history->path), shown_path(path)));
  }
  return std::move(history->versions);
}

Expected<std::vector<std::string>> Format1Layout::child_paths(std::string_view path,
                                                              std::uint64_t* unnamed) {
  const std::string dir = node_base(sha256_hex(path)) + ".children";
  bool failed = false;
  const auto names = list_dir(dir, &failed);
  if (failed) return retry(fmt::format("cannot list {}", dir));
  std::vector<std::string> children;
  for (const auto& name : names) {
    auto marker = parse_marker(name);
    if (!marker) continue;
    auto child = path_of_key(marker->first);
    // A pending marker whose node has no name yet was left by an interrupted first
    // archiving; a finished one means the node's name was lost. A child always lies
    // directly beneath its parent; anything else is damage.
    if (!child) {
      if (!marker->second && unnamed != nullptr) ++*unnamed;
      continue;
    }
    if (parent_path(*child) == path && *child != path) children.push_back(std::move(*child));
  }
  return sorted_once(std::move(children));
}

Expected<std::vector<std::string>> Format1Layout::children(std::string_view dir) {
  return child_paths(dir, nullptr);
}

Expected<std::vector<std::string>> Format1Layout::paths_within(std::string_view dir,
                                                               Unplaced* unplaced) {
  std::uint64_t unnamed = 0;
  std::vector<std::string> paths;
  if (path_of_key(sha256_hex(dir))) {
    std::deque<std::string> pending{std::string(dir)};
    while (!pending.empty()) {
      std::string path = std::move(pending.front());
      pending.pop_front();
      TRY_ASSIGN(auto children, child_paths(path, &unnamed));
      for (auto& child : children) pending.push_back(std::move(child));
      paths.push_back(std::move(path));
    }
  }
  std::sort(paths.begin(), paths.end());
  if (unplaced != nullptr) {
    // Named nodes beneath `dir` that no marker walk reaches (a lost marker or a lost
    // directory node between them) cannot be restored either.
    nodes_.reset();  // scanned anew: what a restore names is what is there now
    const std::set<std::string> reached(paths.begin(), paths.end());
    for (const auto& [key, node] : nodes()) {
      if (node.path && path_within(*node.path, dir) && reached.count(*node.path) == 0) ++unnamed;
    }
    unplaced->unreachable = unnamed;
  }
  return paths;
}

Expected<std::vector<std::string>> Format1Layout::archived_paths() {
  nodes_.reset();  // verify starts here: it checks the archive as it is now
  std::vector<std::string> paths;
  for (const auto& [key, node] : nodes()) {
    if (node.path && node.has_history) paths.push_back(*node.path);
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

Expected<std::uint64_t> Format1Layout::extract(const Version& v, int fd, bool sparse) {
  return extract_object(root_, v.sha256, fd, sparse, cancelled_);
}

Expected<std::size_t> Format1Layout::read_content(const Version& v, std::uint64_t offset,
                                                  std::span<char> out) {
  if (offset >= v.size || out.empty()) return std::size_t{0};
  auto it = std::find_if(extracted_.begin(), extracted_.end(),
                         [&](const Extracted& e) { return e.sha256 == v.sha256; });
  if (it != extracted_.end()) {
    extracted_.splice(extracted_.begin(), extracted_, it);
  } else {
    UniqueFd fd(::memfd_create("timewarp-content", MFD_CLOEXEC));
    if (!fd) return errno_fault(errno, Side::Archive, "making a memory file for a content");
    TRY_ASSIGN(const std::uint64_t size, extract(v, fd.get(), true));
    extracted_.push_front(Extracted{v.sha256, std::move(fd), size});
    std::uint64_t kept = 0;
    for (auto e = extracted_.begin(); e != extracted_.end();) {
      kept += e->size;
      e = e == extracted_.begin() || kept <= kReadCacheBytes ? std::next(e) : extracted_.erase(e);
    }
  }
  // A memory file gives all that is asked within its size in one read.
  const std::size_t want = std::min<std::uint64_t>(out.size(), v.size - offset);
  ssize_t got = 0;
  do {
    got = ::pread(extracted_.front().fd.get(), out.data(), want, static_cast<off_t>(offset));
  } while (got < 0 && errno == EINTR);
  if (got < 0) return errno_fault(errno, Side::Archive, "reading a content's memory file");
  return static_cast<std::size_t>(got);
}

std::vector<std::string> Format1Layout::content_ids(const Version& v) const {
  if (v.sha256.empty()) return {};
  return {v.sha256};
}

// --- The whole-archive scan ------------------------------------------------------------

const std::unordered_map<std::string, Format1Layout::Node>& Format1Layout::nodes() {
  if (nodes_) return *nodes_;
  nodes_.emplace();
  scan_problems_.clear();
  bool failed = false;
  for (const auto& bucket : list_dir(root_ + "/nodes", &failed)) {
    if (!is_bucket(bucket)) {
      scan_problems_.push_back(fmt::format("unexpected entry nodes/{}", shown_path(bucket)));
      continue;
    }
    scan_bucket(bucket);
  }
  if (failed) scan_problems_.push_back(fmt::format("cannot read {}/nodes", root_));
  return *nodes_;
}

void Format1Layout::scan_bucket(const std::string& bucket) {
  const std::string dir = root_ + "/nodes/" + bucket;
  std::map<std::string, std::vector<std::string>> keys;  // key -> suffixes present
  for (const auto& name : list_dir(dir)) {
    const auto dot = name.find('.');
    const std::string key = name.substr(0, dot);
    const std::string suffix = dot == std::string::npos ? std::string() : name.substr(dot);
    if (!is_sha256_hex(key) || key.substr(0, 2) != bucket ||
        (suffix != ".history" && suffix != ".path" && suffix != ".lock" && suffix != ".children")) {
      scan_problems_.push_back(
          fmt::format("unexpected entry nodes/{}/{}", bucket, shown_path(name)));
      continue;
    }
    keys[key].push_back(suffix);
  }
  for (const auto& [key, suffixes] : keys) scan_node(dir + "/" + key, key, suffixes);
}

void Format1Layout::scan_node(const std::string& base, const std::string& key,
                              const std::vector<std::string>& suffixes) {
  const auto has = [&suffixes](const char* s) {
    return std::find(suffixes.begin(), suffixes.end(), s) != suffixes.end();
  };
  Node& node = (*nodes_)[key];
  node.has_history = has(".history");
  if (has(".path")) {
    auto named = read_small_file(base + ".path", PATH_MAX * 4);
    if (!named || sha256_hex(*named) != key) {
      scan_problems_.push_back(fmt::format("damaged node name {}.path", base));
    } else {
      node.path = std::move(named.value());
    }
  }
  if (!node.path && node.has_history) {
    auto named = history_path(base + ".history");
    if (named && sha256_hex(*named) == key) {
      node.path = std::move(*named);
    } else if (named) {
      scan_problems_.push_back(fmt::format("history {}.history is filed under the wrong key ({})",
                                           base, shown_path(*named)));
    }
  }
  if (!has(".children")) return;
  for (const auto& name : list_dir(base + ".children")) {
    auto marker = parse_marker(name);
    if (!marker) {
      scan_problems_.push_back(
          fmt::format("unexpected entry {}.children/{}", base, shown_path(name)));
      continue;
    }
    (marker->second ? node.pending : node.children).push_back(marker->first);
  }
}

// --- Space ----------------------------------------------------------------------------

namespace {

// The files in the buckets of `dir` (objects/ or nodes/; a node's .children folder is not
// one): how many, and their bytes.
struct FileTally {
  std::uint64_t files = 0;
  std::uint64_t bytes = 0;
};
Expected<FileTally> tally_files(const std::string& dir, const std::function<bool()>& cancelled) {
  FileTally tally;
  bool failed = false;
  for (const auto& bucket : list_dir(dir, &failed)) {
    for (const auto& name : list_dir(dir + "/" + bucket)) {
      if (cancelled && cancelled()) return retry("cancelled");
      struct stat st {};
      const std::string file = dir + "/" + bucket + "/" + name;
      if (::lstat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      ++tally.files;
      tally.bytes += static_cast<std::uint64_t>(st.st_size);
    }
  }
  if (failed) return retry(fmt::format("cannot list {}", dir));
  return tally;
}

}  // namespace

Expected<SpaceReport> Format1Layout::space(const std::vector<DroppedVersions>& /*left_out*/) {
  TRY_ASSIGN(const FileTally objects, tally_files(root_ + "/objects", cancelled_));
  TRY_ASSIGN(const FileTally nodes, tally_files(root_ + "/nodes", cancelled_));
  SpaceReport out;
  out.content_files = out.blobs = out.live_blobs = objects.files;  // every object counts as used
  out.content_bytes = out.live_bytes = objects.bytes;
  out.catalog_bytes = nodes.bytes;
  return out;
}

}  // namespace tw::archive
