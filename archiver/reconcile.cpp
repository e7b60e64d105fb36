// The requests of the line protocol. None is applied as a blind edit: each one makes the
// archive's latest state of its path, and of what is archived beneath it, equal to what
// the disk holds now (DESIGN.md, "Convergence"; FORMAT.md, "Operations").
//
// Locking: a path's look at the disk and its commit happen under that path's lock, so a
// stale observation never lands over a newer one. A thread holds one lock at a time, or
// the two of a MOVE step (taken in key order), and never takes a lock while holding
// another otherwise, so two archivers cannot deadlock whatever their requests say.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <memory>

#include <fmt/format.h>

#include "archiver/paths.hpp"
#include "archiver/sha256.hpp"
#include "archiver/store_impl.hpp"
#include "archiver/timefmt.hpp"
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

}  // namespace

Expected<std::uint64_t> Store::Impl::append_and_save(History& history, Version v) {
  const Version* last = history.latest();
  v.number = last != nullptr ? last->number + 1 : 1;
  // Archive times never decrease along a history (a clock stepping back is clamped).
  v.archived_at_ns = std::max(now_ns(), last != nullptr ? last->archived_at_ns : INT64_MIN);
  history.versions.push_back(std::move(v));
  return save_history(history);
}

Expected<Version> Store::Impl::observe(const std::string& path, const SourceLook& look, Op hint,
                                       const Version* live, const Version* follow,
                                       std::uint64_t& object_bytes) {
  const std::string name = shown_path(path);
  // A directory version records its own metadata, not its entries.
  Version v = version_of_stat(look.st);
  if (look.is_directory()) {
    if (live != nullptr && live->is_directory()) v.op = Op::Stat;
    return v;
  }
  if (look.is_symlink()) {
    auto target = read_looked_link(look, name);
    if (!target) return target.fault();
    v.link_target = std::move(*target);
    v.size = v.link_target.size();
    if (live != nullptr && live->is_symlink() && live->link_target == v.link_target)
      v.op = Op::Stat;
    return v;
  }
  // Content that may be taken over without reading the file: the version a confirmed
  // rename came from, or for a STAT the name's own latest one, when its content is the
  // same by `difference` (size and mtime).
  const Version* reuse = follow != nullptr ? follow : hint == Op::Stat ? live : nullptr;
  if (reuse != nullptr && difference(reuse, v) != Difference::Content &&
      content_available(*reuse)) {
    v.sha256 = reuse->sha256;
    v.chunks = reuse->chunks;
    v.op = Op::Stat;
    return v;
  }
  // Every change this request stands for was queued before the live version's content
  // was read, and the file is as that read left it: that read has seen them, so nothing
  // is due (a change made after the read began was queued after it, and its own request
  // reads the file; FORMAT.md, "Reads that answer later requests").
  if (reuse == nullptr && live != nullptr && live->is_file() && order.newest > 0 &&
      live->read_after >= order.newest && live->dev == v.dev && live->ino == v.ino &&
      difference(live, v) == Difference::None && content_available(*live)) {
    v.sha256 = live->sha256;
    v.chunks = live->chunks;
    v.read_after = live->read_after;
    return v;
  }
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
  v = version_of_stat(before);
  v.read_after = order.horizon;  // the content is read below, after the request came
  // The file must be the same, unchanged, at the same name after the read.
  const auto unchanged = [&]() -> Done {
    if (hooks.after_content_read) hooks.after_content_read();
    struct stat after {};
    if (::fstat(fd.get(), &after) != 0 || !same_file_state(before, after)) {
      return changed_fault(name);
    }
    auto again = look_at(path);
    if (!again) return again.fault();
    if (!again->present || again->st.st_ino != before.st_ino || again->st.st_dev != before.st_dev) {
      return changed_fault(name);
    }
    return Ok{};
  };
  // The latest version's content by `difference` (size and mtime): hash first, compress
  // only if new.
  if (difference(live, v) != Difference::Content) {
    auto hashed = objects.hash(fd.get(), v.size, name);
    if (!hashed) return hashed.fault();
    if (auto same = unchanged(); !same) return same.fault();
    if (hashed->sha256 == live->sha256 && content_available(*live)) {
      v.sha256 = hashed->sha256;
      v.chunks = live->chunks;
      return v;
    }
    if (::lseek(fd.get(), 0, SEEK_SET) != 0) {
      return errno_fault(errno, Side::Source, fmt::format("reading {}", name));
    }
  }
  // Cut where the content this one grew from was cut: the rename's source, else the
  // path's latest version (an append stores the appended bytes).
  auto stored = store_content(fd.get(), v.size, name, v.chunks, follow != nullptr ? follow : live);
  if (!stored) return stored.fault();
  if (auto same = unchanged(); !same) return same.fault();
  v.sha256 = stored->sha256;
  object_bytes += stored->bytes_added;
  return v;
}

