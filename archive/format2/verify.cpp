// Format 2's part of verify (FORMAT.md, "Verify"): the catalog's own check; the parts of its
// tree no path reaches; every indexed blob read from its pack, decompressed and re-hashed,
// pack by pack in file order; every blob a version names found in the index; pack records
// no commit names counted.
#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <map>

#include <fmt/format.h>

#include "archive/format2/layout.hpp"
#include "archive/verify.hpp"
#include "common/dirs.hpp"
#include "common/escape.hpp"

namespace tw::archive {
namespace {

// Blob `id` of `ref` read back from the open `pack` (or the pack's absence), as a problem.
std::optional<std::string> check_blob(int pack, const std::string& id, const BlobRef& ref,
                                      const std::vector<std::string>& who) {
  if (pack < 0) {
    return fmt::format("blob {} is in pack {}, which cannot be opened ({}); {}", id, ref.pack,
                       std::strerror(errno), users_text(who));
  }
  if (auto read = read_blob(pack, ref, id); !read) {
    return fmt::format("damaged blob {} in pack {}: {}; {}", id, ref.pack, read.error(),
                       users_text(who));
  }
  return std::nullopt;
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
    for (const auto& id : v.chunks) {
      users[id].push_back(fmt::format("{} v{}", shown_path(path), v.number));
    }
  });
  if (!lost) {
    report.problems.push_back(unprefixed_message(lost.fault()));
    return;
  }
  for (const auto& part : *lost) report.problems.push_back(describe(part));
}

}  // namespace

void Format2Layout::verify_storage(ContentUsers users, VerifyReport& report,
                                   const std::function<void(std::string_view)>& progress) {
  // The catalog's failures are named in its own words, as its findings are.
  if (auto problems = catalog_->integrity_problems(); !problems) {
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
  std::string open_name;
  UniqueFd pack;
  std::map<std::string, std::uint64_t> indexed_per_pack;
  const std::vector<std::string> none;
  for (const auto& [id, ref] : *blobs) {
    if (cancelled()) {
      report.problems.push_back("cancelled");
      return;
    }
    ++report.objects;
    ++indexed_per_pack[ref.pack];
    const auto used = users.find(id);
    if (used == users.end()) ++report.unreferenced_objects;
    if (ref.pack != open_name) {
      open_name = ref.pack;
      pack.reset(::open(pack_file(packs, ref.pack).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    }
    const auto& who = used == users.end() ? none : used->second;
    if (auto problem = check_blob(pack ? pack.get() : -1, id, ref, who)) {
      report.problems.push_back(std::move(*problem));
    }
    if (used != users.end()) users.erase(used);
    if (progress && report.objects % 1000 == 0) {
      progress(fmt::format("checked {} blobs", report.objects));
    }
  }
  // Blobs named by a version but not in the index.
  for (const auto& [id, who] : users) {
    report.problems.push_back(fmt::format("missing blob {}; {}", id, users_text(who)));
  }
  count_unindexed_records(packs, indexed_per_pack, report);
}

}  // namespace tw::archive
