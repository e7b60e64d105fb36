// The requests of the line protocol over the layout seam (archive/reconcile.hpp).
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <functional>
#include <memory>
#include <unordered_set>

#include <fmt/format.h>

#include "archive/paths.hpp"
#include "archive/reconcile.hpp"
#include "common/paths.hpp"
#include "common/time.hpp"

namespace tw::archive {
namespace {

// How often a request looks again when the file changed while it was being read, before
// it answers FAILED RETRY.
constexpr int kLooks = 3;

const char* type_name(mode_t mode) {
  if (S_ISFIFO(mode)) return "fifo";
  if (S_ISSOCK(mode)) return "socket";
  if (S_ISCHR(mode)) return "character device";
  if (S_ISBLK(mode)) return "block device";
  return "unknown type";
}

Fault changed_fault(const std::string& name) {
  Fault fault = retry(fmt::format("changed while being read: {}", name));
  fault.changed = true;
  return fault;
}

// `path` at or beneath `from`, rewritten to lie at or beneath `to`.
std::string rebase(const std::string& path, const std::string& from, const std::string& to) {
  return to + path.substr(from == "/" ? 0 : from.size());
}

// `each` over `items` in order, summing the bytes stored; stops at the first fault or when
// `cancelled` says so.
template <typename Items, typename Each>
Expected<std::uint64_t> sum_each(const Items& items, const std::function<bool()>& cancelled,
                                 Each each) {
  std::uint64_t bytes = 0;
  for (const auto& item : items) {
    if (cancelled && cancelled()) return retry("cancelled");
    TRY_ASSIGN(const std::uint64_t done, each(item));
    bytes += done;
  }
  return bytes;
}

// A SCAN's answer for the faults of its entries: the one fault, or a summary naming the
// first (RETRY when any may pass).
struct EntryFaults {
  std::optional<Fault> first;
  std::size_t count = 0;
  bool any_retry = false;

