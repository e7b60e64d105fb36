#include "cli/status_view.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "common/escape.hpp"
#include "common/human.hpp"
#include "common/version.hpp"

namespace tw::cli {
namespace {

// ANSI attributes, used only when colour is on.
struct Paint {
  bool on = false;
  std::string operator()(std::string_view code, std::string_view text) const {
    if (!on) return std::string(text);
    return fmt::format("\x1b[{}m{}\x1b[0m", code, text);
  }
  std::string bold(std::string_view t) const { return (*this)("1", t); }
  std::string red(std::string_view t) const { return (*this)("31", t); }
  std::string yellow(std::string_view t) const { return (*this)("33", t); }
  std::string green(std::string_view t) const { return (*this)("32", t); }
};

std::string plural(std::int64_t n, std::string_view word) {
  return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s");
}

Json optional_number(const std::optional<double>& value) {
  return value ? Json(*value) : Json(nullptr);
}

Json optional_number(const std::optional<std::int64_t>& value) {
  return value ? Json(*value) : Json(nullptr);
}

Json optional_text(const std::string& value) { return value.empty() ? Json(nullptr) : Json(value); }

Json scheduler_json(const db::SchedulerInfo& s, double stale_after) {
  return Json{{"id", s.id},
              {"host", s.host},
              {"pid", s.pid},
              {"strategy", s.strategy},
              {"batch_size", s.batch_size},
              {"started_at", optional_text(s.started_at)},
              {"heartbeat_age_seconds", s.heartbeat_age},
              {"alive", s.heartbeat_age <= stale_after},
              {"archivers", s.archivers},
              {"busy", s.busy},
              {"idle", s.idle},
              {"busy_high_water", s.busy_high_water},
              {"batch_queue_length", s.batch_queue_length},
              {"batch_queue_high_water", s.batch_queue_high_water},
              {"items_done", s.items_done},
              {"items_failed", s.items_failed}};
}

// "0", "0.02", "2.5", "1250": enough digits to tell a trickle from nothing.
std::string rate_text(double rate) {
  if (rate <= 0) return "0";
  if (rate < 1) return fmt::format("{:.2f}", rate);
  if (rate < 100) return fmt::format("{:.1f}", rate);
  return fmt::format("{:.0f}", rate);
}

std::string item_age(const db::ItemRecord& item) {
  return item.finished_age ? duration(*item.finished_age) + " ago" : "-";
}

}  // namespace

std::int64_t backlog(const db::QueueCounts& c) { return c.claimable + c.delayed + c.dispatched; }

double completion_rate(const db::QueueCounts& c) {
  return static_cast<double>(c.completed_last_minute) / 60.0;
}

std::optional<double> drain_eta(const db::QueueCounts& c) {
  const auto left = backlog(c);
  if (left == 0) return 0.0;
  const double rate = completion_rate(c);
  if (rate <= 0) return std::nullopt;
  return static_cast<double>(left) / rate;
}

std::string duration(double seconds) {
  if (!std::isfinite(seconds)) return "-";
  if (seconds < 0) seconds = 0;
  if (seconds < 1) return fmt::format("{}ms", static_cast<std::int64_t>(seconds * 1000));
  if (seconds < 60) return fmt::format("{:.1f}s", seconds);
  const auto s = static_cast<std::int64_t>(seconds);
  if (s < 3600) return fmt::format("{}m{:02d}s", s / 60, s % 60);
  if (s < 86400) return fmt::format("{}h{:02d}m", s / 3600, (s % 3600) / 60);
  return fmt::format("{}d{:02d}h", s / 86400, (s % 86400) / 3600);
}

std::string progress_bar(double fraction, int width) {
  if (!std::isfinite(fraction)) fraction = 0;
  fraction = std::clamp(fraction, 0.0, 1.0);
  width = std::max(1, width);
  const int filled = static_cast<int>(std::floor(fraction * width));
  return "[" + std::string(static_cast<std::size_t>(filled), '#') +
         std::string(static_cast<std::size_t>(width - filled), '-') + "]";
}

namespace {

// One labelled line of the text views: the label in a column of its own.
void line(std::string& out, std::string_view label, const std::string& text) {
  out += fmt::format("{:<12}{}\n", label, text);
}

// The queue: what waits, how fast it goes, and with a watch how far it has drained.
std::string queue_text(const db::QueueCounts& c, const Paint& paint, const WatchProgress* watch) {
  std::string out;
  const auto left = backlog(c);
  std::string delayed = fmt::format("{} delayed", c.delayed);
  if (c.next_retry_in) delayed += fmt::format(" (next retry in {})", duration(*c.next_retry_in));
  line(out, "backlog",
       fmt::format("{}: {} claimable, {}, {} dispatched", plural(left, "item"), c.claimable,
                   delayed, c.dispatched));
  line(out, "oldest",
       c.oldest_claimable_age ? fmt::format("{} waiting", duration(*c.oldest_claimable_age))
                              : std::string("- (nothing claimable)"));
  const double rate = completion_rate(c);
  std::string eta;
  if (left == 0) {
    eta = paint.green("queue drained");
  } else if (const auto seconds = drain_eta(c)) {
    eta = fmt::format("backlog drains in about {}", duration(*seconds));
  } else {
    eta = paint.yellow("nothing completed in the last minute: no estimate");
  }
  line(out, "progress",
       fmt::format("{} completed in the last minute ({}/s); {}", c.completed_last_minute,
                   rate_text(rate), eta));
  line(out, "totals", fmt::format("{} completed, {} failed", c.completed, c.failed));
  if (watch) {
    const double total = static_cast<double>(watch->done + watch->remaining);
    const double fraction = total > 0 ? static_cast<double>(watch->done) / total : 1.0;
    line(out, "draining",
         fmt::format("{} {:3.0f}%  {} done since watching began, {} to go",
                     progress_bar(fraction, 30), fraction * 100, watch->done, watch->remaining));
  }
  return out;
}

// The schedulers, one line and its figures each, then the processes failing a statement.
std::string processes_text(const db::StatusReport& report, const ViewOptions& options,
                           const Paint& paint) {
  std::string out;
  const auto alive =
      std::count_if(report.schedulers.begin(), report.schedulers.end(),
                    [&](const auto& s) { return s.heartbeat_age <= options.stale_after; });
  std::string scheduler_summary = fmt::format("{} running", alive);
  if (alive == 0) {
    scheduler_summary = backlog(report.counts) > 0
                            ? paint.yellow("none running (is timewarp-monitor started?)")
                            : std::string("none running");
  }
  if (static_cast<std::size_t>(alive) < report.schedulers.size()) {
    scheduler_summary +=
        fmt::format(", {} stale", report.schedulers.size() - static_cast<std::size_t>(alive));
  }
  line(out, "schedulers", scheduler_summary);
  for (const auto& s : report.schedulers) {
    const bool stale = s.heartbeat_age > options.stale_after;
    std::string heartbeat = fmt::format("heartbeat {} ago", duration(s.heartbeat_age));
    if (stale) heartbeat = paint.yellow(heartbeat + ", stale");
    out += fmt::format("  #{} {}  pid {}  {}  batch {}  {}\n", s.id, paint.bold(shown_text(s.host)),
                       s.pid, s.strategy, s.batch_size, heartbeat);
    out += fmt::format(
        "      archivers {}: {} busy, {} idle, busiest {}   batch queue {}, most {}   "
        "done {}, failed {}\n",
        s.archivers, s.busy, s.idle, s.busy_high_water, s.batch_queue_length,
        s.batch_queue_high_water, s.items_done, s.items_failed);
  }
  if (!report.database_errors.empty()) {
    line(out, "db errors",
         paint.red(fmt::format("{} {} failing a statement again and again (nothing is lost: "
                               "that work waits until the cause is removed)",
                               report.database_errors.size(),
                               report.database_errors.size() == 1 ? "process" : "processes")));
    for (const auto& e : report.database_errors) {
      out += fmt::format("  {} #{} on {}  pid {}  {} since it started, failing for {}\n", e.process,
                         e.id, shown_text(e.host), e.pid, plural(e.errors, "error"),
                         duration(e.failing_for));
      out += fmt::format("      {}\n", paint.red(shown_text(e.error, 300)));
    }
  }
  return out;
}

// The failures of the last hour, the most recent listed.
std::string failures_text(const db::StatusReport& report, const Paint& paint) {
  std::string out;
  const auto& c = report.counts;
  if (c.failed_last_hour == 0) {
    line(out, "failures", "none in the last hour");
    return out;
  }
  line(out, "failures", paint.red(fmt::format("{} in the last hour", c.failed_last_hour)));
  for (const auto& f : report.recent_failures) {
    out += fmt::format("  #{} {}  {} {} ({})\n", f.id, item_age(f), f.op, shown_text(f.path),
                       plural(f.attempts, "attempt"));
    out += fmt::format("      {}\n", paint.red(shown_text(f.last_error, 300)));
  }
  const auto shown = static_cast<std::int64_t>(report.recent_failures.size());
  if (c.failed_last_hour > shown) {
    out += fmt::format("  ... and {} more: timewarp failed\n", c.failed_last_hour - shown);
  }
  return out;
}

// A host's name as shown: its host_id, or what the empty one means.
std::string host_name(const db::HostStatus& h) {
  return h.host.empty() ? std::string("(no host: queued before items had one)")
                        : shown_text(h.host);
}

// A host's monitor: where it runs and whether it is alive.
std::string host_monitor_text(const db::HostStatus& h, const ViewOptions& options,
                              const Paint& paint) {
  if (!h.monitor) return "no monitor";
  const auto& m = *h.monitor;
  if (m.stopped) {
    return fmt::format("monitor on {} stopped {} ago", shown_text(m.machine),
                       duration(m.heartbeat_age));
  }
  std::string out = fmt::format("monitor pid {} on {}, heartbeat {} ago", m.pid,
                                shown_text(m.machine), duration(m.heartbeat_age));
  return m.heartbeat_age > options.stale_after ? paint.yellow(out + ", stale") : out;
}

// What a host's monitor last read of its archive's shipping.
std::string host_shipping_text(const db::HostStatus::Shipping& s, const Paint& paint) {
  std::string out = fmt::format("to {}: ", shown_text(s.store, 300));
  if (s.packs_pending > 0) {
    out += paint.yellow(fmt::format("{} ({}) not shipped yet, the oldest begun {} ago; ",
                                    plural(s.packs_pending, "pack"),
                                    bytes_text(static_cast<std::uint64_t>(s.bytes_pending)),
                                    duration(s.oldest_pending_age.value_or(0))));
  } else {
    out += "every pack shipped; ";
  }
  if (s.last_shipped_age)
    out += fmt::format("the last pack {} ago; ", duration(*s.last_shipped_age));
  if (s.removals_pending > 0) out += fmt::format("{} to remove; ", s.removals_pending);
  out += s.catalog_shipped_age
             ? fmt::format("the catalog {} ago", duration(*s.catalog_shipped_age))
             : paint.yellow("the catalog never (the store cannot be restored from yet)");
  out += fmt::format(" (read {} ago)", duration(s.read_age));
  if (!s.error.empty()) out += "; " + paint.red(shown_text(s.error, 300));
  return out;
}

// Every host on the database, when there is more than one: its monitor, its queue and its
// shipping.
std::string hosts_text(const db::StatusReport& report, const ViewOptions& options,
                       const Paint& paint) {
  std::string out;
  if (report.hosts.size() < 2) return out;
  line(out, "hosts", fmt::format("{} on this database", report.hosts.size()));
  for (const auto& h : report.hosts) {
    out +=
        fmt::format("  {}  {}\n", paint.bold(host_name(h)), host_monitor_text(h, options, paint));
    out += fmt::format("      queue {} waiting, {} dispatched; {} completed, {} failed\n",
                       h.waiting, h.dispatched, h.completed, h.failed);
    if (h.shipping)
      out += fmt::format("      shipping {}\n", host_shipping_text(*h.shipping, paint));
  }
  return out;
}

Json host_json(const db::HostStatus& h, double stale_after) {
  Json monitor = nullptr;
  if (h.monitor) {
    monitor = {{"machine", h.monitor->machine},
               {"pid", h.monitor->pid},
               {"heartbeat_age_seconds", h.monitor->heartbeat_age},
               {"stopped", h.monitor->stopped},
               {"alive", !h.monitor->stopped && h.monitor->heartbeat_age <= stale_after}};
  }
  Json shipping = nullptr;
  if (const auto& s = h.shipping) {
    shipping = {{"store", s->store},
                {"read_age_seconds", s->read_age},
                {"error", optional_text(s->error)},
                {"packs_pending", s->packs_pending},
                {"bytes_pending", s->bytes_pending},
                {"oldest_pending_age_seconds", optional_number(s->oldest_pending_age)},
                {"removals_pending", s->removals_pending},
                {"last_shipped_age_seconds", optional_number(s->last_shipped_age)},
                {"catalog_shipped_age_seconds", optional_number(s->catalog_shipped_age)}};
  }
  return Json{{"host_id", h.host},
              {"queue",
               {{"waiting", h.waiting},
                {"dispatched", h.dispatched},
                {"completed", h.completed},
                {"failed", h.failed}}},
              {"monitor", std::move(monitor)},
              {"shipping", std::move(shipping)}};
}

}  // namespace

// A heading, then the queue, the processes and the failures, a blank line between them.
std::string status_text(const db::StatusReport& report, const ViewOptions& options,
                        const WatchProgress* watch) {
  const Paint paint{options.color};
  std::string out = paint.bold(fmt::format("TimeWarp status at {}", report.time)) + "\n";
  if (!options.database.empty()) line(out, "database", options.database);
  out += "\n" + queue_text(report.counts, paint, watch);
  out += "\n" + processes_text(report, options, paint);
  if (const auto hosts = hosts_text(report, options, paint); !hosts.empty()) out += "\n" + hosts;
  out += "\n" + failures_text(report, paint);
  return out;
}

Json status_json(const db::StatusReport& report, const ViewOptions& options,
                 const WatchProgress* watch) {
  const auto& c = report.counts;
  Json schedulers = Json::array();
  for (const auto& s : report.schedulers)
    schedulers.push_back(scheduler_json(s, options.stale_after));
  Json failures = Json::array();
  for (const auto& f : report.recent_failures) failures.push_back(item_json(f));
  Json hosts = Json::array();
  for (const auto& h : report.hosts) hosts.push_back(host_json(h, options.stale_after));
  Json database_errors = Json::array();
  for (const auto& e : report.database_errors) {
    database_errors.push_back({{"process", e.process},
                               {"id", e.id},
                               {"host", e.host},
                               {"pid", e.pid},
                               {"errors", e.errors},
                               {"error", e.error},
                               {"failing_for_seconds", e.failing_for}});
  }
  Json doc{{"version", kVersion},
           {"time", report.time},
           {"database", options.database},
           {"backlog",
            {{"claimable", c.claimable},
             {"delayed", c.delayed},
             {"dispatched", c.dispatched},
             {"total", backlog(c)},
             {"oldest_claimable_age_seconds", optional_number(c.oldest_claimable_age)},
             {"next_retry_in_seconds", optional_number(c.next_retry_in)}}},
           {"progress",
            {{"completed_last_minute", c.completed_last_minute},
             {"per_second", completion_rate(c)},
             {"drain_eta_seconds", optional_number(drain_eta(c))}}},
           {"totals", {{"completed", c.completed}, {"failed", c.failed}}},
           {"schedulers", std::move(schedulers)},
           {"hosts", std::move(hosts)},
           {"database_errors", std::move(database_errors)},
           {"failures", {{"last_hour", c.failed_last_hour}, {"recent", std::move(failures)}}}};
  if (watch) {
    const double total = static_cast<double>(watch->done + watch->remaining);
    doc["watch"] = {{"frame", watch->frame},
                    {"done_since_start", watch->done},
                    {"remaining", watch->remaining},
                    {"fraction_done", total > 0 ? static_cast<double>(watch->done) / total : 1.0}};
  }
  return doc;
}

// Seconds from `at_ns` to when the archive was read, plus `age`.
double age_of(const ArchiveStatus& archive, std::int64_t at_ns, double age) {
  return static_cast<double>(archive.read_ns - at_ns) / 1e9 + age;
}

// The pack store's line: what it does not hold yet.
std::string shipping_text(const ArchiveStatus& archive, double age, const Paint& paint) {
  if (!archive.shipping_error.empty()) {
    return paint.yellow(fmt::format("{}cannot be read: {}",
                                    archive.store.empty() ? "" : "to " + archive.store + ": ",
                                    shown_text(archive.shipping_error, 300)));
  }
  const auto& b = *archive.shipping;
  std::string out = fmt::format("to {}: ", shown_text(archive.store, 300));
  if (b.packs > 0) {
    out += paint.yellow(
        fmt::format("{} ({}) not shipped yet, the oldest begun {} ago; ",
                    plural(static_cast<std::int64_t>(b.packs), "pack"), bytes_text(b.bytes),
                    duration(age_of(archive, b.oldest_ns.value_or(archive.read_ns), age))));
  }
  out += fmt::format("{} ({}) shipped", plural(static_cast<std::int64_t>(b.shipped_packs), "pack"),
                     bytes_text(b.shipped_bytes));
  if (b.last_shipped_ns) {
    out += fmt::format(", the last {} ago", duration(age_of(archive, *b.last_shipped_ns, age)));
  }
  if (b.removals > 0) out += fmt::format("; {} to remove from it", b.removals);
  out += b.catalog_shipped_ns
             ? fmt::format("; the catalog {} ago",
                           duration(age_of(archive, *b.catalog_shipped_ns, age)))
             : paint.yellow("; the catalog never (the store cannot be restored from yet)");
  return out;
}

std::string archive_text(const ArchiveStatus& archive, double age, const ViewOptions& options) {
  const Paint paint{options.color};
  std::string out = "\n";
  if (!archive.error.empty()) {
    line(out, "archive",
         paint.red(fmt::format("{} cannot be read: {}", shown_path(archive.root),
                               shown_text(archive.error, 300))));
    return out;
  }
  // A format-1 archive is read only: never thinned, never collected.
  const bool thinned = archive.format >= 2;
  const auto& s = archive.space;
  if (!s) {
    line(out, "archive",
         paint.yellow(fmt::format("{} (format {}): its size cannot be read: {}",
                                  shown_path(archive.root), archive.format,
                                  shown_text(archive.unmeasured, 300))));
  } else {
    line(out, "archive",
         fmt::format(
             "{} (format {}): {}, of which {} in {} and {} of catalog", shown_path(archive.root),
             archive.format, bytes_text(s->total_bytes()), bytes_text(s->content_bytes),
             plural(static_cast<std::int64_t>(s->content_files), thinned ? "pack" : "object"),
             bytes_text(s->catalog_bytes)));
    if (s->given_back_files > 0) {
      line(out, "",
           fmt::format("{} ({}) given back to the pack store once shipped: read from it",
                       plural(static_cast<std::int64_t>(s->given_back_files), "pack"),
                       bytes_text(s->given_back_bytes)));
    }
    line(out, "live",
         fmt::format("{} in {} that versions name; {}", bytes_text(s->live_bytes),
                     plural(static_cast<std::int64_t>(s->live_blobs), "blob"),
                     thinned ? fmt::format("a collection could give back about {} now",
                                           bytes_text(s->dead_bytes))
                             : std::string("a format-1 archive is never collected")));
  }
  std::string retention = fmt::format("the policy would remove {} of {} versions now",
                                      archive.removable, archive.versions);
  if (s && s->freed_bytes) {
    retention += fmt::format(", freeing about {}", bytes_text(*s->freed_bytes));
  }
  line(out, "retention", retention);
  if (const auto& c = archive.last_collection) {
    line(out, "last gc",
         fmt::format("#{} {} ago ({}), took {}: {} given back, {} removed", c->collection,
                     duration(archive.collection_age + age), archive.collection_finished_at,
                     duration(static_cast<double>(c->finished_ns - c->started_ns) / 1e9),
                     bytes_text(c->bytes_reclaimed),
                     plural(static_cast<std::int64_t>(c->blobs_swept), "blob")));
  } else {
    line(out, "last gc", "none yet");
  }
  if (archive.shipping || !archive.shipping_error.empty()) {
    line(out, "shipping", shipping_text(archive, age, paint));
  }
  if (age >= 1) {
    out += fmt::format("  (read {} ago, in {}; a watch reads the archive once a minute)\n",
                       duration(age), duration(archive.read_seconds));
  }
  return out;
}

Json archive_json(const ArchiveStatus& archive, double age) {
  // The root as the queue escapes paths: any byte Linux allows, in valid JSON.
  Json doc{{"root", escape_bytes(archive.root)}, {"read_at", archive.read_at}};
  if (!archive.error.empty()) {
    doc["error"] = archive.error;
    return doc;
  }
  doc["format"] = archive.format;
  doc["read_seconds"] = archive.read_seconds;
  doc["age_seconds"] = age;
  const auto& s = archive.space;
  if (s) {
    for (const auto& [key, value] : {std::pair{"bytes", s->total_bytes()},
                                     {"content_files", s->content_files},
                                     {"content_bytes", s->content_bytes},
                                     {"given_back_files", s->given_back_files},
                                     {"given_back_bytes", s->given_back_bytes},
                                     {"catalog_bytes", s->catalog_bytes},
                                     {"blobs", s->blobs},
                                     {"live_blobs", s->live_blobs},
                                     {"live_bytes", s->live_bytes},
                                     {"collectable_bytes", s->dead_bytes}}) {
      doc[key] = value;
    }
  } else {
    doc["space_error"] = archive.unmeasured;
  }
  doc["retention"] = {{"versions", archive.versions},
                      {"versions_removed", archive.removable},
                      {"paths_removed_whole", archive.removable_paths},
                      {"bytes_freed", s && s->freed_bytes ? Json(*s->freed_bytes) : Json(nullptr)}};
  Json last = nullptr;
  if (const auto& c = archive.last_collection) {
    // Its figures as `gc --json` gives them, and when it finished.
    last = collection_json(*c);
    last["finished_at"] = archive.collection_finished_at;
    last["age_seconds"] = archive.collection_age + age;
  }
  doc["last_collection"] = std::move(last);
  Json shipping = nullptr;
  if (!archive.shipping_error.empty()) {
    shipping = {{"store", archive.store}, {"error", archive.shipping_error}};
  } else if (const auto& b = archive.shipping) {
    auto age_or_null = [&](const std::optional<std::int64_t>& at) {
      return at ? Json(age_of(archive, *at, age)) : Json(nullptr);
    };
    shipping = {{"store", archive.store},
                {"packs_pending", b->packs},
                {"bytes_pending", b->bytes},
                {"oldest_pending_age_seconds", age_or_null(b->oldest_ns)},
                {"removals_pending", b->removals},
                {"packs_shipped", b->shipped_packs},
                {"bytes_shipped", b->shipped_bytes},
                {"last_shipped_age_seconds", age_or_null(b->last_shipped_ns)},
                {"catalog_shipped_age_seconds", age_or_null(b->catalog_shipped_ns)}};
  }
  doc["shipping"] = std::move(shipping);
  return doc;
}

Json item_json(const db::ItemRecord& item) {
  return Json{{"id", item.id},
              {"op", item.op},
              {"path", item.path},
              {"dest_path", optional_text(item.dest_path)},
              {"status", item.status},
              {"priority", item.priority},
              {"size", optional_number(item.size)},
              {"enqueued_at", optional_text(item.enqueued_at)},
              {"not_before", optional_text(item.not_before)},
              {"dispatched_at", optional_text(item.dispatched_at)},
              {"started_at", optional_text(item.started_at)},
              {"finished_at", optional_text(item.finished_at)},
              {"attempts", item.attempts},
              {"error", optional_text(item.last_error)},
              {"scheduler_id", optional_number(item.scheduler_id)},
              {"batch_id", optional_number(item.batch_id)},
              {"archive_bytes", optional_number(item.archive_bytes)},
              {"cpu_us", optional_number(item.cpu_us)}};
}

std::string items_text(const std::vector<db::ItemRecord>& items, const ViewOptions& options) {
  const Paint paint{options.color};
  // When it finished, or, not finished yet, when it was queued: local time to the second.
  std::vector<std::optional<std::int64_t>> instants;
  for (const auto& item : items) {
    instants.push_back(utc_text_ns(item.finished_at.empty() ? item.enqueued_at : item.finished_at));
  }
  const LocalTimes times = local_times(instants);
  std::size_t time_width = 0;
  for (const auto& text : times.texts) time_width = std::max(time_width, text.size());
  const std::string time_header = zone_header("TIME", times);
  time_width = std::max(time_width, time_header.size());
  std::size_t attempts_width = std::string_view("ATTEMPTS").size();
  for (const auto& item : items) {
    attempts_width = std::max(attempts_width, plural(item.attempts, "attempt").size());
  }
  std::string out = fmt::format("{:<9} {:<10} {:<6} {:<{}}  {:<{}}  PATH\n", "ID", "STATUS", "OP",
                                time_header, time_width, "ATTEMPTS", attempts_width);
  for (std::size_t i = 0; i < items.size(); ++i) {
    const auto& item = items[i];
    std::string status = fmt::format("{:<10}", item.status);
    if (item.status == "FAILED") status = paint.red(status);
    if (item.status == "COMPLETED") status = paint.green(status);
    std::string what = shown_text(item.path);
    if (!item.dest_path.empty()) what += " -> " + shown_text(item.dest_path);
    out +=
        fmt::format("#{:<8} {} {:<6} {:<{}}  {:<{}}  {}", item.id, status, item.op, times.texts[i],
                    time_width, plural(item.attempts, "attempt"), attempts_width, what);
    if (item.archive_bytes && *item.archive_bytes >= 0) {
      out += fmt::format("  ({} archived)",
                         bytes_text(static_cast<std::uint64_t>(*item.archive_bytes)));
    }
    out += "\n";
    if (!item.last_error.empty())
      out += fmt::format("          {}\n", shown_text(item.last_error, 500));
  }
  return out;
}

std::string dump_json(const Json& document, int indent) {
  return document.dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace tw::cli
