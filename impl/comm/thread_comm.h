// In-process thread backend of Communicator: N ranks are N threads sharing one ThreadWorld.
//
// Invariants:
//   - Sends are eager: the message is copied into the receiver's queue, so isend completes at
//     once and no exchange pattern (ring, all-to-all) can deadlock on buffer space.
//   - Queues are keyed by (communicator context, source, destination, tag) and are FIFO, which
//     gives MPI's non-overtaking order.
//   - Collectives are built from the same point-to-point messages on a reserved tag and reduce
//     in rank order, so every rank gets bit-identical results, every run.
//   - One abort flag per world: when any rank fails (run_threads catches its exception) every
//     waiter wakes at once and throws "world aborted because rank R failed: ...". A wait that
//     outlives CommOptions::deadline throws naming the operation, the rank and the peer.
#pragma once

#include <functional>
#include <memory>

#include "comm/communicator.h"

namespace dcp::comm {

struct ThreadWorldState;

class ThreadWorld {
 public:
  explicit ThreadWorld(int size, CommOptions options = {});
  ~ThreadWorld();
  ThreadWorld(const ThreadWorld&) = delete;
  ThreadWorld& operator=(const ThreadWorld&) = delete;

  int size() const { return size_; }
  // The world communicator of `rank` (call once per rank thread).
  std::unique_ptr<Communicator> communicator(int rank);
  // Wakes every waiter of every communicator of this world; they throw naming `reason`.
  void abort(int failed_rank, const std::string& reason);
  bool aborted() const;

 private:
  int size_;
  std::shared_ptr<ThreadWorldState> state_;
};

// Runs fn(world communicator) on `size` threads and joins them. If any rank throws, the world is
// aborted (so the others stop waiting) and, after every thread has joined, the exception of the
// first rank that failed is rethrown unchanged (its type is kept: InputError stays InputError).
void run_threads(int size, const std::function<void(Communicator&)>& fn,
                 CommOptions options = {});

}  // namespace dcp::comm
