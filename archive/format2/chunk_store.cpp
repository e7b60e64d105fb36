// Format 2's file contents (chunk_store.hpp): one pipeline for files of every size.
#include "archive/format2/chunk_store.hpp"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "archive/format2/ordered_pipeline.hpp"
#include "archive/sha256.hpp"
#include "common/escape.hpp"
#include "common/host.hpp"
#include "common/text.hpp"

namespace tw::archive {

int resolved_threads(int threads) {
  constexpr int kAutomaticThreadsMax = 4;
  if (threads != 0) return threads;
  return std::clamp(static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN)), 1, kAutomaticThreadsMax);
}
namespace {

// Read descriptors of packs kept open between blobs (restore and verify read many blobs of
// few packs in a row).
constexpr std::size_t kOpenPacks = 8;

// A chunk's bytes as the hash and the compressor take them.
std::string_view chars(std::span<const std::uint8_t> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

Fault changed_while_read(const std::string& shown) {
  Fault fault = retry(fmt::format("changed while being read: {}", shown));
  fault.changed = true;
  return fault;
}

// `each(item, worker)` for every item, on `workers` workers numbered from 0 (no more than
// there are items; worker 0 is the calling thread, once it has run `beside`), each taking
// the next item in turn; returns when all are done.
template <typename Item, typename Each, typename Beside>
void for_each_on_workers(std::vector<Item>& items, std::size_t workers, Each each, Beside beside) {
  std::atomic<std::size_t> next{0};
  const auto work = [&](std::size_t worker) {
    for (std::size_t i = next++; i < items.size(); i = next++) each(items[i], worker);
  };
  std::vector<std::jthread> threads;  // joined when this returns
  for (std::size_t w = 1; w < std::min(workers, items.size()); ++w) threads.emplace_back(work, w);
  beside();
  work(0);
}

// The threads the next window may take now (threads_for_window, with what this process may
// run on and what runs now).
std::size_t threads_now(std::size_t threads) {
  if (threads <= 1) return threads;
  static const std::size_t cores = usable_cores();
  char text[128];
  UniqueFd fd(::open("/proc/loadavg", O_RDONLY | O_CLOEXEC));
  const ssize_t n = fd ? ::read(fd.get(), text, sizeof text - 1) : -1;
  return threads_for_window(threads, cores,
                            n > 0 ? std::string_view(text, static_cast<std::size_t>(n)) : "");
}

}  // namespace

std::size_t threads_for_window(std::size_t threads, std::size_t cores, std::string_view loadavg) {
  threads = std::max<std::size_t>(1, threads);
  // "0.61 0.55 0.50 2/345 6789": the fourth field, runnable/total.
  std::size_t at = 0;
  for (int field = 0; field < 3 && at != std::string_view::npos; ++field) {
    at = loadavg.find(' ', at);
    if (at != std::string_view::npos) ++at;
  }
  if (at == std::string_view::npos) return threads;
  const auto slash = loadavg.find('/', at);
  const auto running =
      parse_int<std::size_t>(loadavg.substr(at, slash == std::string_view::npos ? 0 : slash - at));
  if (!running || *running == 0) return threads;
  const std::size_t idle = *running >= cores ? 0 : cores - *running;
  return std::min(threads, 1 + idle);
}

// The cuts of a prior version, tried as the new content is cut: where a piece of the prior
// version begins at the offset reached, its length is tried first and taken when the bytes
// there hash to its id. Each piece is tried once; after a miss the chunker cuts until an
// offset where a piece begins again (an edit in place), or to the end (bytes inserted or
// removed). The last piece is not tried when it is shorter than the smallest chunk: it is
// cut again with what follows it, so no chunk but a file's last is under the smallest size,
// and a file grown by many small appends has no more chunks than one cut from scratch.
class ChunkStore::PriorCuts {
 public:
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  struct Piece {
    std::string id;
    std::uint64_t start = 0;
    std::size_t size = 0;
  };

  PriorCuts() = default;
  PriorCuts(std::vector<Piece> pieces, std::size_t min) : pieces_(std::move(pieces)), min_(min) {}

