#include "cli/diff_command.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <climits>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "archive/store.hpp"
#include "archive/timefmt.hpp"
#include "cli/archive_commands.hpp"
#include "cli/subcommand.hpp"
#include "common/escape.hpp"
#include "common/paths.hpp"
#include "common/time.hpp"

namespace tw::cli {
namespace {

namespace ar = tw::archive;

constexpr std::string_view kCmd = "diff";

struct DiffArgs {
  std::string from;
  std::vector<std::string> rest;  // [T2] [PATH]
  bool escaped = false;
  bool json = false;
};

int fail(std::string_view message, int code) { return command_failed(kCmd, message, code); }

// What to compare: two instants (nullopt: now) and the tree beneath a path.
struct Operands {
  std::optional<std::int64_t> from;
  std::optional<std::int64_t> to;
  std::string path = "/";
};

// An instant as restore --at reads it, or `now`.
Result<std::optional<std::int64_t>> instant(const std::string& text) {
  if (text == "now") return std::optional<std::int64_t>();
  auto ns = ar::parse_time_ns(text);
  if (!ns) return Error{fmt::format("'{}': {}", text, ns.error())};
  return std::optional<std::int64_t>(*ns);
}

// T1 [T2] [PATH]: an operand that starts with '/' or '.' is the PATH (a time never does),
// and it comes last.
Result<Operands> read_operands(const DiffArgs& args) {
  Operands operands;
  auto from = instant(args.from);
  if (!from) return Error{from.error()};
  operands.from = *from;
  bool have_to = false;
  bool have_path = false;
  for (const auto& arg : args.rest) {
    if (have_path) return Error{fmt::format("'{}' after PATH: give T1 [T2] [PATH]", arg)};
    if (arg.starts_with('/') || arg.starts_with('.')) {
      auto path = command_line_path(arg, args.escaped);
      if (!path) return Error{path.error()};
      operands.path = std::move(*path);
      have_path = true;
    } else if (!have_to) {
      auto to = instant(arg);
      if (!to) return Error{to.error() + " (a PATH starts with / or .)"};
      operands.to = *to;
      have_to = true;
    } else {
      return Error{
          fmt::format("'{}': a PATH starts with / or . (./{} for one relative to here)", arg, arg)};
    }
  }
  return operands;
}

enum class Kind { Added, Removed, Content, Metadata, Type, Renamed };
constexpr std::array kKinds = {Kind::Added,    Kind::Removed, Kind::Content,
                               Kind::Metadata, Kind::Type,    Kind::Renamed};

std::string_view name_of(Kind kind) {
  static constexpr std::array<std::string_view, kKinds.size()> kNames = {
      "added", "removed", "content", "metadata", "type", "renamed"};
  return kNames[static_cast<std::size_t>(kind)];
}

char sigil_of(Kind kind) { return "+-MmTR"[static_cast<std::size_t>(kind)]; }

// One change between the two trees. `path` is where it is at T2 (a removed path: where it
// was at T1).
struct Change {
  Change(Kind k, std::string at, const ar::Version* was, const ar::Version* is)
      : kind(k), path(std::move(at)), before(was), after(is) {}

  Kind kind = Kind::Added;
  std::string path;
  std::string from_path;                // renamed: where it was at T1
  const ar::Version* before = nullptr;  // its version at T1, if it existed then
  const ar::Version* after = nullptr;   // at T2
  std::optional<Kind> also;             // renamed: how it changed besides
  std::uint64_t entries = 0;            // a renamed folder: the entries that moved with it
};

std::string type_name(const ar::Version& v) { return std::string(file_type_name(v.mode)); }

// How `after` differs from `before` (both versions that exist): the type first, then what a
// file or link holds, then mode, owner, group and mtime. A folder's mtime alone is no
// change: it moves whenever an entry is added, removed or renamed, which has a line of its own.
std::optional<Kind> compared(const ar::Version& before, const ar::Version& after) {
  if ((before.mode & S_IFMT) != (after.mode & S_IFMT)) return Kind::Type;
  if (S_ISREG(after.mode) && (before.sha256 != after.sha256 || before.size != after.size)) {
    return Kind::Content;
  }
  if (S_ISLNK(after.mode) && before.link_target != after.link_target) return Kind::Content;
  const bool mtime = before.mtime_ns != after.mtime_ns && !S_ISDIR(after.mode);
  if ((before.mode & 07777) != (after.mode & 07777) || before.uid != after.uid ||
      before.gid != after.gid || mtime) {
    return Kind::Metadata;
  }
  return std::nullopt;
}

// Paths in the order of their components ("/a/b" before "/a-b"), as the trees are sorted.
bool component_less(std::string_view a, std::string_view b) {
  return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    const auto rank = [](char c) { return c == '/' ? 0 : static_cast<unsigned char>(c) + 1; };
    return rank(x) < rank(y);
  });
}

