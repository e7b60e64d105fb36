// File contents in archive format 2 (FORMAT.md, "Format 2"): a file is cut into
// content-defined chunks (chunker.hpp), each chunk stored once as a blob in this writer's
// pack (pack.hpp) and found again through the catalog's blob index (catalog.hpp). Every file
// goes through one pipeline, a window of chunks at a time, in the reader's one buffer (two
// maximal chunks): the window's chunks are cut in place there, hashed, and those new to the
// archive compressed and appended to the pack, in order. A window is one chunk on the
// calling thread; with `threads` > 1, a large file's (kLargeFile) is up to 2 x threads
// chunks, hashed and compressed by `threads` threads while the calling thread hashes the
// whole content. Each such window takes only as many threads as there are cores nothing
// else wants at that moment (threads_for_window): two archivers busy with large files on two
// cores run a thread each, not two each fighting for them. A content is read back the same
// way: a window of blobs read on the threads while the calling thread writes the one before.
// Internal to the archive library. One ChunkStore belongs to one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "archive/disk.hpp"
#include "archive/format2/catalog.hpp"
#include "archive/format2/chunker.hpp"
#include "archive/format2/pack.hpp"
#include "archive/pack_cache.hpp"
#include "archive/sha256.hpp"

namespace tw::archive {

// A file this large is cut, hashed and compressed on several threads (the configuration's
// "large file": CompressionOptions::threads).
inline constexpr std::uint64_t kLargeFile = 4 << 20;

// How many threads work on the next window of a large file: `threads` at most, fewer when
// the runnable threads system-wide (the fourth field of /proc/loadavg, `loadavg`, which
// counts the caller) leave fewer of the `cores` idle; `threads` when `loadavg` cannot be
// read. Never less than 1 (the caller).
std::size_t threads_for_window(std::size_t threads, std::size_t cores, std::string_view loadavg);

// The threads CompressionOptions::threads asks for: 0 is one per online core, at most 4
// (each holds a window's buffers; four keep an archiver's memory bounded).
int resolved_threads(int threads);

struct ChunkedContent {
  std::string sha256;               // of the whole content
  std::uint64_t size = 0;           // bytes read
  std::uint64_t bytes_added = 0;    // pack bytes newly written (headers and frames)
  std::vector<std::string> chunks;  // blob ids, in order
};

// An earlier version of the file being stored (the path's latest, or the one a rename came
// from). The new content is cut where that version's was, piece by piece, as long as the
// bytes there are that piece's, so an append stores the appended bytes, not the last chunk
// again (FORMAT.md, "Appends").
struct PriorContent {
  const std::vector<std::string>& chunks;  // its blob ids, in order
  std::uint64_t size = 0;
};

// The lowest zstd level of a file smaller than the smallest chunk (256 KiB): there the
// per-file work outweighs compression's (10,000 files of 1-8 KiB: 0.01 s more CPU at level
// 3 than at 1), and a few percent of size comes cheap.
inline constexpr int kSmallFileLevel = 3;

class ChunkStore {
 public:
  // `packs_dir` is <root>/packs; `level` the zstd level of new blobs, at least
  // kSmallFileLevel for a file smaller than the smallest chunk.
  // `cancelled` (optional) is polled between chunks: when it returns true, store() stops
  // with FAILED RETRY "cancelled".
  ChunkStore(DiskWriter& disk, std::string packs_dir, Catalog& catalog, int level,
             ChunkSizes sizes = {}, std::function<bool()> cancelled = {}, int threads = 1);
  ChunkStore(const ChunkStore&) = delete;
  ChunkStore& operator=(const ChunkStore&) = delete;

  // Called with each blob that is new to the archive, before it is stored: returns once this
  // writer may store it, true when it had to wait for another writer (an error fails the
  // content). After a wait the catalog is asked again, so a blob that writer committed
  // meanwhile is used, not stored twice.
  void set_claim(std::function<Expected<bool>(const std::string& id)> claim) {
    claim_ = std::move(claim);
  }

  // Reads `fd` to its end in chunks: a chunk neither in the catalog nor in `batch` is
  // compressed, appended to the pack and staged in `batch`. A length other than
  // `expected_size` is a change (RETRY). Nothing is durable before sync() and the
  // catalog's commit of `batch`, in that order. With `prior`, the content is cut where
  // `prior` was cut while the bytes are the same (PriorContent).
  Expected<ChunkedContent> store(int fd, std::uint64_t expected_size, const std::string& shown,
                                 CatalogBatch& batch, const PriorContent* prior = nullptr);
  // Makes every blob appended so far durable (one sync for all of them).
  Done sync() { return pack_.sync(); }
  // The same sync, to run on another thread (PackWriter::take_sync), and what to do when
  // it failed.
  Expected<std::optional<PackSync>> take_sync() { return pack_.take_sync(); }
  void seal() { pack_.seal(); }
  // The packs the writer stopped appending to, still locked (PackWriter::take_retired).
  std::vector<UniqueFd> take_retired_packs() { return pack_.take_retired(); }
  // Reads fetch each blob's bytes through `fetcher` first (StoreHooks::packs_from); with a
  // GivenBackPacks, only those of packs given back.
  void set_fetcher(PackFetcher* fetcher) { fetcher_ = fetcher; }

