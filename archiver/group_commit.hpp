// The archiver's side of the group commit (archive/FORMAT.md, "Format 2", "Group commit and
// durability"): the answers of the open group are held until the store has made the group
// durable, so a COMPLETE is never written for a version that a crash could still lose.
// GroupCommit decides when the open group closes and writes each closed group's answers, in
// request order, once the store says the group is durable.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "archive/store.hpp"
#include "common/protocol.hpp"

namespace tw::archiver {

// What the group commit asks of the store: the group calls of archive::Store (store.hpp),
// behind an interface so that a unit test can decide when, and whether, a group is durable.
class GroupStore {
 public:
  virtual ~GroupStore() = default;
  virtual void begin_group() = 0;
  // `on_durable` may run on another thread (the store's sync thread).
  virtual void close_group(std::function<void(const archive::Done&)> on_durable) = 0;
  virtual void advance() = 0;
  virtual bool syncing() const = 0;
  virtual std::uint64_t staged_bytes() const = 0;
  virtual archive::Done flush() = 0;
};

// GroupStore over a writable archive::Store (always format 2: a format-1 archive is read
// only).
class StoreGroups final : public GroupStore {
 public:
  explicit StoreGroups(archive::Store& store) : store_(store) {}
  void begin_group() override { store_.begin_group(); }
  void close_group(std::function<void(const archive::Done&)> on_durable) override {
    store_.close_group(std::move(on_durable));
  }
  void advance() override { store_.advance(); }
  bool syncing() const override { return store_.syncing(); }
  std::uint64_t staged_bytes() const override { return store_.staged_bytes(); }
  archive::Done flush() override { return store_.flush(); }

 private:
  archive::Store& store_;
};

// Used by the request loop's thread; only the answers of a closed group leave it, to the
// store's sync thread.
class GroupCommit {
 public:
  // The limits of one group. Its requests' answers wait for its sync, and its paths stay
  // locked until it is committed, so a group is kept small enough that neither wait grows,
  // and large enough that one pack sync and one journal sync serve many requests.
  //
  // Half of the scheduler's window of requests in flight to one archiver
  // (scheduler::Consumer::kWindow, 128): while one group syncs, the next one fills with the
  // other half, so the scheduler always has requests to send.
  static constexpr std::size_t kMaxRequests = 64;
  // New content staged in the group, which its one pack sync writes out: at the 100-500
  // MB/s of a disk, 32 MiB is a fraction of a second of fdatasync, so no answer waits long
  // behind it, and a failed sync leaves at most this much work to be done again. (The
  // scheduler sends at most 4 MiB of files at once, scheduler::Consumer::kWindowBytes, so it
  // is mostly one large file that reaches it: its group closes right after it.)
  static constexpr std::uint64_t kMaxStagedBytes = std::uint64_t{32} << 20;
  // Age of the group's first answer: when requests trickle in, each just before the last
  // one is done, the input is never idle and the count may be long in coming; without this
  // the first answer (and the group's locks on its paths, which another archiver may be
  // waiting for) would wait for the 64th request. 50 ms is hundreds of small files' work (a
  // first backup handles about 12,000 a second), yet short beside a sync on a slow disk.
  static constexpr std::chrono::milliseconds kMaxAge{50};

  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  // Writes answers, one line each, in request order, in one go; false when it cannot (stdout
  // is gone). Called from the store's sync thread, and on the caller's thread when there
  // is no store.
  using Writer = std::function<bool(const std::vector<Response>&)>;

  // Why the open group closes now (Open: it stays open).
  enum class Close { Open, Ungrouped, Stopping, Requests, Bytes, Age, InputIdle };

  // `store` null (--null: no archive): no group, every answer is written when closed.
  GroupCommit(GroupStore* store, Writer write, Clock clock = &std::chrono::steady_clock::now);
  GroupCommit(const GroupCommit&) = delete;
  GroupCommit& operator=(const GroupCommit&) = delete;

  // Holds the answer of the request just handled in the open group.
  void add(Response response);
  bool pending() const { return !pending_.empty(); }

  // Whether the open group closes now. `input_waiting`: a further whole request is waiting
  // on the input; `stopping`: the archiver was asked to stop. A group closes when it is full
  // (kMaxRequests, kMaxStagedBytes, kMaxAge), when the archiver stops, or when no request
  // is waiting and the store is idle; while the store syncs an earlier group, a group closed
  // now would only wait behind that sync, so it stays open until on_store_signal().
  Close due(bool input_waiting, bool stopping) const;

  // After each request's add(): first commits the groups whose sync is done (which clears
  // the store's signal, so that a sync ending after this signals again), then closes the
  // open group if due(). False when stdout is gone.
  bool after_request(bool input_waiting, bool stopping);
  // When the store signals that an earlier group's work is done: commits it, and closes
  // the open group that waited for it (a broken stdout is seen by the next after_request()
  // or finish()).
  void on_store_signal();

  // Closes the open group: its answers are written once the store has made it durable; if
  // the store loses the group instead, its COMPLETE answers become FAILED RETRY with the
  // store's error (its other answers stay as they were). False when stdout is gone.
  bool close();
  // Closes the open group and waits until every answer is written; false when stdout is
  // gone.
  bool finish();
  bool broken() const { return broken_->load(); }

 private:
  GroupStore* store_;
  Writer write_;
  Clock clock_;
  std::vector<Response> pending_;
  std::chrono::steady_clock::time_point started_;  // when the open group's first answer came
  // Stdout is gone; set by the store's thread too, which may outlive this object.
  std::shared_ptr<std::atomic<bool>> broken_ = std::make_shared<std::atomic<bool>>(false);
};

}  // namespace tw::archiver
