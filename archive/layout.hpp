// The seam between the archive's generic algorithms and its on-disk layouts (FORMAT.md):
// the requests (reconcile.cpp), restore, verify and the facade (store.hpp) are written once
// against these interfaces; format 2 (format2/layout.hpp) is the layout every new version
// is written in, format 1 (format1/layout.hpp) one that is only read. Store::open
// (open.cpp) is the one place that looks at an archive's FORMAT file and picks its layout.
// Internal to the archive library. A layout belongs to one thread at a time.
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "archive/expected.hpp"
#include "archive/pack_store.hpp"
#include "archive/retention.hpp"
#include "archive/types.hpp"
#include "common/protocol.hpp"

namespace tw::archive {

// A path's lock, held until this object goes (or until its group is committed, for a
// layout that commits in groups). Two requests for one path never interleave their look at
// the disk and their commit (FORMAT.md, "Operations").
class PathLock {
 public:
  PathLock() = default;
  explicit PathLock(std::function<void()> release) : release_(std::move(release)) {}
  PathLock(PathLock&& other) noexcept : release_(std::exchange(other.release_, nullptr)) {}
  PathLock& operator=(PathLock&&) = delete;
  PathLock(const PathLock&) = delete;
  ~PathLock() {
    if (release_) release_();
  }

 private:
  std::function<void()> release_;
};

// A file's content as stored: its digest, the bytes read, the archive bytes newly written,
// and the content ids a version names (format 2: its blobs, in order).
struct StoredContent {
  std::string sha256;
  std::uint64_t size = 0;
  std::uint64_t bytes_added = 0;
  std::vector<std::string> chunks;
};

// What a layout finds beneath a directory but cannot give as a path (damage), for a restore
// of the directory to name: none of it is restored.
struct Unplaced {
  // Archived entries beneath it that the layout knows of but no walk of its tree reaches.
  std::uint64_t unreachable = 0;
  // The rest, one line each (escaped), in the layout's own words: entries whose name cannot
  // be a file's, parts of the tree whose place in it is lost.
  std::vector<std::string> named;
};

// What a layout keeps of contents read at random (Layout::read_content), at most.
inline constexpr std::uint64_t kReadCacheBytes = 64 << 20;

// The versions that use each piece of stored content, gathered by verify's walk of every
// history: per content id, the versions naming it, kept as (path, number) and put into
// words ("used by a v1, b v2") only for a problem's message. (Formatting "path vN" for
// every use, as verify once did, was most of its walk's time on a tree of many files.)
// The uses are appended as the walk finds them, a digest kept as its 32 bytes, and sorted
// by id once, when first looked up (with a hash map of hex ids, verify of a 500,000-file
// tree's archive peaked at 406 MB, 350 MB so). Not for several threads.
class ContentUsers {
 public:
  // The uses added next are versions of `path` (kept once, however many it has).
  void begin_path(std::string path);
  // Version `number` of the current path names content `id`.
  void add(const std::string& id, std::uint64_t number);
  // "used by a v1, b v2 and 3 more" ("used by no version" for an id nobody uses).
  std::string text(const std::string& id) const;
  // Lets go of the uses of `id`: whether it had any.
  bool erase(const std::string& id);
  // The ids still held (those named but never found in storage), sorted.
  std::vector<std::string> ids() const;

 private:
  // An id: a digest's 32 bytes, or, for an id that is not a digest's hex form (a damaged
  // history may name one), its place in odd_ plus one in `odd`.
  struct Key {
    std::array<unsigned char, 32> bytes{};
    std::uint32_t odd = 0;
    auto operator<=>(const Key&) const = default;
  };
  struct Use {
    Key key;
    std::uint32_t path = 0;  // in paths_
    bool erased = false;
    std::uint64_t number = 0;
  };
  // The key of `id`; nullopt for an odd id never added.
  std::optional<Key> key_of(const std::string& id) const;
  // The uses of `key`, in the order they were added (erased ones too).
  std::span<Use> uses_of(const Key& key) const;

