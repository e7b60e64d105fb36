// Format 2's journal folding thread (archive/format2/checkpointer.hpp).
#include "archive/format2/checkpointer.hpp"

#include <sqlite3.h>

#include <optional>

#include "archive/format2/sqlite.hpp"
#include "archive/format2/sync_worker.hpp"

namespace tw::archive {

Checkpointer::~Checkpointer() {
  {
    MutexLock lock(&mutex_);
    leaving_ = true;
  }
  changed_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

void Checkpointer::watch(sqlite3* db) {
  const auto on_commit = [](void* self, sqlite3* writer, const char* name, int pages) {
    if (pages >= kInlinePages) {
      sqlite3_wal_checkpoint_v2(writer, name, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
    } else if (pages >= kPages) {
      static_cast<Checkpointer*>(self)->request();
    }
    return SQLITE_OK;
  };
  sqlite3_wal_hook(db, on_commit, this);
}

void Checkpointer::request() {
  {
    MutexLock lock(&mutex_);
    due_ = true;
  }
  changed_.SignalAll();
  if (!thread_.joinable()) thread_ = start_without_signals([this] { run(); });
}

void Checkpointer::run() {
  std::optional<sqlite::Database> db;
  MutexLock lock(&mutex_);
  while (true) {
    while (!leaving_ && !due_) changed_.Wait(&mutex_);
    if (leaving_) return;
    due_ = false;
    mutex_.Unlock();
    if (!db) {
      if (auto opened = sqlite::Database::open(file_, true)) {
        // The journal's files stay when this is the last connection to close, as the
        // writer's do (catalog.cpp, set_up_journal).
        int persist = 1;
        sqlite3_file_control(opened->handle(), "main", SQLITE_FCNTL_PERSIST_WAL, &persist);
        db.emplace(std::move(*opened));
      }
    }
    // A fold that fails (the disk full, the catalog busy) is tried again at the next
    // request; the writer's quiet-time fold (fold_journal) empties the journal too.
    if (db) {
      sqlite3_wal_checkpoint_v2(db->handle(), "main", SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
    }
    mutex_.Lock();
  }
}

}  // namespace tw::archive
