// Items worked on by several threads and handed on in order, a bounded number at once:
// how a large content is read back (ChunkStore::extract). Internal to the archive library.
#pragma once

#include <cstddef>
#include <thread>
#include <vector>

#include "common/mutex.hpp"
#include "common/thread_annotations.hpp"

namespace tw::archive {

// Items 0..count-1: each made ready by `prepare(i)` on the calling thread, in order, then
// worked on by `work(i)` on one of `workers` threads, then given to `finish(i)` on the
// calling thread, in order; at most `depth` items are between their prepare and their
// finish at once (so item i may use slot i % depth of the caller's). The calling thread
// prepares ahead while the workers work and finishes what is done: no item waits for the
// slowest of a window. `prepare` or `finish` returning false stops it: no further item is
// worked on, and the call returns once no worker is busy. With no workers, or one item,
// all three run on the calling thread.
template <typename Prepare, typename Work, typename Finish>
void run_ordered(std::size_t count, std::size_t depth, std::size_t workers, Prepare prepare,
                 Work work, Finish finish) {
  if (workers == 0 || count <= 1 || depth == 0) {
    for (std::size_t i = 0; i < count; ++i) {
      if (!prepare(i)) return;
      work(i);
      if (!finish(i)) return;
    }
    return;
  }
  struct Shared {
    Mutex mutex;
    CondVar changed;
    std::size_t prepared GUARDED_BY(mutex) = 0;  // items [0, prepared) may be worked on
    std::size_t taken GUARDED_BY(mutex) = 0;     // items [0, taken) were taken by a worker
    std::vector<char> done GUARDED_BY(mutex);    // by slot: its item's work is over
    bool stop GUARDED_BY(mutex) = false;
  } shared;
  {
    MutexLock lock(&shared.mutex);
    shared.done.assign(depth, 0);
  }
  const auto worker = [&] {
    shared.mutex.Lock();
    while (true) {
      while (!shared.stop && shared.taken == shared.prepared && shared.taken < count) {
        shared.changed.Wait(&shared.mutex);
      }
      if (shared.stop || shared.taken == count) break;
      const std::size_t i = shared.taken++;
      shared.mutex.Unlock();
      work(i);
      shared.mutex.Lock();
      shared.done[i % depth] = 1;
      shared.changed.SignalAll();
    }
    shared.mutex.Unlock();
  };
  std::vector<std::jthread> threads;
  const auto stop = [&] {
    {
      MutexLock lock(&shared.mutex);
      shared.stop = true;
    }
    shared.changed.SignalAll();
    threads.clear();  // joined: no worker is busy after this
  };
  for (std::size_t w = 0; w < workers; ++w) threads.emplace_back(worker);
  std::size_t next = 0;  // the next item to prepare
  for (std::size_t i = 0; i < count; ++i) {
    for (; next < count && next - i < depth; ++next) {
      if (!prepare(next)) return stop();
      MutexLock lock(&shared.mutex);
      shared.done[next % depth] = 0;
      shared.prepared = next + 1;
      shared.changed.SignalAll();
    }
    {
      MutexLock lock(&shared.mutex);
      while (shared.done[i % depth] == 0) shared.changed.Wait(&shared.mutex);
    }
    if (!finish(i)) return stop();
  }
  stop();
}

}  // namespace tw::archive