// Where an entry that did not exist at T1 came from, when the archive recorded it arriving
// by a rename (a MOVE version at its path, Version::moved_from); empty otherwise.
using OriginOf = std::function<std::string(const ar::EntryAt&)>;

// The renames among `changes` (sorted by path) that a renamed folder above them implies,
// and that changed in no other way, counted in the line of the top folder renamed and left
// out: the archive records a folder's rename as a MOVE of each archived path beneath it.
void fold_into_folders(std::vector<Change>& changes) {
  struct Folder {
    std::string from;  // where the renamed folder was at T1
    std::size_t line;  // the change its renamed entries count in
  };
  std::unordered_map<std::string, Folder> folders;  // by the folder's path at T2
  std::vector<bool> folded(changes.size(), false);
  for (std::size_t i = 0; i < changes.size(); ++i) {
    const Change& c = changes[i];
    if (c.kind != Kind::Renamed) continue;
    std::size_t line = i;
    for (std::string up = parent_path(c.path); up != "/"; up = parent_path(up)) {
      const auto found = folders.find(up);
      if (found == folders.end()) continue;
      // Only the nearest renamed folder above it can imply its rename.
      if (!c.also && c.from_path == found->second.from + c.path.substr(up.size())) {
        line = found->second.line;
      }
      break;
    }
    folded[i] = line != i;
    if (folded[i]) ++changes[line].entries;
    if (c.after->is_directory()) folders[c.path] = Folder{c.from_path, line};
  }
  std::vector<Change> shown;
  for (std::size_t i = 0; i < changes.size(); ++i) {
    if (!folded[i]) shown.push_back(std::move(changes[i]));
  }
  changes = std::move(shown);
}

// The changes from tree `before` to tree `after`, sorted by path.
std::vector<Change> compare_trees(const ar::TreeAt& before, const ar::TreeAt& after,
                                  const OriginOf& origin_of) {
  std::unordered_map<std::string_view, const ar::Version*> old_of;
  std::unordered_map<std::string_view, const ar::Version*> new_of;
  for (const auto& e : before.entries) old_of.emplace(e.path, &e.version);
  for (const auto& e : after.entries) new_of.emplace(e.path, &e.version);
  std::unordered_map<std::string_view, const ar::Version*> removed;
  for (const auto& e : before.entries) {
    if (!new_of.contains(e.path)) removed.emplace(e.path, &e.version);
  }
  std::vector<Change> changes;
  for (const auto& e : after.entries) {
    if (const auto old = old_of.find(e.path); old != old_of.end()) {
      if (const auto kind = compared(*old->second, e.version)) {
        changes.emplace_back(*kind, e.path, old->second, &e.version);
      }
      continue;
    }
    const std::string origin = origin_of(e);
    const auto gone = removed.find(origin);
    if (origin.empty() || gone == removed.end()) {
      changes.emplace_back(Kind::Added, e.path, nullptr, &e.version);
      continue;
    }
    Change& renamed = changes.emplace_back(Kind::Renamed, e.path, gone->second, &e.version);
    renamed.from_path = origin;
    renamed.also = compared(*gone->second, e.version);
    removed.erase(gone);
  }
  for (const auto& e : before.entries) {
    if (removed.contains(e.path)) changes.emplace_back(Kind::Removed, e.path, &e.version, nullptr);
  }
  std::stable_sort(changes.begin(), changes.end(),
                   [](const Change& a, const Change& b) { return component_less(a.path, b.path); });
  fold_into_folders(changes);
  return changes;
}

// Where `entry` (absent at `from`) came from, read from its history when its version at T2
// is not the MOVE itself: its life up to T2 began with a MOVE archived after `from`.
ar::Expected<std::string> origin_in_history(const ar::Store& store, const ar::EntryAt& entry,
                                            std::optional<std::int64_t> from) {
  const ar::Version& v = entry.version;
  if (v.op == Op::Move && !v.moved_from.empty()) return v.moved_from;
  if (v.number <= 1) return std::string();  // its first version ever: no rename
  TRY_ASSIGN(const auto history, store.versions(entry.path));
  const std::int64_t since = from.value_or(INT64_MAX);
  std::size_t first = history.size();
  for (std::size_t i = 0; i < history.size() && history[i].number <= v.number; ++i) {
    if (!history[i].exists()) {
      first = history.size();
    } else if (first == history.size()) {
      first = i;
    }
  }
  if (first == history.size()) return std::string();
  const ar::Version& began = history[first];
  if (began.op != Op::Move || began.archived_at_ns <= since) return std::string();
  return began.moved_from;
}

