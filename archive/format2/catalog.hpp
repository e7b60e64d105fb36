// The catalog of archive format 2 (FORMAT.md, "Format 2"): every path's history, the tree
// of archived paths, and where each blob lives, in one SQLite database (catalog.db) in WAL
// mode. A version is one row appended under (path, number), so the cost of one more
// version does not grow with the history; writes are staged in a CatalogBatch and
// committed in one short transaction (group commit), durable once the journal is synced.
// Several processes may read and write one catalog at once. Internal to the archive
// library; one Catalog object belongs to one thread at a time. Beneath it: the SQLite layer
// (sqlite.hpp), the schema and its upgrades (catalog_schema.hpp), the staged writes
// (catalog_batch.hpp), how a version is a row (catalog_rows.hpp) and the ids looked up
// (id_memo.hpp).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "archive/expected.hpp"
#include "archive/format2/catalog_batch.hpp"
#include "archive/format2/pack.hpp"
#include "archive/retention.hpp"
#include "archive/types.hpp"

namespace tw::archive {

// Collection (FORMAT.md, "Collection"): what one mark found, by the blobs' row ids.
struct BlobMarks {
  std::uint64_t blobs = 0;
  std::vector<std::int64_t> remove;     // condemned earlier, named by no version: to remove
  std::vector<std::int64_t> take_back;  // condemned, but named again
  std::vector<std::int64_t> condemn;    // named by no version
};
struct SweptBlobs {
  std::uint64_t condemned = 0;
  std::uint64_t removed = 0;
  std::uint64_t removed_bytes = 0;  // their stored bytes
};
// A pack's use by committed blobs: how many, their stored bytes, and the end of the last
// one's stored bytes (record headers not counted: their size is the pack's).
struct PackUsage {
  std::int64_t id = 0;
  std::string name;
  std::uint64_t blobs = 0;
  std::uint64_t stored = 0;
  std::uint64_t end = 0;
};
struct PackedBlob {
  std::string id;
  BlobRef ref;
};
struct MovedBlob {
  std::string id;
  BlobRef to;
};

// A pack row and what the pack store holds of it (catalog_ship.cpp): a copy of `size`
// bytes, or none confirmed.
struct PackShipping {
  std::int64_t id = 0;
  std::string name;
  std::optional<std::uint64_t> size;
  std::int64_t at_ns = 0;  // when shipped (or begun)
};

// What a catalog snapshot (Catalog::copy_to) needs of the pack store to be read from it
// alone (FORMAT.md, "Shipping"): each pack its blobs are in, as far as they go (the end of
// its last record with a header of this release's size: a pack of an earlier release is no
// longer written to, and shipped whole), and the packs it dropped that the store may hold.
struct SnapshotNeeds {
  std::vector<std::pair<std::string, std::uint64_t>> packs;
  std::vector<std::string> unshipped;
};

// A part of the tree that no path reaches (FORMAT.md, "Verify"), and how much of the
// archive it holds.
struct LostPart {
  enum class Kind {
    BadName,   // a row whose name cannot be a file's (or is text, which no look-up finds)
    LostRow,   // rows whose parent, or versions whose node, names no row: `node` is that id
    NoParent,  // a row with no parent that is not the root
    Loop,      // rows whose parents loop without reaching the root: `node` the least on it
  };
  Kind kind = Kind::LostRow;
  std::int64_t node = 0;
  std::string parent;          // BadName: the path of its parent (raw)
  std::string name;            // BadName, NoParent: its name (raw)
  bool text = false;           // BadName: the name is stored as text, not as bytes
  bool has_rows = false;       // LostRow: rows name it as their parent (else versions only)
  std::uint64_t archived = 0;  // paths with a history at and beneath it
  std::string first;           // the first of them, shown from the part: "<node 12>/sub/y"
};
// The line that names `part`, for a person (escaped).
std::string describe(const LostPart& part);

class Catalog {
 public:
  // Opens (ReadWrite: creates when absent) the catalog file.
  static Expected<Catalog> open(const std::string& file, OpenMode mode);
  Catalog(Catalog&&) noexcept;
  Catalog& operator=(Catalog&&) noexcept;
  ~Catalog();

  // The history of `path`, oldest first (empty when never archived).
  Expected<std::vector<Version>> versions(std::string_view path) const;
  // The histories of `paths`, in order, from one snapshot (one read transaction, not one
  // per path: a restore of 60,000 paths spent most of its first second taking and leaving
  // the journal's read lock): `each` gets each, or why it could not be read, and returns
  // false to stop.
  Done each_history(
      const std::vector<std::string>& paths,
      const std::function<bool(std::size_t, Expected<std::vector<Version>>)>& each) const;
  // Its latest version, if any: one look-up whatever the length of the history.
  Expected<std::optional<Version>> latest(std::string_view path) const;
  // Its latest version and whether any path lies beneath it, in one read transaction (a
  // path never archived costs one look-up: no node, neither).
  Expected<PathState> path_state(std::string_view path) const;

