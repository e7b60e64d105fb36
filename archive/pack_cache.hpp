// Packs read from a pack store (pack_store.hpp) instead of the local disk: restore,
// `versions`, verify and mount from the store alone, or of the packs a local archive gave
// back once they were shipped (ARCHITECTURE.md, "Object store"). The archive's readers look
// a blob up in the catalog, then read its bytes from the pack's file under packs/; with a
// PackFetcher those bytes are first made present there (or, for a pack given back, in the
// fetcher's own folder: GivenBackPacks). PackCache keeps
// them in sparse pack files, fetched by ranged reads a block (kBlock) at a time, and gives
// blocks back (a hole punched where they were) once the cache holds more than its budget,
// those used longest ago first. Every blob read is checked against its id (or the whole
// content against its digest), so a block that went wrong is found, never restored.
// A PackCache is shared by the threads of one process (a mutex: one fetch at a time).
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "archive/expected.hpp"
#include "archive/pack_store.hpp"
#include "common/fd.hpp"
#include "common/mutex.hpp"

namespace tw::archive {

// The bytes a fetch made present stay while its pin is held (it must not outlive the
// fetcher).
using PackPin = std::shared_ptr<void>;

class PackFetcher {
 public:
  virtual ~PackFetcher() = default;
  // Bytes [offset, offset + length) of pack `name` are in its file under packs/ once this
  // returns (as far as the pack goes), until the pin is let go.
  virtual Expected<PackPin> fetch(std::string_view name, std::uint64_t offset,
                                  std::uint64_t length) = 0;
  // The whole pack is.
  virtual Expected<PackPin> fetch_whole(std::string_view name) = 0;
  // Where what was fetched is read: none when in the archive's own packs/ (an archive read
  // from the store: every read fetches); else a folder of its own, and only the packs the
  // archive gave back are fetched (GivenBackPacks).
  virtual const std::string* given_back_dir() const { return nullptr; }
};

// False when the bytes at `offset` of the open pack file `fd` were given back once the pack
// was shipped (the file keeps its size; its blocks are a hole: FORMAT.md, "Giving packs
// back"). True on a filesystem without holes, and at or past the file's end.
bool held_locally(int fd, std::uint64_t offset);

// Why pack `name`, given back once shipped, cannot be read without the store's keys.
std::string given_back_alone(std::string_view name);

class PackCache final : public PackFetcher {
 public:
  // Ranged reads of 4 MiB: 1 to 4 pack records of a large file's chunks, 16 to a pack.
  static constexpr std::uint64_t kBlock = 4 << 20;
  // Pack files go under `packs_dir` (<dir>/<first two digits>/<name>.pack, as an archive's),
  // read from `store`; at most `budget` bytes of them are kept, beyond the blocks of the one
  // fetch being made (the configuration asks for 64 MiB at least: what the readers of a
  // process locate ahead of their reads stays while they read it).
  PackCache(std::string packs_dir, std::unique_ptr<PackStore> store, std::uint64_t budget);
  Expected<PackPin> fetch(std::string_view name, std::uint64_t offset,
                          std::uint64_t length) override;
  Expected<PackPin> fetch_whole(std::string_view name) override;

 private:
  struct Pack {
    UniqueFd fd;
    std::uint64_t size = 0;  // as stored
    std::vector<bool> have;  // per block
  };
  using BlockKey = std::pair<std::string, std::uint64_t>;
  Expected<Pack*> pack(std::string_view name) REQUIRES(mutex_);
  // Blocks [first, end) of pack `name` fetched where missing, pinned, then the budget kept.
  Expected<PackPin> fetch_blocks(const std::string& name, Pack& pack, std::uint64_t first,
                                 std::uint64_t end) REQUIRES(mutex_);
  void touch(const std::string& name, std::uint64_t block) REQUIRES(mutex_);
  void unpin(const std::string& name, std::uint64_t first, std::uint64_t end);
  // Gives back the blocks used longest ago, no pin holding them, until at most the budget
  // is held.
  void evict() REQUIRES(mutex_);

  const std::string packs_dir_;
  const std::uint64_t budget_;
  mutable Mutex mutex_;
  std::unique_ptr<PackStore> store_ GUARDED_BY(mutex_);
  std::map<std::string, Pack, std::less<>> packs_ GUARDED_BY(mutex_);
  std::list<BlockKey> used_ GUARDED_BY(mutex_);  // most recently used first
  std::map<BlockKey, std::list<BlockKey>::iterator> where_ GUARDED_BY(mutex_);
  std::map<BlockKey, int> pins_ GUARDED_BY(mutex_);
  std::uint64_t held_ GUARDED_BY(mutex_) = 0;
};

// The packs a local archive gave back to its store (local_packs_size): fetched into
// `<run_dir>/packs` through a PackCache of `budget` bytes, made (with the store `open`
// returns) at the first read of a pack given back, so that an archive with none needs no
// store. The folder is removed with it. Safe from several threads, as PackCache.
class GivenBackPacks final : public PackFetcher {
 public:
  using OpenStore = std::function<Expected<std::unique_ptr<PackStore>>()>;
  GivenBackPacks(std::string run_dir, OpenStore open, std::uint64_t budget);
  GivenBackPacks(const GivenBackPacks&) = delete;
  GivenBackPacks& operator=(const GivenBackPacks&) = delete;
  ~GivenBackPacks() override;
  Expected<PackPin> fetch(std::string_view name, std::uint64_t offset,
                          std::uint64_t length) override;
  Expected<PackPin> fetch_whole(std::string_view name) override;
  const std::string* given_back_dir() const override { return &packs_dir_; }

 private:
  Expected<PackCache*> cache();

  const std::string run_dir_;
  const std::string packs_dir_;
  const OpenStore open_;
  const std::uint64_t budget_;
  Mutex mutex_;
  std::unique_ptr<PackCache> cache_ GUARDED_BY(mutex_);
};

}  // namespace tw::archive
