// PackCache and GivenBackPacks (pack_cache.hpp): sparse pack files filled by ranged reads
// of a pack store.
#include "archive/pack_cache.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>

#include <fmt/format.h>

#include "archive/disk.hpp"
#include "archive/format2/pack.hpp"
#include "common/escape.hpp"

namespace tw::archive {

bool held_locally(int fd, std::uint64_t offset) {
  const off_t data = ::lseek(fd, static_cast<off_t>(offset), SEEK_DATA);
  if (data >= 0) return static_cast<std::uint64_t>(data) == offset;
  if (errno != ENXIO) return true;  // cannot tell: read it as it is
  // ENXIO: nothing but a hole from `offset` to the end, or `offset` at or past the end.
  struct stat st {};
  return ::fstat(fd, &st) == 0 && offset >= static_cast<std::uint64_t>(st.st_size);
}

std::string given_back_alone(std::string_view name) {
  return fmt::format(
      "pack {} was given back to the pack store once shipped (local_packs_size): it is read "
      "from there with the store's keys configured",
      name);
}

GivenBackPacks::GivenBackPacks(std::string run_dir, OpenStore open, std::uint64_t budget)
    : run_dir_(std::move(run_dir)),
      packs_dir_(run_dir_ + "/packs"),
      open_(std::move(open)),
      budget_(budget) {}

GivenBackPacks::~GivenBackPacks() {
  MutexLock lock(&mutex_);
  if (!cache_) return;
  cache_.reset();
  std::error_code gone;
  std::filesystem::remove_all(run_dir_, gone);
}

Expected<PackCache*> GivenBackPacks::cache() {
  MutexLock lock(&mutex_);
  if (cache_) return cache_.get();
  auto store = open_();
  if (!store) {
    return in_context(
        "the pack was given back to the pack store once shipped, and the store "
        "cannot be read",
        store.fault());
  }
  std::error_code ec;
  std::filesystem::remove_all(run_dir_, ec);
  std::filesystem::create_directories(run_dir_, ec);
  if (ec) return retry(fmt::format("cannot create {}: {}", shown_path(run_dir_), ec.message()));
  ::chmod(run_dir_.c_str(), 0700);
  cache_ = std::make_unique<PackCache>(packs_dir_, std::move(*store), budget_);
  return cache_.get();
}

Expected<PackPin> GivenBackPacks::fetch(std::string_view name, std::uint64_t offset,
                                        std::uint64_t length) {
  TRY_ASSIGN(PackCache* const c, cache());
  return c->fetch(name, offset, length);
}

Expected<PackPin> GivenBackPacks::fetch_whole(std::string_view name) {
  TRY_ASSIGN(PackCache* const c, cache());
  return c->fetch_whole(name);
}

PackCache::PackCache(std::string packs_dir, std::unique_ptr<PackStore> store, std::uint64_t budget)
    : packs_dir_(std::move(packs_dir)), budget_(budget), store_(std::move(store)) {}

Expected<PackCache::Pack*> PackCache::pack(std::string_view name) {
  if (auto it = packs_.find(name); it != packs_.end()) return &it->second;
  if (name.size() < 2 || name.find('/') != std::string_view::npos) {
    return archive_fault(Error{fmt::format("no pack is named '{}'", shown_path(name))});
  }
  TRY_ASSIGN(const std::uint64_t size, store_->size(name));
  const std::string file = pack_file(packs_dir_, name);
  const std::string dir = file.substr(0, file.rfind('/'));
  if (::mkdir(packs_dir_.c_str(), 0700) != 0 && errno != EEXIST) {
    return errno_fault(errno, Side::Archive, fmt::format("creating {}", shown_path(packs_dir_)));
  }
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return errno_fault(errno, Side::Archive, fmt::format("creating {}", shown_path(dir)));
  }
  // A file left by an earlier reader is begun again: what it holds is not known whole.
  UniqueFd fd(::open(file.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) return errno_fault(errno, Side::Archive, fmt::format("creating {}", shown_path(file)));
  Pack& made = packs_[std::string(name)];
  made.fd = std::move(fd);
  made.size = size;
  made.have.assign((size + kBlock - 1) / kBlock, false);
  return &made;
}

Expected<PackPin> PackCache::fetch(std::string_view name, std::uint64_t offset,
                                   std::uint64_t length) {
  MutexLock lock(&mutex_);
  TRY_ASSIGN(Pack* const p, pack(name));
  const std::uint64_t end = std::min(p->size, offset + length);
  if (end <= offset) return PackPin();
  return fetch_blocks(std::string(name), *p, offset / kBlock, (end + kBlock - 1) / kBlock);
}

Expected<PackPin> PackCache::fetch_whole(std::string_view name) {
  MutexLock lock(&mutex_);
  TRY_ASSIGN(Pack* const p, pack(name));
  return fetch_blocks(std::string(name), *p, 0, p->have.size());
}

Expected<PackPin> PackCache::fetch_blocks(const std::string& name, Pack& p, std::uint64_t first,
                                          std::uint64_t end) {
  // Each run of missing blocks is one ranged read.
  for (std::uint64_t b = first; b < end;) {
    if (p.have[b]) {
      touch(name, b++);
      continue;
    }
    std::uint64_t run_end = b;
    while (run_end < end && !p.have[run_end]) ++run_end;
    const std::uint64_t from = b * kBlock;
    const std::uint64_t to = std::min(p.size, run_end * kBlock);
    auto bytes = store_->read(name, from, to - from);
    if (!bytes) {
      return in_context(fmt::format("reading pack {} from {}", name, store_->where()),
                        bytes.fault());
    }
    for (std::size_t done = 0; done < bytes->size();) {
      const ssize_t n = ::pwrite(p.fd.get(), bytes->data() + done, bytes->size() - done,
                                 static_cast<off_t>(from + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        return errno_fault(
            n < 0 ? errno : ENOSPC, Side::Archive,
            fmt::format("writing pack {} to the cache in {}", name, shown_path(packs_dir_)));
      }
      done += static_cast<std::size_t>(n);
    }
    for (; b < run_end; ++b) {
      p.have[b] = true;
      held_ += std::min(kBlock, p.size - b * kBlock);
      touch(name, b);
    }
  }
  for (std::uint64_t b = first; b < end; ++b) ++pins_[BlockKey{name, b}];
  PackPin pin(nullptr, [this, name, first, end](void*) { unpin(name, first, end); });
  evict();
  return pin;
}

void PackCache::unpin(const std::string& name, std::uint64_t first, std::uint64_t end) {
  MutexLock lock(&mutex_);
  for (std::uint64_t b = first; b < end; ++b) {
    const auto it = pins_.find(BlockKey{name, b});
    if (it != pins_.end() && --it->second == 0) pins_.erase(it);
  }
}

void PackCache::touch(const std::string& name, std::uint64_t block) {
  BlockKey key{name, block};
  if (auto it = where_.find(key); it != where_.end()) used_.erase(it->second);
  used_.push_front(key);
  where_[std::move(key)] = used_.begin();
}

void PackCache::evict() {
  for (auto it = used_.end(); held_ > budget_ && it != used_.begin();) {
    --it;
    if (pins_.count(*it) > 0) continue;  // being read
    const BlockKey oldest = *it;
    it = used_.erase(it);
    where_.erase(oldest);
    Pack& p = packs_.find(oldest.first)->second;
    const std::uint64_t from = oldest.second * kBlock;
    const std::uint64_t length = std::min(kBlock, p.size - from);
    p.have[oldest.second] = false;
    held_ -= length;
    // The file keeps its size and its other blocks: a descriptor a reader holds stays valid.
    // Where holes cannot be punched, the block stays on disk, uncounted, until it is read
    // again or the reader's folder is removed.
    ::fallocate(p.fd.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(from),
                static_cast<off_t>(length));
  }
}

}  // namespace tw::archive