  std::vector<std::string> paths_;
  std::vector<std::string> odd_;
  std::unordered_map<std::string, std::uint32_t> odd_at_;  // id -> place in odd_ plus one
  mutable std::vector<Use> uses_;                          // sorted by key up to sorted_
  mutable std::size_t sorted_ = 0;
};

// What every layout can do: read histories and the tree of archived paths, write a version's
// content back out, and check its own storage. What fails to read the archive fails with a
// RETRY fault.
class Layout {
 public:
  virtual ~Layout() = default;

  virtual ArchiveFormat format() const = 0;
  // Another view of the same archive, read only, for another thread to read histories and
  // contents beside this one (a restore's workers); nullptr when there is none to give (what
  // this view holds is not yet where another can read it), and the caller works alone.
  virtual std::unique_ptr<Layout> reader() const = 0;
  // The history of `path`, oldest first; empty when it was never archived.
  virtual Expected<std::vector<Version>> versions(std::string_view path) = 0;
  // The histories of `paths`, in order, as versions() gives each (or why it could not be
  // read), to `each`, which returns false to stop. A layout that can reads them all from one
  // snapshot, so that a restore sees the tree as one moment left it; this one reads each
  // path in turn.
  using EachHistory = std::function<bool(std::size_t, Expected<std::vector<Version>>)>;
  virtual Done each_history(const std::vector<std::string>& paths, const EachHistory& each) {
    for (std::size_t i = 0; i < paths.size(); ++i) {
      if (!each(i, versions(paths[i]))) break;
    }
    return Ok{};
  }
  // The archived paths directly beneath `dir` (with those known only as parents), sorted.
  virtual Expected<std::vector<std::string>> children(std::string_view dir) = 0;
  // `dir` and every archived path beneath it, sorted (empty when `dir` is unknown).
  // `unplaced` (optional) gets what the layout finds beneath `dir` but cannot give as a
  // path (damage): a restore names it.
  virtual Expected<std::vector<std::string>> paths_within(std::string_view dir,
                                                          Unplaced* unplaced = nullptr) = 0;
  // Every path with a history, sorted (verify).
  virtual Expected<std::vector<std::string>> archived_paths() = 0;
  // Writes (or with fd -1 only checks) the content of file version `v`; the bytes written.
  virtual Expected<std::uint64_t> extract(const Version& v, int fd, bool sparse) = 0;
  // Copies the content of file version `v` from byte `offset` into `out`, as much as fits:
  // the bytes copied, fewer only where the content ends (0 at or past its end). Every piece
  // read is checked as extract checks it; the last pieces read are kept, decompressed, in a
  // cache of at most kReadCacheBytes, so that a file read in small pieces from start to end
  // (a mounted archive's reads) reads and decompresses each piece once.
  virtual Expected<std::size_t> read_content(const Version& v, std::uint64_t offset,
                                             std::span<char> out) = 0;
  // The content ids file version `v` names, as verify counts their users.
  virtual std::vector<std::string> content_ids(const Version& v) const = 0;
  // Verify's part that is the layout's own: every piece of stored content read back and
  // checked (`users` says who uses each; what no storage holds is named missing), the
  // layout's own structure checked. Adds to `report`.
  virtual void verify_storage(ContentUsers users, VerifyReport& report,
                              const std::function<void(std::string_view)>& progress) = 0;
  // Verify is about to walk every history: a layout may begin reading its storage back
  // meanwhile, for verify_storage to finish.
  virtual void begin_verify_storage() {}
  // The moments whose state the archive still holds whole, scope by scope (FORMAT.md,
  // "Retention"): every one (no from_ns) until a forget first thins it.
  virtual Expected<KeptScopes> kept_moments() = 0;
  // How many versions of `path` retention removed (the gaps in its numbers, verify).
  virtual Expected<std::uint64_t> forgotten(std::string_view path) = 0;
  // The pinned version numbers of `path` (retention never removes them).
  virtual Expected<std::set<std::uint64_t>> pinned(std::string_view path) = 0;
  // The last collection that finished, if any.
  virtual Expected<std::optional<CollectReport>> last_collection() = 0;
  // What the archive's files take and what its versions use, as of one snapshot; the
  // versions `left_out` names (paths and numbers; `latest` is not read) counted as gone, to
  // tell what removing them frees (Store::space).
  virtual Expected<SpaceReport> space(const std::vector<DroppedVersions>& left_out) = 0;
  // What pack store `store` (PackStore::where) does not hold yet (Store::ship_backlog); a
  // layout that is never shipped refuses.
  virtual Expected<ShipBacklog> ship_backlog(const std::string& /*store*/) {
    return permanent("an archive of this format is not shipped to a pack store");
  }
};

// What the layout that takes new versions can do besides: the requests' steps, and group
// commit (FORMAT.md, "Group commit and durability").
class WritableLayout : public Layout {
 public:
  // The latest version of `path` (staged ones included), if any.
  virtual Expected<std::optional<Version>> latest(std::string_view path) = 0;
  // Whether anything is archived (or staged) beneath `path`.
  virtual Expected<bool> has_children(std::string_view path) = 0;
  // Both at once, from one read of the catalog (a request's first look at each path).
  virtual Expected<PathState> path_state(std::string_view path) = 0;
  // Whether `v`'s content is in the archive, so that a new version may name it unread.
  virtual bool content_available(const Version& v) const = 0;
  // Reads `fd` (of `size` bytes; another length is a change) into the archive, cut where
  // `prior` (an earlier version of the file, optional) was cut while the bytes agree.
  virtual Expected<StoredContent> store_content(int fd, std::uint64_t size,
                                                const std::string& shown, const Version* prior) = 0;
  // Commits `v` as the newest version of `path` (durable before it returns, or with its
  // group). Returns the catalog bytes it adds.
  virtual Expected<std::uint64_t> commit(const std::string& path, const Version& v) = 0;
  // Locks `path` (waiting for another holder).
  virtual Expected<PathLock> lock(std::string_view path) = 0;
  // Orders locks: two paths are always locked in the order of their ranks.
  virtual std::string lock_rank(std::string_view path) const = 0;

