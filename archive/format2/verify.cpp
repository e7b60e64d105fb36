// Format 2's part of verify (FORMAT.md, "Verify"): the catalog's own check; the parts of its
// tree no path reaches; every indexed blob read from its pack, decompressed and re-hashed,
// pack by pack in file order, several packs at once, beginning before verify walks the
// histories; every blob a version names found in the index;
// pack records no commit names counted.
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "archive/format2/layout.hpp"
#include "archive/pack_cache.hpp"
#include "archive/verify.hpp"
#include "common/dirs.hpp"
#include "common/escape.hpp"
#include "common/host.hpp"

namespace tw::archive {
namespace {

// Blob `id` of `ref` read back from the open `pack` (or the pack's absence), as a problem
// (to which the caller adds who uses it).
std::optional<std::string> check_blob(int pack, const std::string& id, const BlobRef& ref) {
  if (pack < 0) {
    return fmt::format("blob {} is in pack {}, which cannot be opened ({})", id, ref.pack,
                       std::strerror(errno));
  }
  if (auto read = read_blob(pack, ref, id); !read) {
    return fmt::format("damaged blob {} in pack {}: {}", id, ref.pack, read.error());
  }
  return std::nullopt;
}

// Every blob of `blobs` (sorted by pack and offset) read back from its pack, decompressed
// and re-hashed, on a thread per core (at most 4), each taking the next whole pack (read in
// file order); each blob's problem, if any, at its index. Nothing when `cancelled` said so midway.
// Packs are read from `packs`, each fetched whole first through `fetcher` when there is one.
std::optional<std::vector<std::optional<std::string>>> check_blobs(
    const std::string& packs, PackFetcher* fetcher,
    const std::vector<std::pair<std::string, BlobRef>>& blobs,
    const std::function<bool()>& cancelled, const std::function<void(std::string_view)>& progress) {
  std::vector<std::size_t> starts;  // where each pack's blobs begin
  for (std::size_t i = 0; i < blobs.size(); ++i) {
    if (i == 0 || blobs[i].second.pack != blobs[i - 1].second.pack) starts.push_back(i);
  }
  std::vector<std::optional<std::string>> found(blobs.size());
  std::atomic<std::size_t> next_pack{0};
  std::atomic<std::size_t> checked{0};
  std::atomic<bool> stopped{false};
  const auto work = [&](bool reports) {
    for (std::size_t p = next_pack++; p < starts.size() && !stopped; p = next_pack++) {
      const std::size_t end = p + 1 < starts.size() ? starts[p + 1] : blobs.size();
      const std::string& name = blobs[starts[p]].second.pack;
      const auto unreadable = [&](const std::string& why) {
        for (std::size_t i = starts[p]; i < end; ++i) {
          found[i] = fmt::format("blob {} is in pack {}, which cannot be read: {}", blobs[i].first,
                                 name, why);
        }
        checked += end - starts[p];
      };
      const std::string* given_back = fetcher != nullptr ? fetcher->given_back_dir() : nullptr;
      UniqueFd pack;
      if (fetcher == nullptr || given_back != nullptr) {
        pack.reset(::open(pack_file(packs, name).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
      }
      // A pack given back once shipped (its file a hole) is read from the store.
      const bool fetch =
          fetcher != nullptr && (given_back == nullptr || (pack && !held_locally(pack.get(), 0)));
      if (!fetch && pack && !held_locally(pack.get(), 0)) {
        unreadable(given_back_alone(name));
        continue;
      }
      PackPin pin;
      if (fetch) {
        auto fetched = fetcher->fetch_whole(name);
        if (!fetched) {
          unreadable(unprefixed_message(fetched.fault()));
          continue;
        }
        pin = std::move(*fetched);
        pack.reset(::open(pack_file(given_back != nullptr ? *given_back : packs, name).c_str(),
                          O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
      }
      for (std::size_t i = starts[p]; i < end; ++i) {
        if (cancelled()) {
          stopped = true;
          return;
        }
        found[i] = check_blob(pack ? pack.get() : -1, blobs[i].first, blobs[i].second);
        const std::size_t done = ++checked;
        if (reports && progress && done / 1000 != (done - 1) / 1000) {
          progress(fmt::format("checked {} blobs", done / 1000 * 1000));
        }
      }
    }
  };
  {
    std::vector<std::jthread> others;  // joined at the end of this scope
    for (std::size_t t = 1; t < std::min(std::min<std::size_t>(usable_cores(), 4), starts.size());
         ++t) {
      others.emplace_back(work, false);
    }
    work(true);  // only this thread reports progress
  }
  if (stopped) return std::nullopt;
  return found;
}

// Records in packs that no commit names (an interrupted request's, harmless) are counted;
// a file of packs/ that is not a pack is named.
void count_unindexed_records(const std::string& packs,
                             std::map<std::string, std::uint64_t>& indexed_per_pack,
                             VerifyReport& report) {
  for (const auto& bucket : list_dir(packs)) {
    for (const auto& name : list_dir(packs + "/" + bucket)) {
      UniqueFd fd(
          ::open((packs + "/" + bucket + "/" + name).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
      const std::string pack_name = name.size() > 5 ? name.substr(0, name.size() - 5) : name;
      const auto indexed = indexed_per_pack[pack_name];
      std::uint64_t records = 0;
      if (fd && !held_locally(fd.get(), 0)) continue;  // given back: its blobs were read whole
      if (!fd || !scan_pack(fd.get(), [&](const BlobHeader&) { ++records; })) {
        // A pack no blob lives in, cut short before its first line was whole (a writer
        // killed, or a full disk, as it began): nothing to read, for a collection to remove.
        struct stat st {};
        if (fd && indexed == 0 && ::fstat(fd.get(), &st) == 0 &&
            static_cast<std::uint64_t>(st.st_size) < kPackMagic.size()) {
          ++report.reclaimable_packs;
          continue;
        }
        report.problems.push_back(
            fmt::format("packs/{}/{} is not a readable pack", bucket, shown_path(name)));
        continue;
      }
      if (records > indexed) report.unreferenced_objects += records - indexed;
    }
  }
}

// The parts of the catalog's tree no path reaches are named; their versions use their blobs
// as any version does (a blob they name is not unreferenced).
void check_tree(const Catalog& catalog, ContentUsers& users, VerifyReport& report) {
  auto lost = catalog.lost_parts([&users](const std::string& path, const Version& v) {
    if (!v.exists() || !v.is_file()) return;
    users.begin_path(path);
    for (const auto& id : v.chunks) users.add(id, v.number);
  });
  if (!lost) {
    report.problems.push_back(unprefixed_message(lost.fault()));
    return;
  }
  for (const auto& part : *lost) report.problems.push_back(describe(part));
}

}  // namespace

// The blobs indexed when verify began, read back on threads of their own while verify walks
// the histories (the walk of a copy of /usr/share took 0.8 s of a 1.8 s verify, the
// read-back ran after it). Blobs indexed later, or moved since by a collection, are read
// back by verify_storage. Once read, the list is let go: what is kept is a key per blob
// (its id and where it was) and the problems found, so that verify holds one list of the
// blobs at a time, as it did when it read them all after the walk. Then SQLite's check of
// the catalog, through a view of its own: run after the walk, on the walk's view, it read
// the 142 MB catalog of a 500,000-file tree for about 2 s of an 11.3 s verify (10.0-10.4 s
// beside the walk).
struct Format2Layout::EarlyCheck {
  std::vector<std::pair<std::string, BlobRef>> blobs;  // emptied once read back
  std::vector<BlobKey> keys;                           // sorted
  std::map<std::string, std::string> problems;         // by blob id
  bool finished = false;                               // not cancelled midway
  std::unique_ptr<Layout> catalog_view;                // the integrity check's
  std::optional<Expected<std::string>> integrity;      // its findings, once made
  std::atomic<bool> stop{false};
  std::jthread thread;  // last: joined first
};

Format2Layout::BlobKey Format2Layout::blob_key(const std::string& id, const BlobRef& ref) {
  const std::hash<std::string> hash;
  return {hash(id), hash(ref.pack) ^ (ref.offset * 0x9E3779B97F4A7C15ULL) ^
                        (ref.stored * 0xC2B2AE3D27D4EB4FULL) ^ (ref.raw * 0x165667B19E3779F9ULL)};
}

void Format2Layout::EndEarlyCheck::operator()(EarlyCheck* check) const {
  check->stop = true;
  if (check->thread.joinable()) check->thread.join();
  delete check;
}

void Format2Layout::begin_verify_storage() {
  auto blobs = catalog_->all_blobs();
  if (!blobs) return;  // read again, and its failure named, by verify_storage
  early_check_.reset(new EarlyCheck);
  early_check_->blobs = std::move(*blobs);
  early_check_->catalog_view = reader();  // none: verify_storage checks on this view
  early_check_->thread = std::jthread([this, check = early_check_.get()] {
    const auto stop = [this, check] { return check->stop || cancelled(); };
    auto found = check_blobs(root_ + "/packs", hooks_.packs_from.get(), check->blobs, stop, {});
    if (!found) return;
    check->keys.reserve(check->blobs.size());
    for (std::size_t i = 0; i < check->blobs.size(); ++i) {
      const auto& [id, ref] = check->blobs[i];
      check->keys.push_back(blob_key(id, ref));
      if ((*found)[i]) check->problems.emplace(id, std::move(*(*found)[i]));
    }
    std::sort(check->keys.begin(), check->keys.end());
    std::vector<std::pair<std::string, BlobRef>>().swap(check->blobs);
    check->finished = true;
    if (auto* view = dynamic_cast<Format2Layout*>(check->catalog_view.get())) {
      auto integrity = view->catalog_->integrity_problems(stop);
      if (integrity || !stop()) check->integrity = std::move(integrity);
    }
  });
}

// Each blob's problem, if any, at its index: what the early check (if any, finished) found
// for a blob still where it was then, the rest read back now.
std::optional<std::vector<std::optional<std::string>>> Format2Layout::blob_problems(
    const std::vector<std::pair<std::string, BlobRef>>& blobs, EarlyCheck* early,
    const std::function<void(std::string_view)>& progress) {
  const auto cancel = [this] { return cancelled(); };
  const std::string packs = root_ + "/packs";
  if (!early) return check_blobs(packs, hooks_.packs_from.get(), blobs, cancel, progress);
  if (!early->finished) return std::nullopt;
  if (progress) progress(fmt::format("checked {} blobs", early->keys.size()));
  std::vector<std::optional<std::string>> found(blobs.size());
  std::vector<std::pair<std::string, BlobRef>> rest;
  std::vector<std::size_t> rest_at;
  for (std::size_t i = 0; i < blobs.size(); ++i) {
    const auto& [id, ref] = blobs[i];
    if (std::binary_search(early->keys.begin(), early->keys.end(), blob_key(id, ref))) {
      if (const auto it = early->problems.find(id); it != early->problems.end()) {
        found[i] = std::move(it->second);
      }
      continue;
    }
    rest.push_back(blobs[i]);
    rest_at.push_back(i);
  }
  auto rest_found = check_blobs(packs, hooks_.packs_from.get(), rest, cancel, progress);
  if (!rest_found) return std::nullopt;
  for (std::size_t j = 0; j < rest.size(); ++j) found[rest_at[j]] = std::move((*rest_found)[j]);
  return found;
}

void Format2Layout::verify_storage(ContentUsers users, VerifyReport& report,
                                   const std::function<void(std::string_view)>& progress) {
  std::unique_ptr<EarlyCheck, EndEarlyCheck> early = std::move(early_check_);
  if (early) early->thread.join();
  auto problems =
      early && early->integrity ? std::move(*early->integrity) : catalog_->integrity_problems();
  // The catalog's failures are named in its own words, as its findings are.
  if (!problems) {
    report.problems.push_back(unprefixed_message(problems.fault()));
  } else if (!problems->empty()) {
    report.problems.push_back("catalog.db is damaged: " + *problems);
  }
  check_tree(*catalog_, users, report);
  auto blobs = catalog_->all_blobs();
  if (!blobs) {
    report.problems.push_back(unprefixed_message(blobs.fault()));
    return;
  }
  const std::string packs = root_ + "/packs";
  const auto found = blob_problems(*blobs, early.get(), progress);
  if (!found) {
    report.problems.push_back("cancelled");
    return;
  }
  std::map<std::string, std::uint64_t> indexed_per_pack;
  for (std::size_t i = 0; i < blobs->size(); ++i) {
    const auto& [id, ref] = (*blobs)[i];
    ++report.objects;
    ++indexed_per_pack[ref.pack];
    if (const auto& problem = (*found)[i]) {
      report.problems.push_back(fmt::format("{}; {}", *problem, users.text(id)));
    }
    if (!users.erase(id)) ++report.unreferenced_objects;
  }
  // Blobs named by a version but not in the index.
  for (const auto& id : users.ids()) {
    report.problems.push_back(fmt::format("missing blob {}; {}", id, users.text(id)));
  }
  // Read from a pack store, packs/ holds only what was fetched: the store's records are
  // checked, not counted (a local archive's packs given back are skipped alike).
  if (!hooks_.packs_from || hooks_.packs_from->given_back_dir() != nullptr) {
    count_unindexed_records(packs, indexed_per_pack, report);
  }
}

}  // namespace tw::archive