std::string how_changed(Kind kind, const ar::Version& before, const ar::Version& after) {
  if (kind == Kind::Type) return fmt::format("{} -> {}", type_name(before), type_name(after));
  if (kind == Kind::Content && S_ISLNK(after.mode)) {
    return fmt::format("target {} -> {}", shown_path(before.link_target),
                       shown_path(after.link_target));
  }
  if (kind == Kind::Content) return fmt::format("size {} -> {}", before.size, after.size);
  std::vector<std::string> parts;
  if ((before.mode & 07777) != (after.mode & 07777)) {
    parts.push_back(fmt::format("mode {:04o} -> {:04o}", before.mode & 07777, after.mode & 07777));
  }
  if (before.uid != after.uid)
    parts.push_back(fmt::format("owner {} -> {}", before.uid, after.uid));
  if (before.gid != after.gid)
    parts.push_back(fmt::format("group {} -> {}", before.gid, after.gid));
  if (before.mtime_ns != after.mtime_ns && !S_ISDIR(after.mode)) {
    parts.push_back(fmt::format("mtime {} -> {}", ar::format_time_ns(before.mtime_ns),
                                ar::format_time_ns(after.mtime_ns)));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

// For a person: the sigil, the path (paths shown with their display controls escaped), and
// what changed in brackets.
std::string text_line(const Change& c) {
  std::string sigil(1, sigil_of(c.kind));
  std::string shown = shown_path(c.path);
  std::vector<std::string> notes;
  if (c.kind == Kind::Renamed) {
    shown = shown_path(c.from_path) + " -> " + shown;
    if (c.also) {
      sigil += sigil_of(*c.also);
      notes.push_back(how_changed(*c.also, *c.before, *c.after));
    }
    if (c.entries > 0) {
      notes.push_back(
          fmt::format("with {} entr{} beneath", c.entries, c.entries == 1 ? "y" : "ies"));
    }
  } else if (c.before != nullptr && c.after != nullptr) {
    notes.push_back(how_changed(c.kind, *c.before, *c.after));
  }
  if (notes.empty()) return fmt::format("{:<2} {}\n", sigil, shown);
  return fmt::format("{:<2} {}  ({})\n", sigil, shown, fmt::join(notes, "; "));
}

nlohmann::ordered_json version_json(const ar::Version& v) {
  nlohmann::ordered_json j = {{"type", type_name(v)},
                              {"version", v.number},
                              {"archived_at", ar::format_time_ns(v.archived_at_ns)},
                              {"size", v.size}};
  if (S_ISREG(v.mode)) j["sha256"] = v.sha256;
  if (S_ISLNK(v.mode)) j["link_target"] = escape_bytes(v.link_target);
  j["mode"] = fmt::format("{:04o}", v.mode & 07777);
  j["uid"] = v.uid;
  j["gid"] = v.gid;
  j["mtime"] = ar::format_time_ns(v.mtime_ns);
  return j;
}

// Paths in the exact escaped form (escape_bytes), as every --json output gives them.
nlohmann::ordered_json json_line(const Change& c) {
  nlohmann::ordered_json j = {{"kind", name_of(c.kind)}, {"path", escape_bytes(c.path)}};
  if (c.kind == Kind::Renamed) {
    j["from_path"] = escape_bytes(c.from_path);
    if (c.also) j["changed"] = name_of(*c.also);
    j["entries"] = c.entries;
  }
  if (c.before != nullptr) j["before"] = version_json(*c.before);
  if (c.after != nullptr) j["after"] = version_json(*c.after);
  return j;
}

// What was compared, as the summary and the --json document name it.
struct Compared {
  std::string from;  // the instants, ISO-8601 UTC
  std::string to;
  std::string path;  // raw
};

std::string summary(const std::vector<Change>& changes, const Compared& what) {
  const std::string span =
      fmt::format("from {} to {} beneath {}", what.from, what.to, shown_path(what.path));
  if (changes.empty()) return "no changes " + span;
  std::vector<std::string> counts;
  for (const Kind kind : kKinds) {
    const auto n = std::count_if(changes.begin(), changes.end(),
                                 [&](const Change& c) { return c.kind == kind; });
    if (n > 0) counts.push_back(fmt::format("{} {}", n, name_of(kind)));
  }
  return fmt::format("{} change{} {}: {}", changes.size(), changes.size() == 1 ? "" : "s", span,
                     fmt::join(counts, ", "));
}

nlohmann::ordered_json json_document(const std::vector<Change>& changes, const Compared& what) {
  nlohmann::ordered_json counts = nlohmann::ordered_json::object();
  for (const Kind kind : kKinds) {
    counts[std::string(name_of(kind))] = std::count_if(
        changes.begin(), changes.end(), [&](const Change& c) { return c.kind == kind; });
  }
  nlohmann::ordered_json lines = nlohmann::ordered_json::array();
  for (const auto& c : changes) lines.push_back(json_line(c));
  return {{"from", what.from},
          {"to", what.to},
          {"path", escape_bytes(what.path)},
          {"counts", std::move(counts)},
          {"changes", std::move(lines)}};
}

// Nothing archived at or beneath `path`, ever: most likely a mistyped PATH.
bool never_archived(const ar::Store& store, const std::string& path) {
  if (path == "/") return false;
  auto history = store.versions(path);
  auto children = store.children(path);
  return history && history->empty() && children && children->empty();
}

int run_diff(const Config& config, const DiffArgs& args) {
  auto operands = read_operands(args);
  if (!operands) return fail(operands.error(), 2);
  auto store = open_store(config);
  if (!store) return fail(store.error(), 2);
  if (never_archived(*store, operands->path)) {
    return fail(fmt::format("{} is not in the archive", shown_path(operands->path)), 2);
  }
  const std::int64_t now = now_ns();
  const Compared what{ar::format_time_ns(operands->from.value_or(now)),
                      ar::format_time_ns(operands->to.value_or(now)), operands->path};
  auto before = store->tree_at(operands->path, operands->from);
  if (!before) return fail(before.error(), 1);
  auto after = store->tree_at(operands->path, operands->to);
  if (!after) return fail(after.error(), 1);
  std::vector<std::string> problems = before->problems;
  problems.insert(problems.end(), after->problems.begin(), after->problems.end());
  const auto changes = compare_trees(*before, *after, [&](const ar::EntryAt& entry) {
    auto origin = origin_in_history(*store, entry, operands->from);
    if (origin) return *origin;
    problems.push_back(origin.error());
    return std::string();
  });
  if (args.json) {
    std::cout << json_document(changes, what)
                     .dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace)
              << "\n";
  } else {
    for (const auto& c : changes) std::cout << text_line(c);
    std::cout << summary(changes, what) << "\n";
  }
  std::cout.flush();
  for (const auto& problem : problems) fail(problem, 1);
  return problems.empty() ? 0 : 1;
}

}  // namespace

