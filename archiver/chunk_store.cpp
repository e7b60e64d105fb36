// Format 2's file contents (archiver/chunk_store.hpp).
#include "archiver/chunk_store.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "archiver/sha256.hpp"
#include "common/escape.hpp"

namespace tw::archive {
namespace {

// Read descriptors of packs kept open between blobs (restore and verify read many blobs of
// few packs in a row).
constexpr std::size_t kOpenPacks = 8;

}  // namespace

ChunkStore::ChunkStore(DiskWriter& disk, std::string packs_dir, Catalog& catalog, int level,
                       ChunkSizes sizes, std::function<bool()> cancelled)
    : packs_dir_(std::move(packs_dir)),
      catalog_(catalog),
      cancelled_(std::move(cancelled)),
      chunker_(sizes),
      pack_(disk, packs_dir_),
      compressor_(level) {}

Expected<ChunkedContent> ChunkStore::store(int fd, std::uint64_t expected_size,
                                           const std::string& shown, CatalogBatch& batch) {
  ChunkedContent out;
  Sha256 whole;
  std::string whole_done;  // the content's digest, when it was taken early (one chunk)
  ChunkReader reader(chunker_, fd, shown, read_buffer_);
  for (;;) {
    if (cancelled_ && cancelled_()) return retry("cancelled");
    auto chunk = reader.next();
    if (!chunk) return chunk.fault();
    if (chunk->empty()) break;
    const std::string_view bytes(reinterpret_cast<const char*>(chunk->data()), chunk->size());
    whole.update(bytes);
    // A file of one chunk (the first chunk, and the reader found its end): its blob's id
    // is the content's own digest, so it is hashed once.
    std::string id;
    if (reader.offset() == bytes.size() && reader.at_end()) {
      id = whole.hex_digest();
      whole_done = id;
    } else {
      id = sha256_hex(bytes);
    }
    if (batch.blob(id) == nullptr) {
      auto known = catalog_.blob(id);
      if (!known) return retry(known.error());
      if (!*known) {
        auto frame = compressor_.compress(std::span(bytes.data(), bytes.size()));
        if (!frame) return frame.fault();
        auto ref = pack_.append(id, bytes.size(), *frame);
        if (!ref) return ref.fault();
        out.bytes_added += kBlobHeaderSize + frame->size();
        batch.add_blob(id, *ref);
      }
    }
    out.chunks.push_back(std::move(id));
  }
  out.size = reader.offset();
  if (out.size != expected_size) {
    Fault fault = retry(fmt::format("changed while being read: {}", shown));
    fault.changed = true;
    return fault;
  }
  out.sha256 = whole_done.empty() ? whole.hex_digest() : whole_done;
  return out;
}

Result<int> ChunkStore::pack_fd(const std::string& name) {
  for (auto it = open_packs_.begin(); it != open_packs_.end(); ++it) {
    if (it->first == name) {
      open_packs_.splice(open_packs_.begin(), open_packs_, it);
      return open_packs_.front().second.get();
    }
  }
  const std::string file = pack_file(packs_dir_, name);
  UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return Error{fmt::format("pack {}: {}", shown_path(file), std::strerror(errno))};
  open_packs_.emplace_front(name, std::move(fd));
  if (open_packs_.size() > kOpenPacks) open_packs_.pop_back();
  return open_packs_.front().second.get();
}

Result<std::uint64_t> ChunkStore::extract(const std::vector<std::string>& chunks,
                                          const std::string& sha256, int out_fd, bool sparse,
                                          const CatalogBatch* staged) {
  ContentSink sink(out_fd, sparse);
  for (const auto& id : chunks) {
    std::optional<BlobRef> ref;
    if (const BlobRef* pending = staged != nullptr ? staged->blob(id) : nullptr) {
      ref = *pending;
    } else {
      auto known = catalog_.blob(id);
      if (!known) return Error{known.error()};
      ref = *known;
    }
    if (!ref) return Error{fmt::format("blob {} is missing (not in the catalog)", id)};
    auto fd = pack_fd(ref->pack);
    if (!fd) return Error{fmt::format("blob {}: {}", id, fd.error())};
    // The whole content is hashed below against the version's digest: no blob's own.
    auto raw = read_blob(*fd, *ref, id, false);
    if (!raw) return Error{fmt::format("blob {} in pack {}: {}", id, ref->pack, raw.error())};
    if (auto written = sink.write({raw->data(), raw->size()}); !written) {
      return Error{written.error()};
    }
  }
  return sink.finish(sha256);
}

}  // namespace tw::archive
