// What `timewarp status` shows of the archive, read from the backup root alone (no
// database): its size, what its versions use, what a collection could give back, what the
// retention policy would remove now and what that frees, and the last collection; and how
// `status` and `forget` write byte counts for people. Reading plans a forget (every history)
// and reads every version row once: seconds on a large archive, so `status --watch` reads
// it at most once a minute. Not thread-safe: call from main only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "archive/types.hpp"
#include "common/config.hpp"

namespace tw::cli {

struct ArchiveStatus {
  std::string root;   // the backup root
  std::string error;  // why the archive could not be read: nothing below is then set
  int format = 0;
  // Its files and what its versions use; unset when they cannot be read (`unmeasured` says
  // why), the rest being shown all the same.
  std::optional<archive::SpaceReport> space;
  std::string unmeasured;
  std::uint64_t versions = 0;         // in the archive
  std::uint64_t removable = 0;        // the versions the policy would remove now
  std::uint64_t removable_paths = 0;  // paths whose whole history would go
  std::optional<archive::CollectReport> last_collection;
  std::string read_at;                 // when it was read (ISO 8601, UTC)
  double read_seconds = 0;             // how long reading took
  std::string collection_finished_at;  // the last collection's end (ISO 8601, UTC)
  double collection_age = 0;           // seconds from it to read_at
  // The pack store (store_* keys), when one is configured: where, and what it does not hold
  // yet, or why that cannot be said.
  std::string store;
  std::optional<archive::ShipBacklog> shipping;
  std::string shipping_error;
  std::int64_t read_ns = 0;  // read_at, for the ages of the shipping figures
};

// Reads the archive at config.backup_root (which must be set) with the configuration's
// retention policy and time zone; a failure is kept in `error`, never thrown.
ArchiveStatus read_archive_status(const Config& config);

// A collection's figures as `gc --json`, `forget --json` and `status --json` give them.
nlohmann::json collection_json(const archive::CollectReport& r);

// "512 bytes", "1.5 KiB", "12.0 MiB", "1.2 GiB": binary units, one decimal.
std::string bytes_text(std::uint64_t bytes);

}  // namespace tw::cli