  // Writes the content made of `chunks` to `out_fd` (-1: only check it), each blob checked
  // against its id and the whole against `sha256`. Blobs are looked up in the catalog,
  // then in `staged` (optional). With `sparse`, runs of zeros become holes. Errors name the
  // blob and what is wrong with it.
  Expected<std::uint64_t> extract(const std::vector<std::string>& chunks, const std::string& sha256,
                                  int out_fd, bool sparse, const CatalogBatch* staged = nullptr);

  // Where blob `id` is, with its pack open (the descriptor stays open for kOpenPacks more
  // look-ups); looked up in `staged` (optional), then in the catalog.
  struct Located {
    int pack_fd = -1;
    BlobRef ref;
    const std::string* id = nullptr;
    PackPin pin;  // what a PackFetcher fetched for it stays until it is read
  };
  Expected<Located> locate(const std::string& id, const CatalogBatch* staged);

 private:
  class PriorCuts;
  struct Pass;
  // A chunk of a window: its bytes (in the reader's buffer), its id, and what is stored for
  // it when it is new.
  struct WindowChunk {
    WindowChunk(std::span<const std::uint8_t> cut, std::uint64_t at, std::size_t prior_piece)
        : bytes(cut), offset(at), piece(prior_piece) {}
    std::span<const std::uint8_t> bytes;
    std::uint64_t offset = 0;  // in the file
    std::size_t piece = 0;     // the prior piece it was cut as, when it was (PriorCuts::kNone)
    std::string id;
    bool fresh = false;       // neither in the catalog, nor staged, nor earlier in the window
    StoredBlob stored;        // its frame (in a compressor, or in `frame`), or `bytes` themselves
    std::vector<char> frame;  // its frame when the compressor was needed again before it
    std::optional<Fault> fault;
  };
  // How the next window of a file is cut and worked on (window_shape()).
  struct WindowShape {
    std::size_t workers = 1;  // threads hashing and compressing it, the caller's among them
    std::size_t chunks = 1;   // at most this many
    std::size_t bytes = 0;    // how far into the window a chunk but the first may begin
    // The buffer it may take from where it begins (at least `bytes` and a maximal chunk):
    // what the reader holds moves to the buffer's start when less is left.
    std::size_t room = 0;
    std::size_t read = 0;  // bytes asked of each read the cuts need
  };
  // Whether blob `id` is known already (staged in `batch` or in the catalog).
  Expected<bool> known(const std::string& id, const CatalogBatch& batch) const;
  // Appends one new blob to the pack and stages it in `batch`.
  Done add_blob(const std::string& id, std::size_t raw, const StoredBlob& stored,
                CatalogBatch& batch, ChunkedContent& out);
  // The pieces of `prior` (none when it is absent, or smaller than the smallest chunk, or a
  // blob of it is not found).
  PriorCuts prior_cuts(const PriorContent* prior, std::uint64_t expected_size,
                       const CatalogBatch& batch) const;
  // The steps of store(), one window at a time, on window_.
  WindowShape window_shape(bool large) const;
  Done cut_window(Pass& pass, const WindowShape& shape);
  void hash_window(Pass& pass, std::size_t workers);
  bool drop_missed(PriorCuts& cuts);
  Done store_window(Pass& pass, std::size_t workers);
  // The blob's bytes (safe on any thread).
  static Expected<BlobBytes> read_located(const Located& at);
  // Pack `name` under `dir` open to read (a few are kept open); with `local`, whether it was
  // given back once shipped (a hole) is looked at as it is opened.
  struct OpenPack {
    std::string file;
    UniqueFd fd;
    bool given_back = false;
  };
  Expected<const OpenPack*> open_pack(const std::string& dir, const std::string& name, bool local);

  std::string packs_dir_;
  Catalog& catalog_;
  std::function<bool()> cancelled_;
  std::function<Expected<bool>(const std::string& id)> claim_;
  Chunker chunker_;
  PackWriter pack_;
  BlobCompressor compressor_;
  BlobCompressor small_compressor_;  // for files smaller than the smallest chunk
  int threads_;
  // The other threads' compressors (the calling thread's is compressor_), made lazily.
  std::vector<std::unique_ptr<BlobCompressor>> thread_compressors_;
  ReadBuffer read_buffer_;  // the chunk reader's, kept between files
  // Kept between windows and files, so that a small file allocates none of them again.
  std::vector<WindowChunk> window_;
  std::vector<WindowChunk*> fresh_;
  Sha256 rewind_;  // the content's hash before the window, to go back to when a piece misses
  std::list<OpenPack> open_packs_;  // most recently used first
  PackFetcher* fetcher_ = nullptr;
};

}  // namespace tw::archive
