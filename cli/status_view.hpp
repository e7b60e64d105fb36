// How `timewarp status`, `history` and `failed` present what db/status.hpp reads (and
// `status` what cli/archive_status.hpp reads of the archive): plain text (with ANSI colour
// only when asked, i.e. on a terminal) and JSON documents. Pure functions of their
// arguments, safe from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/archive_status.hpp"
#include "common/escape.hpp"
#include "db/status.hpp"

namespace tw::cli {

// JSON documents keep their keys in the order written, for people reading --json.
using Json = nlohmann::ordered_json;

struct ViewOptions {
  bool color = false;         // ANSI colour and emphasis
  double stale_after = 60.0;  // seconds without a heartbeat before a scheduler is "stale"
  std::string database;       // the database described, without password
};

// The drain progress a `status --watch` tracks since it started.
struct WatchProgress {
  std::int64_t done = 0;       // items finished (completed or failed) since watching began
  std::int64_t remaining = 0;  // backlog now (claimable + delayed + dispatched)
  int frame = 1;
};

// Items waiting or in flight: claimable + delayed + dispatched.
std::int64_t backlog(const db::QueueCounts& counts);
// Completions per second over the last minute.
double completion_rate(const db::QueueCounts& counts);
// Seconds until the backlog drains at completion_rate(); none when nothing completes.
std::optional<double> drain_eta(const db::QueueCounts& counts);

// "850ms", "12.5s", "3m07s", "2h05m", "3d04h".
std::string duration(double seconds);
// "[#########-----------]" for a fraction 0..1, `width` characters between the brackets.
std::string progress_bar(double fraction, int width);

std::string status_text(const db::StatusReport& report, const ViewOptions& options,
                        const WatchProgress* watch = nullptr);
Json status_json(const db::StatusReport& report, const ViewOptions& options,
                 const WatchProgress* watch = nullptr);

// The archive's lines of `status`, after the queue's, and its part of the JSON document
// ("archive"). `age` is how many seconds ago `archive` was read (a watch reads it once a
// minute).
std::string archive_text(const ArchiveStatus& archive, double age, const ViewOptions& options);
Json archive_json(const ArchiveStatus& archive, double age);

Json item_json(const db::ItemRecord& item);
// A header, then one line per item (local time to the second), its error indented below it.
std::string items_text(const std::vector<db::ItemRecord>& items, const ViewOptions& options);

// JSON text that never throws on invalid UTF-8 (it is replaced).
std::string dump_json(const Json& document, int indent);

}  // namespace tw::cli