  // The piece to try at `offset` (kNone: cut by content). A piece longer than what is left
  // of the file is tried and misses.
  std::size_t at(std::uint64_t offset) {
    while (next_ < pieces_.size() && pieces_[next_].start < offset) ++next_;
    if (next_ == pieces_.size() || pieces_[next_].start != offset) return kNone;
    if (next_ + 1 == pieces_.size() && pieces_[next_].size < min_) return kNone;
    return next_;
  }
  const Piece& piece(std::size_t i) const { return pieces_[i]; }
  // Piece `i` was tried (taken or not): the next try is past it.
  void tried(std::size_t i) { next_ = i + 1; }

 private:
  std::vector<Piece> pieces_;
  std::size_t min_ = 0;
  std::size_t next_ = 0;  // pieces before it were tried or passed
};

ChunkStore::ChunkStore(DiskWriter& disk, std::string packs_dir, Catalog& catalog, int level,
                       ChunkSizes sizes, std::function<bool()> cancelled, int threads)
    : packs_dir_(std::move(packs_dir)),
      catalog_(catalog),
      cancelled_(std::move(cancelled)),
      chunker_(sizes),
      pack_(disk, packs_dir_),
      compressor_(level, sizes.avg),
      small_compressor_(std::max(level, kSmallFileLevel)),
      threads_(std::max(1, threads)) {}

Expected<bool> ChunkStore::known(const std::string& id, const CatalogBatch& batch) const {
  if (batch.blob(id) != nullptr) return true;
  // A failure to look the blob up is reported in the catalog's own words.
  auto found = catalog_.blob(id);
  if (!found) return retry(unprefixed_message(found.fault()));
  if (found->has_value() || !claim_) return found->has_value();
  auto waited = claim_(id);
  if (!waited) return waited.fault();
  if (!*waited) return false;
  // (a claim that waited has flushed this writer's group: its blobs are in the catalog)
  found = catalog_.blob(id);
  if (!found) return retry(unprefixed_message(found.fault()));
  return found->has_value();
}

Done ChunkStore::add_blob(const std::string& id, std::size_t raw, const StoredBlob& stored,
                          CatalogBatch& batch, ChunkedContent& out) {
  auto ref = pack_.append(id, raw, stored);
  if (!ref) return ref.fault();
  out.bytes_added += kBlobHeaderSize + stored.bytes.size();
  batch.add_blob(id, *ref);
  return Ok{};
}

ChunkStore::PriorCuts ChunkStore::prior_cuts(const PriorContent* prior, std::uint64_t expected_size,
                                             const CatalogBatch& batch) const {
  const ChunkSizes& sizes = chunker_.sizes();
  if (prior == nullptr || prior->size < sizes.min || expected_size < sizes.min) return {};
  std::vector<PriorCuts::Piece> pieces;
  std::uint64_t start = 0;
  for (const auto& id : prior->chunks) {
    std::optional<BlobRef> ref;
    if (const BlobRef* staged = batch.blob(id)) {
      ref = *staged;
    } else if (auto found = catalog_.blob(id); found && *found) {
      ref = std::move(*found);
    }
    // A blob not found, or of a size no chunk has here: cut by content alone.
    if (!ref || ref->raw == 0 || ref->raw > sizes.max) return {};
    pieces.push_back({id, start, static_cast<std::size_t>(ref->raw)});
    start += ref->raw;
  }
  if (start != prior->size) return {};
  return PriorCuts(std::move(pieces), sizes.min);
}

// One file being stored: what store() carries from one window to the next.
struct ChunkStore::Pass {
  Pass(ChunkReader&& reader_of_file, PriorCuts&& prior, CatalogBatch& staged, bool threaded,
       BlobCompressor& own)
      : reader(std::move(reader_of_file)),
        cuts(std::move(prior)),
        batch(staged),
        large(threaded),
        compressor(own) {}

