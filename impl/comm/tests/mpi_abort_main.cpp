// Failure propagation under mpirun (CTest test_comm_mpi_abort, label mpi): rank 1 throws while
// the others wait in a barrier whose deadline (300 s) is far beyond the test's timeout (60 s).
// run_mpi must print "dcpbench rank 1: ..." and MPI_Abort, so mpirun ends at once; CTest checks
// the message (PASS_REGULAR_EXPRESSION) and the timeout proves nobody was left hanging.
#include "comm/mpi_comm.h"

int main(int argc, char** argv) {
  dcp::comm::MpiRuntime mpi(&argc, &argv);
  dcp::comm::CommOptions opt;
  opt.deadline = std::chrono::seconds(300);
  return dcp::comm::run_mpi([](dcp::comm::Communicator& world) {
    if (world.rank() == 1) throw dcp::InputError("deliberate failure on rank 1");
    world.barrier();
  }, opt);
}
