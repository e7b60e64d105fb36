// Store::open_shipped: an archive read from its pack store alone (FORMAT.md, "Shipping";
// ARCHITECTURE.md, "Object store"). The cache folder holds the newest catalog snapshot
// fetched, as catalog-NAME (NAME the snapshot's, without ".zst"; fetched once, shared by
// every reader of the folder), and a folder per reading process, run-PID: the archive's
// FORMAT, the snapshot linked as catalog.db and packs/, PackCache's sparse pack files.
// A run folder is removed when its Store closes, or, left by a process that died, by the
// next reader.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "archive/disk.hpp"
#include "archive/pack_cache.hpp"
#include "archive/store_impl.hpp"
#include "common/dirs.hpp"
#include "common/fd.hpp"

namespace tw::archive {
namespace {

constexpr std::string_view kSnapshotSuffix = ".zst";

Done make_private_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return retry(fmt::format("cannot create {}: {}", shown_path(dir), ec.message()));
  ::chmod(dir.c_str(), 0700);
  return Ok{};
}

// Removes the run folders and half-fetched snapshots (tmp-PID) of processes that are gone,
// and the snapshots but `keep`.
void tidy(const std::string& cache_dir, const std::string& keep) {
  const auto names = directory_names(cache_dir);
  if (!names) return;
  for (const std::string& name : *names) {
    long pid = 0;
    std::error_code ec;
    if ((std::sscanf(name.c_str(), "run-%ld", &pid) == 1 ||
         std::sscanf(name.c_str(), "tmp-%ld", &pid) == 1) &&
        pid > 0) {
      if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
        std::filesystem::remove_all(cache_dir + "/" + name, ec);
      }
    } else if (name.starts_with("catalog-") && name != keep) {
      std::filesystem::remove(cache_dir + "/" + name, ec);  // a reader's link keeps it
    }
  }
}

// Writes the zstd frame `packed` decompressed to the new file `file`, a MiB at a time.
Done write_decompressed(const std::string& packed, const std::string& file,
                        const std::string& what) {
  const UniqueFd fd(
      ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) return errno_fault(errno, Side::Archive, fmt::format("creating {}", shown_path(file)));
  const std::unique_ptr<ZSTD_DCtx, decltype(&ZSTD_freeDCtx)> dctx(ZSTD_createDCtx(),
                                                                  &ZSTD_freeDCtx);
  std::vector<char> out(std::size_t{1} << 20);
  ZSTD_inBuffer input{packed.data(), packed.size(), 0};
  std::size_t left = 1;
  while (input.pos < input.size || left != 0) {
    ZSTD_outBuffer output{out.data(), out.size(), 0};
    left = ZSTD_decompressStream(dctx.get(), &output, &input);
    if (ZSTD_isError(left) != 0U) {
      return permanent(fmt::format("{} is damaged: {}", what, ZSTD_getErrorName(left)));
    }
    if (output.pos == 0 && input.pos == input.size && left != 0) {
      return permanent(fmt::format("{} is damaged: it ends inside its frame", what));
    }
    for (std::size_t done = 0; done < output.pos;) {
      const ssize_t n = ::write(fd.get(), out.data() + done, output.pos - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        return errno_fault(n < 0 ? errno : ENOSPC, Side::Archive,
                           fmt::format("writing {}", shown_path(file)));
      }
      done += static_cast<std::size_t>(n);
    }
  }
  return Ok{};
}

Done write_whole(const std::string& file, std::string_view bytes) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) return retry(fmt::format("cannot write {}", shown_path(file)));
  return Ok{};
}

// The newest snapshot of `store`, fetched into `cache_dir` unless it is there: its file.
Expected<std::string> newest_catalog(PackStore& store, const std::string& cache_dir) {
  auto names = store.list_files("catalog");
  if (!names)
    return in_context(fmt::format("listing the catalogs in {}", store.where()), names.fault());
  std::string newest;
  for (const std::string& name : *names) {
    if (name.ends_with(kSnapshotSuffix) && name > newest) newest = name;
  }
  if (newest.empty()) {
    return permanent(fmt::format(
        "{} holds no catalog: nothing was shipped there yet (timewarp ship), or store_prefix "
        "names another host",
        store.where()));
  }
  const std::string kept = "catalog-" + newest.substr(0, newest.size() - kSnapshotSuffix.size());
  const std::string file = cache_dir + "/" + kept;
  tidy(cache_dir, kept);
  if (path_exists(file)) return file;
  auto packed = store.get_file("catalog/" + newest);
  if (!packed)
    return in_context(fmt::format("fetching catalog/{} from {}", newest, store.where()),
                      packed.fault());
  if (!*packed)
    return retry(fmt::format("catalog/{} left {} as it was fetched", newest, store.where()));
  const std::string temp = fmt::format("{}/tmp-{}", cache_dir, ::getpid());
  if (auto written = write_decompressed(**packed, temp,
                                        fmt::format("catalog/{} in {}", newest, store.where()));
      !written) {
    ::unlink(temp.c_str());
    return written.fault();
  }
  if (::rename(temp.c_str(), file.c_str()) != 0) {
    return errno_fault(errno, Side::Archive, fmt::format("renaming {}", shown_path(temp)));
  }
  return file;
}

}  // namespace

Expected<Store> Store::open_shipped(std::unique_ptr<PackStore> store, const std::string& cache_dir,
                                    std::uint64_t cache_bytes) {
  TRY(make_private_dir(cache_dir));
  TRY_ASSIGN(const std::string catalog, newest_catalog(*store, cache_dir));
  auto format = store->get_file("FORMAT");
  if (!format)
    return in_context(fmt::format("fetching FORMAT from {}", store->where()), format.fault());
  if (!*format)
    return permanent(fmt::format("{} holds a catalog but no FORMAT file", store->where()));
  const std::string run = fmt::format("{}/run-{}", cache_dir, ::getpid());
  std::error_code ec;
  std::filesystem::remove_all(run, ec);
  TRY(make_private_dir(run + "/packs"));
  auto after_close = std::shared_ptr<void>(nullptr, [run](void*) {
    std::error_code gone;
    std::filesystem::remove_all(run, gone);
  });
  TRY(write_whole(run + "/FORMAT", **format));
  if (::link(catalog.c_str(), (run + "/catalog.db").c_str()) != 0) {
    return errno_fault(errno, Side::Archive, fmt::format("linking {}", shown_path(catalog)));
  }
  StoreHooks hooks;
  hooks.packs_from = std::make_shared<PackCache>(run + "/packs", std::move(store), cache_bytes);
  TRY_ASSIGN(Store opened, open(run, Mode::ReadOnly, std::move(hooks)));
  opened.impl_->after_close = std::move(after_close);
  return opened;
}

}  // namespace tw::archive