  ChunkReader reader;
  PriorCuts cuts;
  CatalogBatch& batch;
  bool large;                  // worked on up to threads_ threads
  BlobCompressor& compressor;  // the calling thread's, at this file's level
  Sha256 whole;                // of the content so far
  std::string digest;          // the content's, when the id of its one chunk gave it
  ChunkedContent out;
};

Expected<ChunkedContent> ChunkStore::store(int fd, std::uint64_t expected_size,
                                           const std::string& shown, CatalogBatch& batch,
                                           const PriorContent* prior) {
  Pass pass(ChunkReader(chunker_, fd, shown, read_buffer_, expected_size),
            prior_cuts(prior, expected_size, batch), batch,
            threads_ > 1 && expected_size >= kLargeFile,
            expected_size < chunker_.sizes().min ? small_compressor_ : compressor_);
  for (;;) {
    if (cancelled_ && cancelled_()) return retry("cancelled");
    const WindowShape shape = window_shape(pass.large);
    if (auto cut = cut_window(pass, shape); !cut) return cut.fault();
    if (window_.empty()) break;
    hash_window(pass, shape.workers);
    if (auto stored = store_window(pass, shape.workers); !stored) return stored.fault();
  }
  ChunkedContent& out = pass.out;
  out.size = pass.reader.offset();
  if (out.size != expected_size) return changed_while_read(shown);
  out.sha256 = pass.digest.empty() ? pass.whole.hex_digest() : std::move(pass.digest);
  return std::move(out);
}

ChunkStore::WindowShape ChunkStore::window_shape(bool large) const {
  const ChunkSizes& sizes = chunker_.sizes();
  // One chunk, on this thread, read as far ahead as the buffer takes (a small file in one
  // read); what is held moves to the buffer's start only when a maximal chunk would not fit.
  if (!large) return {1, 1, 0, sizes.max, read_buffer_.size()};
  // Up to 2 x workers chunks and, past its first, up to `workers` normal chunks' bytes (at
  // most a maximal chunk's), from the buffer's start, the reader reading a normal chunk at a
  // time only as far as the window's cuts need: its buffer is touched no further.
  const std::size_t workers = threads_now(static_cast<std::size_t>(threads_));
  return {workers, 2 * workers, std::min(workers * sizes.avg, sizes.max), read_buffer_.size(),
          sizes.avg};
}

// The window's chunks, cut in place in what the reader holds, reading more as the cuts need.
// A prior piece is cut as it was, on trust: hash_window() tells whether it holds. Else a cut
// by content, looked for in the bytes as they are read.
Done ChunkStore::cut_window(Pass& pass, const WindowShape& shape) {
  ChunkReader& reader = pass.reader;
  PriorCuts& cuts = pass.cuts;
  // (No read is made once the reader has met the file's end: nothing to make room for.)
  const auto begin = static_cast<std::size_t>(reader.held().data() - read_buffer_.data());
  if (!reader.reaches_end() && begin + shape.room > read_buffer_.size()) reader.compact();
  window_.clear();
  std::size_t at = 0;  // the window's bytes
  Chunker::Scan scan;  // of the chunk being cut at `at`
  while (window_.empty() || (window_.size() < shape.chunks && at < shape.bytes)) {
    const auto rest = reader.held().subspan(at);
    if (rest.empty() && reader.reaches_end()) break;
    const std::uint64_t offset = reader.offset() + at;
    const std::size_t piece = cuts.at(offset);
    std::size_t length = 0;
    if (piece != PriorCuts::kNone && cuts.piece(piece).size <= rest.size()) {
      length = cuts.piece(piece).size;
    } else if (piece != PriorCuts::kNone && reader.reaches_end()) {
      cuts.tried(piece);  // longer than the file: a miss
      continue;
    } else if (piece == PriorCuts::kNone) {
      length = chunker_.cut_more(rest, reader.reaches_end(), scan);
    }
    if (length == 0) {  // more bytes are needed to decide
      auto more = reader.read_more(shape.read);
      if (!more) return more.fault();
      if (!*more && !reader.reaches_end()) {
        return retry("archive: the chunk reader's buffer is full");
      }
      continue;
    }
    if (piece != PriorCuts::kNone) cuts.tried(piece);
    window_.emplace_back(rest.first(length), offset, piece);
    at += length;
    scan = {};
  }
  return Ok{};
}

// The ids of the window's chunks, on the workers, and the whole content's hash, in order.
// With other workers, this thread hashes the whole beside them, on trust that every prior
// piece holds, and goes back when one does not; alone, it hashes the whole once it knows
// which chunks stay.
void ChunkStore::hash_window(Pass& pass, std::size_t workers) {
  Sha256& whole = pass.whole;
  const auto hash_whole = [&] {
    for (const auto& c : window_) whole.update(c.bytes.data(), c.bytes.size());
  };
  ChunkReader& reader = pass.reader;
  if (reader.offset() == 0 && reader.reaches_end() && window_.size() == 1 &&
      window_.front().bytes.size() == reader.held().size()) {
    // A file of one chunk: its blob's id is the content's own digest, so it is hashed once
    // (hex_digest() starts `whole` again: as it was, should the chunk be a piece that missed).
    hash_whole();
    window_.front().id = whole.hex_digest();
    if (!drop_missed(pass.cuts)) pass.digest = window_.front().id;
    return;
  }
  const bool beside = workers > 1 && window_.size() > 1;
  const bool trusted = std::any_of(window_.begin(), window_.end(), [](const WindowChunk& c) {
    return c.piece != PriorCuts::kNone;
  });
  if (beside && trusted) rewind_.assign(whole);
  for_each_on_workers(
      window_, workers, [](WindowChunk& c, std::size_t) { c.id = sha256_hex(chars(c.bytes)); },
      [&] {
        if (beside) hash_whole();
      });
  const bool missed = drop_missed(pass.cuts);
  if (beside && !missed) return;
  if (beside) whole.assign(rewind_);
  hash_whole();
}

// A prior piece whose bytes are not the prior version's: the window ends before it, and the
// next one is cut by content from there. True when there was one.
bool ChunkStore::drop_missed(PriorCuts& cuts) {
  const auto missed = std::find_if(window_.begin(), window_.end(), [&](const WindowChunk& c) {
    return c.piece != PriorCuts::kNone && c.id != cuts.piece(c.piece).id;
  });
  if (missed == window_.end()) return false;
  cuts.tried(missed->piece);
  window_.erase(missed, window_.end());
  return true;
}

// The window's chunks new to the archive (in order, so that a chunk repeated within the
// window is stored once) compressed on the workers, then appended to the pack and staged,
// in order. A frame is appended from its compressor's buffer; copied out of it only when
// the window has more new chunks, one of which may take the compressor first.
Done ChunkStore::store_window(Pass& pass, std::size_t workers) {
  fresh_.clear();
  for (auto& c : window_) {
    auto have = known(c.id, pass.batch);
    if (!have) return have.fault();
    const bool earlier = std::any_of(fresh_.begin(), fresh_.end(),
                                     [&](const WindowChunk* f) { return f->id == c.id; });
    c.fresh = !*have && !earlier;
    if (c.fresh) fresh_.push_back(&c);
  }
  while (thread_compressors_.size() + 1 < std::min(workers, fresh_.size())) {
    thread_compressors_.push_back(
        std::make_unique<BlobCompressor>(compressor_.level(), chunker_.sizes().avg));
  }
  const bool keep = fresh_.size() > 1;
  for_each_on_workers(
      fresh_, workers,
      [&](WindowChunk* c, std::size_t worker) {
        BlobCompressor& compressor =
            worker == 0 ? pass.compressor : *thread_compressors_[worker - 1];
        const std::string_view raw = chars(c->bytes);
        auto frame = compressor.compress(std::span(raw.data(), raw.size()));
        if (!frame) {
          c->fault = frame.fault();
          return;
        }
        c->stored = *frame;
        if (keep && frame->compressed) {
          c->frame.assign(frame->bytes.begin(), frame->bytes.end());
          c->stored.bytes = c->frame;
        }
      },
      [] {});
  std::size_t taken = 0;
  for (auto& c : window_) {
    if (c.fresh) {
      if (c.fault) return *c.fault;
      if (auto added = add_blob(c.id, c.bytes.size(), c.stored, pass.batch, pass.out); !added) {
        return added.fault();
      }
    }
    taken += c.bytes.size();
    pass.out.chunks.push_back(std::move(c.id));
  }
  pass.reader.take(taken);
  return Ok{};
}

Expected<const ChunkStore::OpenPack*> ChunkStore::open_pack(const std::string& dir,
                                                            const std::string& name, bool local) {
  const std::string file = pack_file(dir, name);
  for (auto it = open_packs_.begin(); it != open_packs_.end(); ++it) {
    if (it->file == file) {
      open_packs_.splice(open_packs_.begin(), open_packs_, it);
      return &open_packs_.front();
    }
  }
  UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  // Without archive_fault's prefix: locate() names the blob first.
  if (!fd) return retry(fmt::format("pack {}: {}", shown_path(file), std::strerror(errno)));
  // A pack is given back whole, by a new file: what this descriptor reads never changes.
  const bool given_back = local && !held_locally(fd.get(), 0);
  open_packs_.push_front({file, std::move(fd), given_back});
  if (open_packs_.size() > kOpenPacks) open_packs_.pop_back();
  return &open_packs_.front();
}

Expected<ChunkStore::Located> ChunkStore::locate(const std::string& id,
                                                 const CatalogBatch* staged) {
  std::optional<BlobRef> ref;
  if (const BlobRef* pending = staged != nullptr ? staged->blob(id) : nullptr) {
    ref = *pending;
  } else {
    TRY_ASSIGN(ref, catalog_.blob(id));
  }
  if (!ref) return archive_fault(Error{fmt::format("blob {} is missing (not in the catalog)", id)});
  const std::string* given_back = fetcher_ != nullptr ? fetcher_->given_back_dir() : nullptr;
  // An archive read from the store: every blob fetched into the packs read (sparse files).
  const bool from_store = fetcher_ != nullptr && given_back == nullptr;
  for (int attempt = 1;; ++attempt) {
    PackPin pin;
    // The record's header (of either version) and its bytes.
    const auto fetch = [&]() -> Done {
      auto fetched = fetcher_->fetch(ref->pack, ref->offset, kBlobHeaderSizeV2 + ref->stored);
      if (!fetched) return in_context(fmt::format("blob {}", id), fetched.fault());
      pin = std::move(*fetched);
      return Ok{};
    };
    if (from_store) TRY(fetch());
    auto pack = open_pack(packs_dir_, ref->pack, !from_store);
    if (pack && (*pack)->given_back) {  // read where the fetcher puts it
      if (given_back == nullptr) {
        return archive_fault(Error{fmt::format("blob {}: {}", id, given_back_alone(ref->pack))});
      }
      TRY(fetch());
      pack = open_pack(*given_back, ref->pack, false);
    }
    if (pack) return Located{(*pack)->fd.get(), std::move(*ref), &id, std::move(pin)};
    // A collection may have moved the blob to another pack, and deleted this one, since it
    // was looked up (FORMAT.md, "Collection"): looked up again, it is read where it is now.
    std::optional<BlobRef> moved;
    if (staged == nullptr || staged->blob(id) == nullptr) {
      TRY_ASSIGN(moved, catalog_.blob(id));
    }
    if (attempt == 3 || !moved || moved->pack == ref->pack) {
      return archive_fault(Error{fmt::format("blob {}: {}", id, pack.error())});
    }
    ref = std::move(moved);
  }
}

Expected<BlobBytes> ChunkStore::read_located(const Located& at) {
  // The whole content is hashed by the sink against the version's digest: no blob's own.
  auto raw = read_blob(at.pack_fd, at.ref, *at.id, false);
  if (!raw) {
    return archive_fault(
        Error{fmt::format("blob {} in pack {}: {}", *at.id, at.ref.pack, raw.error())});
  }
  return raw;
}

Expected<std::uint64_t> ChunkStore::extract(const std::vector<std::string>& chunks,
                                            const std::string& sha256, int out_fd, bool sparse,
                                            const CatalogBatch* staged) {
  ContentSink sink(out_fd, sparse);
  // Blobs are located on this thread (the catalog's connection is its own), a few ahead of
  // the one written (no more than packs kept open, so that a located blob's descriptor
  // stays open until it is read), read and decompressed on one thread fewer than this
  // store's (this one's share is hashing and writing them, in order). The sink's failures
  // (its own words) are the archive's here: archive_fault.
  const auto workers = static_cast<std::size_t>(threads_);
  const std::size_t depth = std::min(2 * workers + 2, kOpenPacks);
  struct Slot {
    Located at;
    Expected<BlobBytes> raw = retry("not read");
  };
  std::vector<Slot> slots(depth);
  std::optional<Fault> failed;
  run_ordered(
      chunks.size(), depth, workers > 1 ? workers - 1 : 0,
      [&](std::size_t i) {
        auto at = locate(chunks[i], staged);
        if (!at) {
          failed = at.fault();
          return false;
        }
        slots[i % depth] = Slot{std::move(*at)};
        return true;
      },
      [&](std::size_t i) { slots[i % depth].raw = read_located(slots[i % depth].at); },
      [&](std::size_t i) {
        Slot& slot = slots[i % depth];
        if (!slot.raw) {
          failed = slot.raw.fault();
        } else if (auto written = sink.write({slot.raw->data(), slot.raw->size()}); !written) {
          failed = archive_fault(Error{written.error()});
        }
        slot.raw = retry("written");  // its memory back
        return !failed;
      });
  if (failed) return *failed;
  auto total = sink.finish(sha256);
  if (!total) return archive_fault(Error{total.error()});
  return total;
}

}  // namespace tw::archive