  void add(const Fault& fault) {
    ++count;
    any_retry = any_retry || fault.outcome == Outcome::FailedRetry;
    if (!first) first = fault;
  }
  Fault summary(const std::string& dir) const {
    if (count == 1) return *first;
    Fault out = *first;
    out.outcome = any_retry ? Outcome::FailedRetry : Outcome::FailedPermanent;
    out.message = fmt::format("{} entries of {} not archived; the first: {}", count,
                              shown_path(dir), first->message);
    return out;
  }
};

}  // namespace

Expected<std::uint64_t> Reconciler::append(const std::string& path,
                                           const std::optional<Version>& latest, Version v) {
  v.number = latest ? latest->number + 1 : 1;
  // Archive times never decrease along a history (a clock stepping back is clamped).
  const std::int64_t now = hooks_.now ? hooks_.now() : now_ns();
  v.archived_at_ns = std::max(now, latest ? latest->archived_at_ns : INT64_MIN);
  return layout_.commit(path, v);
}

std::optional<Version> Reconciler::taken_over(const Version& now, Op hint, const Version* live,
                                              const Version* follow) const {
  // The version a confirmed rename came from, or for a STAT the name's own latest one, when
  // its content is the same by `difference` (size and mtime).
  const Version* reuse = follow != nullptr ? follow : hint == Op::Stat ? live : nullptr;
  if (reuse != nullptr && difference(reuse, now) != Difference::Content &&
      layout_.content_available(*reuse)) {
    Version v = now;
    v.sha256 = reuse->sha256;
    v.chunks = reuse->chunks;
    v.op = Op::Stat;
    return v;
  }
  // Every change this request stands for was queued before the live version's content was
  // read, and the file is as that read left it: that read has seen them, so nothing is due
  // (a change made after the read began was queued after it, and its own request reads the
  // file; FORMAT.md, "Reads that answer later requests").
  if (reuse == nullptr && live != nullptr && live->is_file() && order_.newest > 0 &&
      live->read_after >= order_.newest && live->dev == now.dev && live->ino == now.ino &&
      difference(live, now) == Difference::None && layout_.content_available(*live)) {
    Version v = now;
    v.sha256 = live->sha256;
    v.chunks = live->chunks;
    v.read_after = live->read_after;
    return v;
  }
  return std::nullopt;
}

Expected<Version> Reconciler::observe(const std::string& path, const SourceLook& look, Op hint,
                                      const Version* live, const Version* follow,
                                      std::uint64_t& stored_bytes) {
  // A directory version records its own metadata, not its entries.
  Version v = version_of_stat(look.st);
  if (look.is_directory()) {
    if (live != nullptr && live->is_directory()) v.op = Op::Stat;
    return v;
  }
  if (look.is_symlink()) {
    TRY_ASSIGN(v.link_target, read_looked_link(look, shown_path(path)));
    v.size = v.link_target.size();
    if (live != nullptr && live->is_symlink() && live->link_target == v.link_target) {
      v.op = Op::Stat;
    }
    return v;
  }
  if (auto reused = taken_over(v, hint, live, follow)) return std::move(*reused);
  return read_content(path, look, live, follow, stored_bytes);
}

Expected<Version> Reconciler::read_content(const std::string& path, const SourceLook& look,
                                           const Version* live, const Version* follow,
                                           std::uint64_t& stored_bytes) {
  const std::string name = shown_path(path);
  UniqueFd fd = open_looked(look, false);
  if (!fd) {
    const int err = errno;
    if (err == ENOENT || err == ELOOP || err == ENOTDIR) return changed_fault(name);
    return errno_fault(err, Side::Source, fmt::format("opening {}", name));
  }
  struct stat before {};
  if (::fstat(fd.get(), &before) != 0) {
    return errno_fault(errno, Side::Source, fmt::format("reading {}", name));
  }
  if (!S_ISREG(before.st_mode) || before.st_ino != look.st.st_ino ||
      before.st_dev != look.st.st_dev) {
    return changed_fault(name);
  }
  Version v = version_of_stat(before);
  v.read_after = order_.horizon;  // the content is read below, after the request came
  // The file must be the same, unchanged, at the same name after the read.
  const auto unchanged = [&]() -> Done {
    if (hooks_.after_content_read) hooks_.after_content_read();
    struct stat after {};
    if (::fstat(fd.get(), &after) != 0 || !same_file_state(before, after)) {
      return changed_fault(name);
    }
    TRY_ASSIGN(const auto again, look_at(path));
    if (!again.present || again.st.st_ino != before.st_ino || again.st.st_dev != before.st_dev) {
      return changed_fault(name);
    }
    return Ok{};
  };
  // The latest version's content by `difference` (size and mtime): hash first, store only
  // if new.
  if (difference(live, v) != Difference::Content) {
    TRY_ASSIGN(const std::string digest, hash_source(fd.get(), v.size, name, hooks_.cancelled));
    TRY(unchanged());
    if (digest == live->sha256 && layout_.content_available(*live)) {
      v.sha256 = digest;
      v.chunks = live->chunks;
      return v;
    }
    if (::lseek(fd.get(), 0, SEEK_SET) != 0) {
      return errno_fault(errno, Side::Source, fmt::format("reading {}", name));
    }
  }
  // Cut where the content this one grew from was cut: the rename's source, else the path's
  // latest version (an append stores the appended bytes).
  TRY_ASSIGN(auto stored,
             layout_.store_content(fd.get(), v.size, name, follow != nullptr ? follow : live));
  TRY(unchanged());
  v.sha256 = std::move(stored.sha256);
  v.chunks = std::move(stored.chunks);
  stored_bytes += stored.bytes_added;
  return v;
}

Expected<Reconciler::Committed> Reconciler::commit_look(const std::string& path,
                                                        const std::optional<Version>& latest,
                                                        const SourceLook& look, Op hint,
                                                        const Version* follow,
                                                        const std::string& follow_from) {
  Committed out;
  const Version* live = latest && latest->exists() ? &*latest : nullptr;
  if (!look.archivable()) {
    out.found = look.present ? Found::Other : Found::Absent;
    if (look.pseudo_filesystem) {
      out.refused = permanent(fmt::format("on the pseudo filesystem {}, not data: {}",
                                          *look.pseudo_filesystem, shown_path(path)));
    } else if (look.present) {
      out.refused = permanent(fmt::format("not a regular file, symlink or directory ({}): {}",
                                          type_name(look.st.st_mode), shown_path(path)));
    }
    if (live == nullptr) return out;  // never archived, or gone already
    Version tombstone;
    tombstone.op = Op::Delete;
    TRY_ASSIGN(const std::uint64_t saved, append(path, latest, std::move(tombstone)));
    out.bytes += saved;
    return out;
  }
  out.found = look.is_directory() ? Found::Directory : Found::Other;
  TRY_ASSIGN(Version version, observe(path, look, hint, live, follow, out.bytes));
  if (follow != nullptr) {
    version.op = Op::Move;
    version.moved_from = follow_from;
  }
  if (difference(live, version) == Difference::None) return out;  // nothing new to store
  TRY_ASSIGN(const std::uint64_t saved, append(path, latest, std::move(version)));
  out.bytes += saved;
  return out;
}

Expected<Reconciler::Committed> Reconciler::settle(const std::string& path, Op hint) {
  TRY_ASSIGN(const PathLock lock, layout_.lock(path));
  for (int attempt = 1;; ++attempt) {
    TRY_ASSIGN(const SourceLook look, look_at(path));
    // The latest version and what lies beneath, in one read (settle_structure's question:
    // committing this path adds nothing beneath it).
    TRY_ASSIGN(const PathState state, layout_.path_state(path));
    auto done = commit_look(path, state.latest, look, hint, nullptr, {});
    if (done) done->children = state.children;
    if (!done && done.fault().changed && attempt < kLooks && !cancelled()) continue;
    return done;
  }
}

Expected<std::uint64_t> Reconciler::settle_structure(const std::string& path, bool directory,
                                                     std::optional<bool> beneath) {
  // Cheap when nothing was ever archived beneath the path.
  if (!beneath) {
    TRY_ASSIGN(beneath, layout_.has_children(path));
  }
  if (!*beneath) return std::uint64_t{0};
  if (!directory) {
    TRY_ASSIGN(const auto paths, layout_.paths_within(path));
    return sum_each(paths, hooks_.cancelled, [&](const std::string& p) -> Expected<std::uint64_t> {
      if (p == path) return std::uint64_t{0};
      TRY_ASSIGN(const Committed done, settle(p, Op::Delete));
      return done.bytes;
    });
  }
  TRY_ASSIGN(const SourceLook look, look_at(path));
  // No longer a directory: the request that follows this change settles what it held.
  if (!look.is_directory()) return std::uint64_t{0};
  TRY_ASSIGN(const auto names, list_looked(look, shown_path(path)));
  TRY_ASSIGN(auto children, layout_.children(path));
  const std::unordered_set<std::string> present(names.begin(), names.end());
  std::erase_if(children,
                [&](const std::string& child) { return present.count(base_name(child)) > 0; });
  return sum_each(children, hooks_.cancelled,
                  [&](const std::string& child) { return reconcile_path(child, Op::Delete); });
}

Expected<std::uint64_t> Reconciler::reconcile_path(const std::string& path, Op hint) {
  TRY_ASSIGN(const Committed done, settle(path, hint));
  TRY_ASSIGN(const std::uint64_t structure,
             settle_structure(path, done.found == Found::Directory, done.children));
  if (done.refused) return *done.refused;
  return done.bytes + structure;
}

Expected<std::uint64_t> Reconciler::reconcile(std::string_view raw, Op hint) {
  TRY_ASSIGN(const std::string path, normalize_path(raw));
  return reconcile_path(path, hint);
}

Expected<std::uint64_t> Reconciler::scan_entry(const std::string& entry) {
  TRY_ASSIGN(const Committed settled, settle(entry, Op::Stat));
  // A fifo, socket or device is not archived, and not reported: a scan queues none. A
  // directory now (made since the listing) is its own request's.
  if (settled.found == Found::Directory) return settled.bytes;
  TRY_ASSIGN(const std::uint64_t structure, settle_structure(entry, false, settled.children));
  return settled.bytes + structure;
}

Expected<std::uint64_t> Reconciler::scan(std::string_view raw, const Filter* filter) {
  TRY_ASSIGN(const std::string path, normalize_path(raw));
  TRY_ASSIGN(std::uint64_t bytes, reconcile_path(path, Op::Update));
  TRY_ASSIGN(const SourceLook look, look_at(path));
  // No longer a directory: the reconcile above has recorded what is there.
  if (!look.is_directory()) return bytes;
  TRY_ASSIGN(const auto names, list_looked(look, shown_path(path)));
  UniqueFd dir = open_looked(look, true);
  if (!dir) return errno_fault(errno, Side::Source, fmt::format("listing {}", shown_path(path)));
  // Each entry but the subdirectories (each is its own request's, with what it holds) as a
  // STAT: content is read only where size or mtime differ from the latest version. An entry
  // gone since the listing is looked at all the same (a tombstone if it was archived). A
  // fault on one entry does not stop the others.
  const auto left_alone = [&](const std::string& name) {
    struct stat st {};
    if (::fstatat(dir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return false;
    return S_ISDIR(st.st_mode) || (filter != nullptr && filter->too_big(st));
  };
  EntryFaults faults;
  for (const auto& name : names) {
    if (cancelled()) return retry("cancelled");
    const std::string entry = join_path(path, name);
    if ((filter != nullptr && filter->excluded(entry)) || left_alone(name)) continue;
    if (auto done = scan_entry(entry); done) {
      bytes += *done;
    } else {
      faults.add(done.fault());
    }
  }
  if (faults.first) return faults.summary(path);
  return bytes;
}

Expected<std::uint64_t> Reconciler::move(std::string_view raw_from, std::string_view raw_to) {
  TRY_ASSIGN(const std::string from, normalize_path(raw_from));
  auto normalized_to = normalize_path(raw_to);
  if (!normalized_to) return in_context("destination", normalized_to.fault());
  const std::string& to = *normalized_to;
  // Nothing to follow (or a rename no filesystem allows): both names reconciled.
  const auto both = [&]() -> Expected<std::uint64_t> {
    TRY_ASSIGN(const std::uint64_t a, reconcile_path(from, Op::Update));
    if (from == to) return a;
    TRY_ASSIGN(const std::uint64_t b, reconcile_path(to, Op::Update));
    return a + b;
  };
  if (from == to || path_within(to, from) || path_within(from, to)) return both();
  TRY_ASSIGN(const auto paths, layout_.paths_within(from));
  if (paths.empty()) return both();

  std::uint64_t bytes = 0;
  std::vector<std::pair<std::string, Found>> arrived;
  std::optional<Fault> refused;
  for (const auto& p : paths) {
    if (cancelled()) return retry("cancelled");
    const std::string q = rebase(p, from, to);
    TRY_ASSIGN(const Committed step, move_step(p, q));
    bytes += step.bytes;
    if (step.refused && !refused) refused = step.refused;
    arrived.emplace_back(q, step.found);
  }
  // What the new name held before the rename and holds no more.
  auto structure =
      arrived.front().second != Found::Directory
          ? settle_structure(to, false)
          : sum_each(arrived, hooks_.cancelled, [&](const std::pair<std::string, Found>& a) {
              return settle_structure(a.first, a.second == Found::Directory);
            });
  if (!structure) return structure.fault();
  if (refused) return *refused;
  return bytes + *structure;
}

Expected<Reconciler::Committed> Reconciler::move_step(const std::string& p, const std::string& q) {
  // Both locks, in rank order so two movers cannot deadlock.
  const bool p_first = layout_.lock_rank(p) < layout_.lock_rank(q);
  TRY_ASSIGN(const PathLock first, layout_.lock(p_first ? p : q));
  TRY_ASSIGN(const PathLock second, layout_.lock(p_first ? q : p));
  for (int attempt = 1;; ++attempt) {
    auto done = move_look(p, q);
    if (!done && done.fault().changed && attempt < kLooks && !cancelled()) continue;
    return done;
  }
}

Expected<Reconciler::Committed> Reconciler::move_look(const std::string& p, const std::string& q) {
  TRY_ASSIGN(const SourceLook look_p, look_at(p));
  TRY_ASSIGN(const SourceLook look_q, look_at(q));
  TRY_ASSIGN(const std::optional<Version> hp, layout_.latest(p));
  TRY_ASSIGN(const std::optional<Version> hq, layout_.latest(q));
  const Version* lp = hp && hp->exists() ? &*hp : nullptr;
  // The history follows the file only when the new name holds the very file archived under
  // the old one (same device and inode) and the old name no longer exists.
  const bool follow = lp != nullptr && lp->ino != 0 && !look_p.present && look_q.present &&
                      lp->dev == static_cast<std::uint64_t>(look_q.st.st_dev) &&
                      lp->ino == static_cast<std::uint64_t>(look_q.st.st_ino) &&
                      (lp->mode & S_IFMT) == (look_q.st.st_mode & S_IFMT);
  if (!follow) {
    TRY_ASSIGN(const Committed old_name, commit_look(p, hp, look_p, Op::Update, nullptr, {}));
    TRY_ASSIGN(Committed done, commit_look(q, hq, look_q, Op::Update, nullptr, {}));
    done.bytes += old_name.bytes;
    return done;
  }
  TRY_ASSIGN(Committed done, commit_look(q, hq, look_q, Op::Update, lp, p));
  Version left;
  left.op = Op::Move;
  left.moved_to = q;
  TRY_ASSIGN(const std::uint64_t saved, append(p, hp, std::move(left)));
  done.bytes += saved;
  return done;
}

}  // namespace tw::archive