Expected<Store::Impl::Committed> Store::Impl::commit_look(const std::string& path, History& history,
                                                          const SourceLook& look, Op hint,
                                                          const Version* follow,
                                                          const std::string& follow_from) {
  Committed out;
  const Version* live = history.live();
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
    auto saved = append_and_save(history, std::move(tombstone));
    if (!saved) return saved.fault();
    out.bytes += *saved;
    return out;
  }
  out.found = look.is_directory() ? Found::Directory : Found::Other;
  auto version = observe(path, look, hint, live, follow, out.bytes);
  if (!version) return version.fault();
  if (follow != nullptr) {
    version->op = Op::Move;
    version->moved_from = follow_from;
  }
  if (difference(live, *version) == Difference::None) return out;  // nothing new to store
  auto node = ensure_node(path, true);
  if (!node) return node.fault();
  out.bytes += *node;
  auto saved = append_and_save(history, std::move(*version));
  if (!saved) return saved.fault();
  out.bytes += *saved;
  if (auto linked = finish_link(path); !linked) return linked.fault();
  return out;
}

Expected<Store::Impl::Committed> Store::Impl::settle(const std::string& path, Op hint) {
  auto lock = lock_node(path);
  if (!lock) return lock.fault();
  for (int attempt = 1;; ++attempt) {
    auto look = look_at(path);
    if (!look) return look.fault();
    auto history = load_history(path);
    if (!history) return history.fault();
    auto done = commit_look(path, *history, *look, hint, nullptr, {});
    if (!done && done.fault().changed && attempt < kLooks && !cancelled()) continue;
    lock->drop_if_unused(node_of(path));
    return done;
  }
}

Expected<std::uint64_t> Store::Impl::settle_structure(const std::string& path, bool directory) {
  // Cheap when nothing was ever archived beneath the path.
  auto any = has_children(path);
  if (!any) return any.fault();
  if (!*any) return std::uint64_t{0};
  if (!directory) {
    auto paths = paths_within(path);
    if (!paths) return retry("archive: " + paths.error());
    return sum_each(*paths, [&](const std::string& p) -> Expected<std::uint64_t> {
      if (p == path) return std::uint64_t{0};
      auto done = settle(p, Op::Delete);
      if (!done) return done.fault();
      return done->bytes;
    });
  }
  auto look = look_at(path);
  if (!look) return look.fault();
  // No longer a directory: the request that follows this change settles what it held.
  if (!look->is_directory()) return std::uint64_t{0};
  auto names = list_looked(*look, shown_path(path));
  if (!names) return names.fault();
  auto gone = children_except(path, *names);
  if (!gone) return retry("archive: " + gone.error());
  return sum_each(*gone, [&](const std::string& child) { return reconcile_path(child, Op::Delete); });
}

Expected<std::uint64_t> Store::Impl::reconcile_path(const std::string& path, Op hint) {
  auto done = settle(path, hint);
  if (!done) return done.fault();
  std::uint64_t bytes = done->bytes;
  auto structure = settle_structure(path, done->found == Found::Directory);
  if (!structure) return structure.fault();
  bytes += *structure;
  if (done->refused) return *done->refused;
  return bytes;
}

Expected<std::uint64_t> Store::Impl::reconcile(std::string_view raw, Op hint) {
  auto path = normalize_path(raw);
  if (!path) return permanent(path.error());
  return reconcile_path(*path, hint);
}

