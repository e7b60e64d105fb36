// The thread that folds a writer's catalog journal (the WAL) into the catalog: SQLite's own
// checkpoint runs in the commit that filled the journal, on the archiver's thread, with two
// syncs of the disk (in a first backup of small files, two archivers' commits waited so
// 0.8 s of their 6, and the other archiver waited for the write lock meanwhile). Here a
// commit only asks, and the checkpoint runs beside the archiver on a connection of its own,
// passive: it never waits for a writer or a reader, and what a reader still uses stays in
// the journal for the next one. The thread starts with the first request and has every
// signal blocked. Internal to the catalog.
#pragma once

#include <string>
#include <thread>

#include "common/mutex.hpp"
#include "common/noncopyable.hpp"
#include "common/thread_annotations.hpp"

struct sqlite3;

namespace tw::archive {

class Checkpointer : NonCopyable {
 public:
  // A journal of this many pages or more is folded (1 MiB in 4 KiB pages).
  static constexpr int kPages = 256;
  // ... and one of this many is folded by the commit itself, as SQLite does: the journal
  // starts again from its beginning only once a fold has caught up with the last commit,
  // which a fold beside a writer that commits without pause never does.
  static constexpr int kInlinePages = 8 * kPages;

  explicit Checkpointer(std::string file) : file_(std::move(file)) {}
  // Lets a checkpoint under way end, then joins the thread.
  ~Checkpointer();

  // Installs the request on `db`, a writer of the same file, in place of SQLite's own
  // checkpoints: a commit that leaves kPages or more in the journal asks for a fold, one
  // that leaves kInlinePages or more folds it.
  void watch(sqlite3* db);
  // Asks for a fold (runs after the present one if one is under way).
  void request() EXCLUDES(mutex_);

 private:
  void run() EXCLUDES(mutex_);

  // --- constant after construction
  const std::string file_;

  // --- protected by mutex_
  Mutex mutex_;
  CondVar changed_;  // a fold was asked for, or the owner is leaving
  bool due_ GUARDED_BY(mutex_) = false;
  bool leaving_ GUARDED_BY(mutex_) = false;

  // --- the owner's
  std::thread thread_;  // started by the first request()
};

}  // namespace tw::archive
