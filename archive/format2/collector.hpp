// Garbage collection of format 2 (FORMAT.md, "Collection"), run beside archivers that keep
// writing. Blobs no version names go in steps the catalog orders, never by the clock: a
// collection marks what the versions name (a bitmap over the blobs' row ids, from one
// snapshot of the catalog), condemns what no version named, and removes what an earlier
// collection condemned and nothing has named since (a writer that names a condemned blob
// takes it back in its own commit; one that names a blob already removed fails its commit
// and runs again). Then it frees the packs' space: a pack no blob lives in is deleted, one
// mostly dead is rewritten (its live blobs copied to a new pack, their rows moved in one
// transaction), one with a dead tail (a torn append, blobs of an interrupted request) is
// cut back. A pack a writer has open is locked (pack.hpp) and left alone. A kill at any
// instant leaves every step either done or not, and the next collection finishes it.
// Internal to the archive library.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "archive/disk.hpp"
#include "archive/format2/catalog.hpp"
#include "archive/pack_cache.hpp"
#include "archive/types.hpp"

namespace tw::archive {

class Collector {
 public:
  // `root` is the archive's; `catalog` an open writable catalog of it; `given_back` (optional:
  // a GivenBackPacks) reads the packs given back once shipped, to rewrite them.
  Collector(DiskWriter& disk, Catalog& catalog, std::string root,
            PackFetcher* given_back = nullptr);

  // One collection (mark, condemn and remove, then the packs, then the catalog file).
  Expected<CollectReport> run(const CollectOptions& options);

 private:
  struct Pass;
  Done sweep_blobs(Pass& pass);
  Done free_packs(Pass& pass);
  Done free_pack(Pass& pass, const std::string& name, const std::string& file);
  Done rewrite(Pass& pass, int fd, const PackUsage& usage);

  DiskWriter& disk_;
  Catalog& catalog_;
  std::string root_;
  std::string packs_dir_;
  PackFetcher* given_back_;
};

}  // namespace tw::archive
