// A tree restored on several threads (archive/restore_pool.hpp).
#include "archive/restore_pool.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <thread>

#include <fmt/format.h>
#include <boost/asio/post.hpp>

#include "common/escape.hpp"
#include "common/host.hpp"

namespace tw::archive {
namespace {

// Entries queued to the workers and not yet placed: each holds its directory open.
constexpr std::ptrdiff_t kQueued = 64;
// Descriptors waiting for their sync (within the default limit of 1,024 open files).
constexpr std::ptrdiff_t kSyncing = 256;
// Threads that fsync. A sync mostly waits for the disk, and the filesystem's journal
// commits the syncs that wait together at once: 6,600 files and folders of a copy of
// /usr/share/doc took 1.4 s synced one after another on one thread, 0.8 s on 4 and 0.36 s
// on 16 (ext4 on a virtual disk).
constexpr std::size_t kSyncThreads = 16;
// With one syncfs at the end, the sync thread also syncs the filesystem each time this many
// more bytes are placed, so that the disk writes beside the workers rather than all at the
// end: a copy of /usr/share (915 MB) was placed in 3.8 s and its final syncfs took 1.15 s;
// with these syncs, placed in 3.8 s and synced 0.05 s after. Writing each file back as it
// is placed (sync_file_range) made the placing 50% slower: many small writes.
constexpr std::uint64_t kSyncEvery = std::uint64_t{128} << 20;

// Workers placing files: the cores this process may run on, at least 2 (a worker also waits
// for the disk), at most 4 (each may hold a window of a large file's blobs).
std::size_t worker_count() { return std::clamp<std::size_t>(usable_cores(), 2, 4); }

}  // namespace

Durability choose_durability(Durability asked, std::string_view meminfo, std::size_t entries) {
  if (asked != Durability::Auto) return asked;
  std::uint64_t pending = 0;
  int found = 0;
  for (const std::string_view field : {"\nDirty:", "\nWriteback:"}) {
    const auto at = meminfo.find(field);
    if (at == std::string_view::npos) continue;
    std::uint64_t kib = 0;
    const char* begin = meminfo.data() + at + field.size();
    while (begin < meminfo.data() + meminfo.size() && *begin == ' ') ++begin;
    const auto [end, error] = std::from_chars(begin, meminfo.data() + meminfo.size(), kib);
    if (error != std::errc{} || std::string_view(end, 3) != " kB") continue;
    pending += kib * 1024;
    ++found;
  }
  const std::uint64_t bound = std::max(kQuietPending, kPendingPerEntry * entries);
  return found == 2 && pending <= bound ? Durability::WholeFilesystem : Durability::EachFile;
}

PlacePool::PlacePool(Layout& layout, const RestoreOptions& options, Durability durability)
    : layout_(layout),
      options_(options),
      sync_each_(durability == Durability::EachFile),
      queued_(kQueued),
      syncing_(kSyncing) {
  {
    MutexLock lock(&mutex_);
    // More workers only when the archive has other views: each has one of its own, and
    // `layout` stays the caller's.
    if (auto other = layout_.reader()) {
      workers_ = worker_count();
      free_views_.push_back(other.get());
      views_.push_back(std::move(other));
    } else {
      free_views_.push_back(&layout_);
    }
  }
  syncers_.emplace(sync_each_ ? kSyncThreads : 1);
  placers_.emplace(workers_);
}

PlacePool::~PlacePool() {
  placers_.reset();  // what no worker began is dropped; what one began ends first
  syncers_->join();
}

Layout* PlacePool::take_view() {
  MutexLock lock(&mutex_);
  if (free_views_.empty()) {
    // No more views than workers are ever out at once, and every worker's is a reader.
    views_.push_back(layout_.reader());
    if (!views_.back()) {
      views_.pop_back();
      return nullptr;
    }
    return views_.back().get();
  }
  Layout* view = free_views_.back();
  free_views_.pop_back();
  return view;
}

void PlacePool::give_back(Layout* view) {
  MutexLock lock(&mutex_);
  free_views_.push_back(view);
}

void PlacePool::place(std::shared_ptr<const UniqueFd> dir, TreeEntry entry, std::string target) {
  queued_.acquire();
  boost::asio::post(*placers_, [this, number = queued_count_++, entry = std::move(entry),
                                dir = std::move(dir), target = std::move(target)] {
    RestoreReport placed;
    if (Layout* view = take_view()) {
      Restorer restorer(*view, options_, placed);
      restorer.defer_sync(
          [this](UniqueFd fd, const std::string& t) { add_sync(std::move(fd), t); });
      if (auto done = restorer.place(dir->get(), entry.parts.back(), entry.version, target);
          !done) {
        placed.problems.push_back(done.error());
      }
      give_back(view);
    } else {
      placed.problems.push_back(fmt::format(
          "{} not restored: the archive could not be opened once more for it", shown_path(target)));
    }
    {
      MutexLock lock(&mutex_);
      placed_.files += placed.files;
      placed_.symlinks += placed.symlinks;
      placed_.bytes += placed.bytes;
      if (!sync_each_ && placed_.bytes >= synced_bytes_ + kSyncEvery) {
        synced_bytes_ = placed_.bytes;
        boost::asio::post(*syncers_, [dir] { ::syncfs(dir->get()); });  // checked at the end
      }
      for (auto& problem : placed.problems)
        place_problems_.emplace_back(number, std::move(problem));
    }
    queued_.release();
  });
}

void PlacePool::wait() {
  for (std::ptrdiff_t i = 0; i < kQueued; ++i) queued_.acquire();
  queued_.release(kQueued);
}

void PlacePool::sync(UniqueFd fd, std::string target) { add_sync(std::move(fd), target); }

void PlacePool::add_sync(UniqueFd fd, const std::string& target) {
  if (!sync_each_) return;  // closed here; the whole filesystem is synced at the end
  syncing_.acquire();
  boost::asio::post(*syncers_, [this, fd = std::make_shared<UniqueFd>(std::move(fd)), target] {
    if (::fsync(fd->get()) != 0) {
      const std::string problem =
          fmt::format("cannot sync {}: {}", shown_path(target), std::strerror(errno));
      MutexLock lock(&mutex_);
      sync_problems_.push_back(problem);
    }
    fd->reset();
    syncing_.release();
  });
}

void PlacePool::finish(RestoreReport& report, int root_fd, const std::string& root) {
  wait();
  syncers_->join();
  if (!sync_each_ && ::syncfs(root_fd) != 0) {
    report.problems.push_back(
        fmt::format("cannot sync {}: {}", shown_path(root), std::strerror(errno)));
  }
  MutexLock lock(&mutex_);
  report.files += std::exchange(placed_.files, 0);
  report.symlinks += std::exchange(placed_.symlinks, 0);
  report.bytes += std::exchange(placed_.bytes, 0);
  // Stable: one entry's problems stay in the order they were found.
  std::stable_sort(place_problems_.begin(), place_problems_.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [number, problem] : place_problems_) report.problems.push_back(std::move(problem));
  place_problems_.clear();
  for (auto& problem : sync_problems_) report.problems.push_back(std::move(problem));
  sync_problems_.clear();
}

}  // namespace tw::archive