  // Group commit, as Store's methods of the same names say.
  virtual void begin_group() = 0;
  virtual void close_group(std::function<void(const Done&)> on_durable) = 0;
  virtual void advance() = 0;
  virtual int group_fd() const = 0;
  virtual bool syncing() const = 0;
  virtual Done flush() = 0;
  virtual std::size_t staged_versions() const = 0;
  virtual std::uint64_t staged_bytes() const = 0;
  virtual Expected<bool> fold_journal() = 0;

  // Retention (forget.hpp; FORMAT.md, "Retention"). Records what the archive keeps from
  // now on; removes versions in one transaction: a pinned one stays, and the one that was
  // latest stays unless it is still the latest and the whole history goes.
  virtual Expected<KeptScopes> record_kept(const KeptScopes& kept) = 0;
  virtual Done drop_versions(const std::vector<DroppedVersions>& dropped) = 0;
  // Removes every version of `path` and beneath, and marks what they named to be shredded
  // by the next collection; with `dry_run`, only counts.
  virtual Expected<PurgeReport> purge(std::string_view path, bool dry_run) = 0;
  // Pins (or unpins) version `number` of `path`.
  virtual Done set_pin(std::string_view path, std::uint64_t number, bool pinned) = 0;
  // Frees what no version names (FORMAT.md, "Collection"), beside running writers.
  virtual Expected<CollectReport> collect(const CollectOptions& options) = 0;
  // Copies the sealed packs to `store` and removes the dropped ones, then gives packs back
  // down to `keep_local` bytes (Store::ship).
  virtual Done ship(PackStore& store, ShipReport& report, std::uint64_t keep_local) = 0;
};

}  // namespace tw::archive
