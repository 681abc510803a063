// input_check_on_every_rank (harness/commands.h) under mpirun -np 3: one line from the lowest
// failing rank, the same exit code on every process, and no process left waiting when only some
// ranks fail, or fail with an error other than bad input (before the check caught every type, a
// rank whose check threw a std::runtime_error left the collective and the others hung in it).
// The CTest fails when a case's line (its marker) is printed twice.
#include <gtest/gtest.h>
#include <mpi.h>

#include <stdexcept>

#include "comm/mpi_comm.h"
#include "core/error.h"
#include "harness/commands.h"

namespace dcp::harness {
namespace {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

TEST(InputCheckMpi, NoErrorOnAnyRankGoesOn) {
  EXPECT_FALSE(input_check_on_every_rank([] {}).has_value());
}

TEST(InputCheckMpi, BadInputOnEveryRankIsExit2Everywhere) {
  const auto code = input_check_on_every_rank([] { throw InputError("marker-every-rank"); });
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 2);
}

TEST(InputCheckMpi, BadInputOnOneRankIsExit2Everywhere) {
  const auto code = input_check_on_every_rank([] {
    if (world_rank() == 2) throw InputError("marker-rank-2-only");
  });
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 2);
}

TEST(InputCheckMpi, InternalErrorOnSomeRanksIsExit1Everywhere) {
  const auto code = input_check_on_every_rank([] {
    if (world_rank() >= 1) throw std::runtime_error("marker-internal");
  });
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 1);
}

}  // namespace
}  // namespace dcp::harness

int main(int argc, char** argv) {
  dcp::comm::MpiRuntime mpi(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