  // --- The tree (catalog_structure.cpp; has_children in catalog.cpp). A row whose name
  // cannot be a file's, and what lies beneath it, is no path: listings leave it out.
  // The paths in the tree directly beneath `dir` (archived or known as parents), sorted.
  Expected<std::vector<std::string>> children(std::string_view dir) const;
  // Whether any path lies beneath `dir` (one index look-up).
  Expected<bool> has_children(std::string_view dir) const;
  // `dir` (when in the tree) and every path beneath it, sorted; `bad` (optional) gets the
  // rows beneath `dir` whose name cannot be a file's.
  Expected<std::vector<std::string>> paths_within(std::string_view dir,
                                                  std::vector<LostPart>* bad = nullptr) const;
  // Every path with a history, sorted (for verify), from one snapshot.
  Expected<std::vector<std::string>> archived_paths() const;
  // Verify's look at the tree: every part of it no path reaches, from one snapshot; `each`
  // gets every version there, with its path shown from its part ("<node 12>/sub/y"). When
  // the catalog is as archived_paths() last saw it, and that walk reached every row and
  // every history's row, no query looks further.
  Expected<std::vector<LostPart>> lost_parts(
      const std::function<void(const std::string&, const Version&)>& each) const;
  // A restore's: the rows (and versions) whose parent (or node) names no row and the
  // parentless rows, found by one scan of the index by parent and one of the versions,
  // without a walk of the tree (a loop of parents is found by a walk of the whole tree:
  // verify's).
  Expected<std::vector<LostPart>> lost_rows() const;

  // Where blob `id` lives, if the catalog knows it.
  Expected<std::optional<BlobRef>> blob(std::string_view id) const;
  // Every blob the catalog names, ordered by pack and offset (for verify).
  Expected<std::vector<std::pair<std::string, BlobRef>>> all_blobs() const;
  // SQLite's own check of the file: empty when sound, else its findings; a RETRY
  // "cancelled" when `cancelled` (optional, polled while it reads) said so.
  Expected<std::string> integrity_problems(const std::function<bool()>& cancelled = {}) const;
  // The schema version of the file (PRAGMA user_version): 2, or 1 when read-only and not
  // yet upgraded.
  int schema_version() const;

  // Folds the journal (WAL) into the catalog file and empties it, when no other process
  // is reading or writing it for `wait` (a quiet archive is then one file, with nothing
  // left to replay). False when another process was busy with it: try again later.
  Expected<bool> fold_journal(std::chrono::milliseconds wait);

  // Commits everything in `batch` in one transaction, seen by every reader when it
  // returns, and durable once a sync_journal() begun after it has returned. Fails (RETRY)
  // when a version number is taken already: nothing of the batch is committed.
  Done commit(const CatalogBatch& batch);
  // Makes every commit made so far, by any process, durable: an fdatasync of the journal
  // (a commit is a run of frames appended to it, valid only whole). Safe from another
  // thread than the one using the catalog; nothing to do when read-only.
  Done sync_journal() const;

  // --- Retention (catalog_retention.cpp; FORMAT.md, "Retention"). A catalog read before a
  // writer upgraded it to schema 4 was never thinned and has no pins.
  // The moments whose state the archive holds whole, scope by scope (the folders' own
  // from schema 5 on).
  Expected<KeptScopes> kept_moments() const;
  // Records that the archive keeps `kept` and what it kept before, no more: returns that.
  Expected<KeptScopes> record_kept(const KeptScopes& kept);
  // How many versions of `path` retention removed; its pinned version numbers.
  Expected<std::uint64_t> forgotten(std::string_view path) const;
  Expected<std::set<std::uint64_t>> pinned(std::string_view path) const;
  Done set_pin(std::string_view path, std::uint64_t number, bool pin);
  // Removes versions in one transaction (WritableLayout::drop_versions).
  Done drop_versions(const std::vector<DroppedVersions>& dropped);
  // Removes every version of `path` and of every path beneath it, pinned ones and the
  // latest included; condemns the blobs they named and marks their packs to be rewritten
  // (WritableLayout::purge). With `dry_run`, only counts.
  Expected<PurgeReport> purge(std::string_view path, bool dry_run);

