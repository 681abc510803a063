// NCCL backend of Communicator: one process per GPU, bootstrapped through MPI (docs/comm.md).
//
// Invariants:
//   - Never waits on NCCL without a deadline: completion is polled with cudaStreamQuery /
//     cudaEventQuery plus ncclCommGetAsyncError; on an async error or when CommOptions::deadline
//     passes, the communicator is aborted (ncclCommAbort) and a dcp::Error names the operation,
//     the rank and the peer (nccl-tests' testStreamSynchronize pattern). An aborted communicator
//     refuses further work.
//   - Point-to-point: isend/irecv only queue the operation; the first wait()/test() on any of
//     the queued requests launches all of them in one ncclGroupStart/End (NCCL needs matching
//     sends and receives of a ring in one group, or it deadlocks).
//   - Tags only name the operation in errors: NCCL matches sends and receives between two ranks in
//     posting order (communicator.h). A request destroyed unfinished aborts the communicator.
//   - Buffers may be device or host memory: host buffers are staged through temporary device
//     buffers (slow but correct), so CPU code such as the ring attention runs unchanged.
//   - split() uses ncclCommSplit, which blocks until every rank of the parent arrives (NCCL
//     offers no deadline for it); it is preceded by a deadline-bounded barrier.
//   - Not bounded either (helper-57's review): ncclCommInitRank in nccl_communicator, and the
//     first ncclGroupEnd with a peer (blocking configs set up the connection there), wait for a
//     peer that never arrives. A non-blocking config (ncclConfig_t.blocking = 0, polled with
//     ncclCommGetAsyncError against the deadline) would bound them; not done while no machine
//     with several GPUs has run this backend (the lent device runs one rank).
// Only built when CUDA, NCCL and MPI are all found (DCP_HAVE_NCCL_COMM).
#pragma once

#include <mpi.h>

#include "comm/communicator.h"

namespace dcp::comm {

// Collective over `bootstrap`: rank 0 creates the NCCL unique id, MPI broadcasts it, every rank
// calls ncclCommInitRank on CUDA device `device` (-1: bootstrap rank modulo device count).
// NCCL requires one rank per GPU.
std::unique_ptr<Communicator> nccl_communicator(MPI_Comm bootstrap, int device = -1,
                                                CommOptions options = {});

}  // namespace dcp::comm
