// Store::open: the one place that reads an archive's FORMAT file and picks its layout
// (format 2, or format 1 read only), creating a new archive, in format 2, when asked to.
// A root that is no archive this release can open is PERMANENT; an archive that cannot be
// read or written, RETRY.
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <unordered_set>

#include <fmt/format.h>

#include "archive/disk.hpp"
#include "archive/format1/layout.hpp"
#include "archive/format2/chunker.hpp"
#include "archive/format2/layout.hpp"
#include "archive/store_impl.hpp"
#include "common/escape.hpp"

namespace tw::archive {
namespace {

// The text of <root>/FORMAT, in format 1 and format 2 (format 2 follows it with the chunk
// sizes of the archive).
constexpr std::string_view kFormat1Line = "timewarp-archive 1\n";
constexpr std::string_view kFormat2Line = "timewarp-archive 2\n";

// What an interrupted creation may have left in a backup root, in either format.
bool own_entry(const std::string& name) {
  static const std::unordered_set<std::string> kOwn = {"tmp",
                                                       "objects",
                                                       "nodes",
                                                       "FORMAT",
                                                       "packs",
                                                       "locks",
                                                       "slots",
                                                       "catalog.db",
                                                       "catalog.db-wal",
                                                       "catalog.db-shm",
                                                       "catalog.db-journal"};
  return kOwn.count(name) > 0;
}

// Creates the folders down to `root` that are missing, the last ones private (kDirMode):
// a new backup root is readable by its owner only, whatever the umask.
Done make_root(const std::string& root) {
  std::error_code ec;
  const std::filesystem::path path(root);
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) return retry(fmt::format("cannot create backup root {}: {}", root, ec.message()));
  if (::mkdir(root.c_str(), kDirMode) != 0 && errno != EEXIST) {
    return retry(fmt::format("cannot create backup root {}: {}", root, std::strerror(errno)));
  }
  return Ok{};
}

// A writer's new archive, before its layout is set up: refuses a folder that holds anything
// but what an interrupted creation leaves, and writes tmp/. FORMAT, which makes the folder
// an archive, comes last (Store::open).
Done prepare_archive(const std::string& root, DiskWriter& disk) {
  TRY(make_root(root));
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(root, ec)) {
    if (!own_entry(entry.path().filename().string())) {
      return permanent(
          fmt::format("backup root {} is not empty and not a TimeWarp archive (no FORMAT "
                      "file); refusing to write into it",
                      root));
    }
  }
  if (ec) return retry(fmt::format("cannot read backup root {}: {}", root, ec.message()));
  TRY(disk.make_dir(root + "/tmp"));
  return Ok{};
}

// `layout`, opened to write, as the store's layout and writer.
void attach_writer(Store::Impl& impl, std::unique_ptr<Format2Layout> layout) {
  impl.writer = layout.get();
  layout->remove_stale_temps();
  impl.layout = std::move(layout);
}

std::string without_trailing_slashes(std::string root) {
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  return root;
}

}  // namespace

Expected<Store> Store::open(const std::string& backup_root, Mode mode, StoreHooks hooks,
                            CompressionOptions compression) {
  if (backup_root.empty()) return permanent("backup_root is not set");
  auto impl = std::make_unique<Impl>();
  impl->root = without_trailing_slashes(backup_root);
  impl->mode = mode;
  impl->hooks = std::move(hooks);
  const std::string& root = impl->root;
  const std::string format_file = root + "/FORMAT";
  const bool writable = mode == Mode::ReadWrite;
  if (writable && !path_exists(format_file)) {
    // A new archive: its catalog is set up before FORMAT is written, so that a reader (the
    // monitor, a retention run, an operator) finds no archive or a whole one, never one
    // whose catalog a writer has yet to make; a kill before FORMAT leaves what the next
    // writer finishes (archive/FORMAT.md, "Format 2").
    DiskWriter disk(root, impl->hooks.before_write_step, impl->hooks.fail_write_step);
    TRY(prepare_archive(root, disk));
    TRY_ASSIGN(auto layout,
               Format2Layout::open(root, mode, impl->hooks, compression, ChunkSizes{}));
    TRY(disk.write_file(format_file, std::string(kFormat2Line) + chunk_sizes_line(ChunkSizes{})));
    attach_writer(*impl, std::move(layout));
    return Store(std::move(impl));
  }
  auto format = read_small_file(format_file, 4096);
  if (!format) {
    return permanent(
        fmt::format("{} is not a TimeWarp archive (cannot read {})", root, format_file));
  }
  if (*format == kFormat1Line) {
    if (writable) {
      return permanent(fmt::format(
          "{} is a format-1 archive, which this release reads but no longer writes: point "
          "backup_root at a new folder for the archivers (this one stays listable, restorable "
          "and verifiable with `timewarp versions`, `restore` and `verify --backup-root {}`)",
          root, root));
    }
    impl->layout = std::make_unique<Format1Layout>(root, impl->hooks.cancelled);
    return Store(std::move(impl));
  }
  if (!format->starts_with(kFormat2Line)) {
    return permanent(
        fmt::format("{} is not a TimeWarp archive this version can read ({} holds '{}')", root,
                    format_file, shown_path(format->substr(0, 40))));
  }
  auto sizes = parse_chunk_sizes(std::string_view(*format).substr(kFormat2Line.size()));
  if (!sizes) {
    return permanent(fmt::format("{} is not a TimeWarp archive this version can read ({}: {})",
                                 root, format_file, sizes.error()));
  }
  TRY_ASSIGN(auto layout, Format2Layout::open(root, mode, impl->hooks, compression, *sizes));
  if (writable) {
    attach_writer(*impl, std::move(layout));
  } else {
    impl->layout = std::move(layout);
  }
  return Store(std::move(impl));
}

}  // namespace tw::archive