  // --- Collection (catalog_collect.cpp; FORMAT.md, "Collection").
  // Adds a collection to the log: its number.
  Expected<std::int64_t> begin_collection(std::int64_t now_ns);
  // The blobs versions name, from one snapshot, and what to do with each blob.
  Expected<BlobMarks> mark(const std::function<bool()>& cancelled);
  // Removes, takes back and condemns as `marks` says, each re-checked in short
  // transactions (`collection` is this collection's number).
  Expected<SweptBlobs> apply_marks(const BlobMarks& marks, std::int64_t collection);
  // The packs a purge marked: rewritten whatever their dead share; unmarked once done.
  Expected<std::set<std::int64_t>> shredded_packs();
  Done unshred(std::int64_t pack);
  // Every pack row with its use; the blobs of one, in pack order.
  Expected<std::vector<PackUsage>> pack_usage();
  Expected<std::vector<PackedBlob>> blobs_in_pack(std::int64_t pack);
  // The use of the pack named `name` (nullopt: no row names it).
  Expected<std::optional<PackUsage>> pack_use(const std::string& name);
  // Moves blobs of pack `from` to where they were copied, and drops its row (one
  // transaction); drops the row of a pack no blob lives in.
  Done move_blobs(std::int64_t from, const std::vector<MovedBlob>& moved);
  Done drop_pack(std::int64_t pack);
  // Gives the catalog file's free pages back: the bytes it shrank by.
  Expected<std::uint64_t> vacuum();
  Done finish_collection(const CollectReport& report);
  Expected<std::optional<CollectReport>> last_collection() const;

  // --- Shipping (catalog_ship.cpp; ARCHITECTURE.md, "Object store"). A catalog read
  // before a writer upgraded it to schema 6 has shipped nothing.
  // The store the records below are about (nullopt: none yet).
  Expected<std::optional<std::string>> ship_target() const;
  // Makes `store` the store the records are about: when it was another, they are
  // forgotten first (nothing is in the new store yet, and the old one is no longer ours).
  Done set_ship_target(const std::string& store);
  // Every pack row, with what the store holds of it, from one snapshot.
  Expected<std::vector<PackShipping>> packs_shipping() const;
  // Records that pack `pack` is being copied (its copy not yet confirmed): false when no
  // row names it any more (collected), and then nothing is to be copied.
  Expected<bool> begin_shipping(std::int64_t pack, std::int64_t now_ns);
  // Records that the store holds pack `pack` as `size` bytes.
  Done record_shipped(std::int64_t pack, std::uint64_t size, std::int64_t now_ns);
  // The packs dropped here that may be in the store, to remove from it; and one removed.
  Expected<std::vector<std::string>> unshipped() const;
  Done forget_unshipped(const std::string& name);
  // Writes the catalog as one commit left it to the new file `file` (SQLite's online backup,
  // in one read), in rollback-journal mode: a file readable alone, anywhere.
  Done copy_to(const std::string& file) const;
  // Records that store `store` got a snapshot named `name` at `at_ns`, whose content
  // fingerprint() was `fingerprint`; and what the store got last (nothing: never, or the
  // record is about another store). Kept in a table outside the schema's version
  // (catalog_shipped, made by the first shipper that records one), so an archive an
  // earlier release wrote opens as before.
  struct CatalogShipped {
    std::string name;
    std::int64_t at_ns = 0;
    std::string fingerprint;
  };
  Done record_catalog_shipped(const std::string& store, const CatalogShipped& shipped);
  Expected<std::optional<CatalogShipped>> catalog_shipped(const std::string& store) const;
  // What changes whenever what a restore from this catalog gives back can change: the
  // versions (the newest one's time and their count), the tree's nodes, the pins, the
  // retention's kept moments, the blobs and the packs. Equal fingerprints: a snapshot would
  // restore the same.
  Expected<std::string> fingerprint() const;
  // What this catalog (a snapshot) needs of the store.
  Expected<SnapshotNeeds> snapshot_needs() const;

  // --- Space (catalog_space.cpp). The blobs and those versions name, from one snapshot;
  // the versions `left_out` names counted as gone: the blobs only they name are `freed`.
  // Fills the blob figures of `out`. Needs schema 4 (blob row ids): an older catalog, read
  // before a writer upgraded it, is refused.
  Done space(const std::vector<DroppedVersions>& left_out, const std::function<bool()>& cancelled,
             SpaceReport& out) const;

 private:
  struct Impl;
  explicit Catalog(std::unique_ptr<Impl> impl);
  Expected<std::vector<LostPart>> lost(
      bool whole, const std::function<void(const std::string&, const Version&)>* each) const;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tw::archive
