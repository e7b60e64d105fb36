// The archive as shipped to the configuration's pack store (`--from-store`): versions,
// restore, verify and mount on a host with neither the backup root nor the database
// (ARCHITECTURE.md, "Object store").
#pragma once

#include "archive/store.hpp"
#include "common/config.hpp"

namespace tw {

// The folder `--from-store` keeps its catalog and packs in for `where` (the store's
// "<endpoint>/<bucket>/<prefix>"): `cache_dir`, or the user's cache, then a folder named
// after `where`.
std::string shipped_cache_dir(const Config& config, const std::string& where);

// The archive shipped to the store the store_* keys name, under store_prefix (default:
// this host's name), read through a cache of cache_size bytes.
archive::Expected<archive::Store> open_shipped(const Config& config);

// For the archive at backup_root, with a pack store configured: its packs given back once
// shipped (local_packs_size) read from the store, through a cache of cache_size bytes in a
// folder of cache_dir made at the first such read and removed with the archive. Without a
// store: no hooks.
archive::StoreHooks given_back_hooks(const Config& config);

}  // namespace tw
