// input_check_on_every_rank (harness/errors.h) under mpirun -np 3: exactly one line, from the
// lowest failing rank (each process's stderr is captured and compared: the printing rank's is that
// line, every other's is empty), the same exit code on every process, and no process left waiting
// when only some ranks fail, or fail with an error other than bad input (before the check caught
// every type, a rank whose check threw a std::runtime_error left the collective and the others hung
// in it; a hang meets the CTest's TIMEOUT).
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>

#include "comm/mpi_comm.h"
#include "core/error.h"
#include "harness/errors.h"

namespace dcp::harness {
namespace {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

struct Checked {
  std::optional<int> code;
  std::string printed;  // what this process wrote on stderr during the check
};

// input_check_on_every_rank(check) with this process's stderr sent to a file of its own.
Checked check_capturing_stderr(const std::function<void()>& check) {
  std::fflush(stderr);
  char path[] = "/tmp/dcp_input_check_XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) throw std::runtime_error("mkstemp failed");
  const int saved = dup(2);
  dup2(fd, 2);
  Checked out;
  out.code = input_check_on_every_rank(check);
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  close(fd);
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  std::remove(path);
  out.printed = text.str();
  return out;
}

TEST(InputCheckMpi, NoErrorOnAnyRankGoesOn) {
  const Checked r = check_capturing_stderr([] {});
  EXPECT_FALSE(r.code.has_value());
  EXPECT_EQ(r.printed, "");
}

TEST(InputCheckMpi, BadInputOnEveryRankIsExit2EverywhereAndRank0Prints) {
  const Checked r = check_capturing_stderr([] { throw InputError("marker-every-rank"); });
  ASSERT_TRUE(r.code.has_value());
  EXPECT_EQ(*r.code, 2);
  EXPECT_EQ(r.printed, world_rank() == 0 ? "dcpbench: error: marker-every-rank\n" : "") << "rank " << world_rank();
}

TEST(InputCheckMpi, BadInputOnOneRankIsExit2EverywhereAndThatRankPrints) {
  const Checked r = check_capturing_stderr([] {
    if (world_rank() == 2) throw InputError("marker-rank-2-only");
  });
  ASSERT_TRUE(r.code.has_value());
  EXPECT_EQ(*r.code, 2);
  EXPECT_EQ(r.printed, world_rank() == 2 ? "dcpbench: error: marker-rank-2-only\n" : "") << "rank " << world_rank();
}

TEST(InputCheckMpi, InternalErrorOnSomeRanksIsExit1EverywhereAndTheLowestPrints) {
  const Checked r = check_capturing_stderr([] {
    if (world_rank() >= 1) throw std::runtime_error("marker-internal");
  });
  ASSERT_TRUE(r.code.has_value());
  EXPECT_EQ(*r.code, 1);
  EXPECT_EQ(r.printed, world_rank() == 1 ? "dcpbench: error: marker-internal\n" : "") << "rank " << world_rank();
}

}  // namespace
}  // namespace dcp::harness

int main(int argc, char** argv) {
  dcp::comm::MpiRuntime mpi(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