Expected<std::uint64_t> Store::Impl::scan(std::string_view raw, const Filter* filter) {
  auto path = normalize_path(raw);
  if (!path) return permanent(path.error());
  auto own = reconcile_path(*path, Op::Update);
  if (!own) return own.fault();
  std::uint64_t bytes = *own;
  auto look = look_at(*path);
  if (!look) return look.fault();
  // No longer a directory: the reconcile above has recorded what is there.
  if (!look->is_directory()) return bytes;
  auto names = list_looked(*look, shown_path(*path));
  if (!names) return names.fault();
  UniqueFd dir = open_looked(*look, true);
  if (!dir) return errno_fault(errno, Side::Source, fmt::format("listing {}", shown_path(*path)));
  // Each entry but the subdirectories (each is its own request's, with what it holds) as a
  // STAT: content is read only where size or mtime differ from the latest version. An
  // entry gone since the listing is looked at all the same (a tombstone if it was
  // archived). A fault on one entry does not stop the others.
  const auto left_alone = [&](const std::string& name) {
    struct stat st {};
    if (::fstatat(dir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return false;
    return S_ISDIR(st.st_mode) || (filter != nullptr && filter->too_big(st));
  };
  std::optional<Fault> first;
  std::size_t faults = 0;
  bool any_retry = false;
  for (const auto& name : *names) {
    if (cancelled()) return retry("cancelled");
    const std::string entry = join_path(*path, name);
    if (filter != nullptr && filter->excluded(entry)) continue;
    if (left_alone(name)) continue;
    auto done = [&]() -> Expected<std::uint64_t> {
      auto settled = settle(entry, Op::Stat);
      if (!settled) return settled.fault();
      // A fifo, socket or device is not archived, and not reported: a scan queues none.
      // A directory now (made since the look above) is its own request's.
      if (settled->found == Found::Directory) return settled->bytes;
      auto structure = settle_structure(entry, false);
      if (!structure) return structure.fault();
      return settled->bytes + *structure;
    }();
    if (done) {
      bytes += *done;
      continue;
    }
    ++faults;
    any_retry = any_retry || done.fault().outcome == Outcome::FailedRetry;
    if (!first) first = done.fault();
  }
  if (!first) return bytes;
  if (faults == 1) return *first;
  Fault summary = *first;
  summary.outcome = any_retry ? Outcome::FailedRetry : Outcome::FailedPermanent;
  summary.message = fmt::format("{} entries of {} not archived; the first: {}", faults,
                                shown_path(*path), first->message);
  return summary;
}

Expected<std::uint64_t> Store::Impl::move(std::string_view raw_from, std::string_view raw_to) {
  auto from = normalize_path(raw_from);
  if (!from) return permanent(from.error());
  auto to = normalize_path(raw_to);
  if (!to) return permanent(fmt::format("destination: {}", to.error()));
  // Nothing to follow (or a rename no filesystem allows): both names reconciled.
  const auto both = [&]() -> Expected<std::uint64_t> {
    auto a = reconcile_path(*from, Op::Update);
    if (!a) return a.fault();
    if (*from == *to) return a;
    auto b = reconcile_path(*to, Op::Update);
    if (!b) return b.fault();
    return *a + *b;
  };
  if (*from == *to || path_within(*to, *from) || path_within(*from, *to)) return both();
  auto paths = paths_within(*from);
  if (!paths) return retry("archive: " + paths.error());
  if (paths->empty()) return both();

  std::uint64_t bytes = 0;
  std::vector<std::pair<std::string, Found>> arrived;
  std::optional<Fault> refused;
  for (const auto& p : *paths) {
    if (cancelled()) return retry("cancelled");
    const std::string q = rebase(p, *from, *to);
    auto step = move_step(p, q);
    if (!step) return step.fault();
    bytes += step->bytes;
    if (step->refused && !refused) refused = step->refused;
    arrived.emplace_back(q, step->found);
  }
  // What the new name held before the rename and holds no more.
  auto structure =
      arrived.front().second != Found::Directory
          ? settle_structure(*to, false)
          : sum_each(arrived, [&](const std::pair<std::string, Found>& a) {
              return settle_structure(a.first, a.second == Found::Directory);
            });
  if (!structure) return structure.fault();
  bytes += *structure;
  if (refused) return *refused;
  return bytes;
}

Expected<Store::Impl::Committed> Store::Impl::move_step(const std::string& p,
                                                        const std::string& q) {
  // Both locks, in key order so two movers cannot deadlock.
  const bool p_first = lock_rank(p) < lock_rank(q);
  auto first = lock_node(p_first ? p : q);
  if (!first) return first.fault();
  auto second = lock_node(p_first ? q : p);
  if (!second) return second.fault();
  NodeLock& p_lock = p_first ? *first : *second;
  NodeLock& q_lock = p_first ? *second : *first;
  for (int attempt = 1;; ++attempt) {
    auto look_p = look_at(p);
    if (!look_p) return look_p.fault();
    auto look_q = look_at(q);
    if (!look_q) return look_q.fault();
    auto hp = load_history(p);
    if (!hp) return hp.fault();
    auto hq = load_history(q);
    if (!hq) return hq.fault();
    const Version* lp = hp->live();
    // The history follows the file only when the new name holds the very file archived
    // under the old one (same device and inode) and the old name no longer exists.
    const bool follow = lp != nullptr && lp->ino != 0 && !look_p->present && look_q->present &&
                        lp->dev == static_cast<std::uint64_t>(look_q->st.st_dev) &&
                        lp->ino == static_cast<std::uint64_t>(look_q->st.st_ino) &&
                        (lp->mode & S_IFMT) == (look_q->st.st_mode & S_IFMT);
    Expected<Committed> done = Committed{};
    if (follow) {
      const Version source = *lp;
      done = commit_look(q, *hq, *look_q, Op::Update, &source, p);
      if (done) {
        Version left;
        left.op = Op::Move;
        left.moved_to = q;
        auto saved = append_and_save(*hp, std::move(left));
        if (!saved) return saved.fault();
        done->bytes += *saved;
      }
    } else {
      auto old_name = commit_look(p, *hp, *look_p, Op::Update, nullptr, {});
      if (!old_name) {
        done = old_name.fault();
      } else {
        done = commit_look(q, *hq, *look_q, Op::Update, nullptr, {});
        if (done) done->bytes += old_name->bytes;
      }
    }
    if (!done && done.fault().changed && attempt < kLooks && !cancelled()) continue;
    p_lock.drop_if_unused(node_of(p));
    q_lock.drop_if_unused(node_of(q));
    return done;
  }
}

}  // namespace tw::archive
