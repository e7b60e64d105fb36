// The monitor's side of the READY handshake (ARCHITECTURE.md, "The handshake"): a flag
// `ready_sent`, false at start. READY goes to the scheduler only when the queue has
// claimable items and the flag is false; each READY from the scheduler clears the flag,
// and the queue is checked again at once, so an item added while the scheduler was
// finishing is never stranded.
// Pure state, no I/O: the caller asks the queue and sends the line. Not thread-safe.
#pragma once

namespace tw::monitor {

class Handshake {
 public:
  // Whether a look at the queue could lead to a READY now (else skip the query).
  bool wants_check() const { return !ready_sent_; }

  // Work may have arrived (a notification, a retry falling due, start-up). `claimable` is
  // the queue's answer. Returns true when READY must be sent now.
  bool on_possible_work(bool claimable) {
    if (ready_sent_ || !claimable) return false;
    ready_sent_ = true;
    return true;
  }

  // The scheduler wrote READY: it has drained the queue as it saw it. `claimable` is the
  // queue's answer asked after that READY. Returns true when READY must be sent again.
  bool on_scheduler_ready(bool claimable) {
    ready_sent_ = false;
    return on_possible_work(claimable);
  }

  // A new scheduler process has been told nothing yet.
  void on_scheduler_restarted() { ready_sent_ = false; }

  bool ready_sent() const { return ready_sent_; }

 private:
  bool ready_sent_ = false;
};

}  // namespace tw::monitor