void add_diff_command(CLI::App& app, Config& config, std::function<int()>& run) {
  auto args = std::make_shared<DiffArgs>();
  auto* diff = add_archive_subcommand(
      app, "diff", "what changed in the archive between two instants (T2 defaults to now)");
  diff->add_option("T1", args->from,
                   "the earlier instant, as restore --at takes it (ISO-8601: 2026-11-22T10:00:00 "
                   "local, ...Z UTC; Unix seconds), or now")
      ->required();
  diff->add_option("T2_PATH", args->rest,
                   "[T2] [PATH]: the later instant (default: now), then the file or folder to "
                   "compare (default: /, every source); PATH starts with / or . (./notes)")
      ->expected(0, 2);
  diff->add_flag("--escaped", args->escaped, "PATH is given in the escaped form (%XX)");
  diff->add_flag("--json", args->json, "print one JSON document instead of lines");
  diff->footer(
      "Each line: + added, - removed, M content, m metadata (mode, owner, group, mtime), T type,\n"
      "R renamed (old -> new; RM, Rm, RT: renamed and changed). A renamed folder is one line,\n"
      "with the entries that moved with it counted; a folder's mtime alone is not a change.\n"
      "Two states are compared, not the edits between them: a file deleted and made again\n"
      "shows as changed, or not at all when it came back the same.\n"
      "Exit status: 0 with or without changes, 1 when part of a tree could not be read, 2 bad\n"
      "usage.\n"
      "Example: timewarp diff 2026-11-26T10:00 now ~/notes\n"
      "         timewarp diff 2026-11-26 2026-11-27 --json");
  run_when_parsed(*diff, run, [&config, args] { return run_diff(config, *args); });
}

}  // namespace tw::cli
