// MPI backend of Communicator: one process per rank under mpirun (docs/comm.md).
//
// Invariants:
//   - Reductions (all_reduce, reduce_scatter) gather the operands (MPI_Iallgather / MPI_Ialltoall)
//     and reduce them in rank order, as the thread backend does: the same bits on both backends.
//   - Every operation is posted non-blocking (MPI_Isend/Irecv, MPI_Iallgather, ...) and completed
//     by polling MPI_Test against CommOptions::deadline, so a missing peer is reported as a
//     dcp::Error naming the operation, the rank and the peer instead of hanging.
//   - Errors from MPI are returned (MPI_ERRORS_RETURN on every communicator) and thrown as
//     dcp::Error with MPI's error string.
//   - split() first exchanges (color, key) with a deadline-bounded all-gather, then calls
//     MPI_Comm_split, so ranks that never arrive are caught by the deadline.
//   - run_mpi() calls MPI_Abort(MPI_COMM_WORLD) when a rank throws, so the other ranks are killed
//     instead of waiting for the deadline.
// Only built when MPI is found (DCP_HAVE_MPI).
#pragma once

#include <mpi.h>

#include <functional>

#include "comm/communicator.h"

namespace dcp::comm {

// RAII MPI_Init_thread/MPI_Finalize (does nothing if MPI is already initialized).
// Every MpiComm must be destroyed before it.
class MpiRuntime {
 public:
  MpiRuntime(int* argc, char*** argv);
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

 private:
  bool owns_ = false;
};

// A Communicator over a duplicate of `comm` (the caller keeps ownership of `comm`).
std::unique_ptr<Communicator> mpi_communicator(MPI_Comm comm, CommOptions options = {});

// Runs fn(world communicator). If fn throws, prints "dcpbench rank R: <what>" to stderr and calls
// MPI_Abort(MPI_COMM_WORLD, 1), which terminates every rank. Returns 0 on success.
int run_mpi(const std::function<void(Communicator&)>& fn, CommOptions options = {});

}  // namespace dcp::comm
