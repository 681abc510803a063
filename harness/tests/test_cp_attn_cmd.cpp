// `dcpbench cp-attn` on the threads backend (run_cp_attn, harness/cp_attn_check.h): every group
// size passes for both algorithms and dtypes, a tolerance no float64 run can meet fails with exit
// 1 and FAIL lines, and bad arguments are InputErrors naming the flag and value.
#include "core/error.h"
#include "harness/cp_attn_check.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

namespace dcp::harness {
namespace {

int count_lines_with(const std::string& text, const std::string& needle) {
  std::istringstream is(text);
  int n = 0;
  for (std::string line; std::getline(is, line);) n += line.find(needle) != std::string::npos;
  return n;
}

CpAttnArgs small_args() {
  CpAttnArgs a;
  a.lengths = {1, 7, 8, 9, 37};
  a.heads = 4;
  a.kv_heads = 2;
  a.head_dim = 16;
  return a;
}

// Column order: algo, dtype, ranks, expected group-size lines (registry sizes of the pool).
struct PassCase {
  const char* algo;
  const char* dtype;
  int ranks;
  int group_lines;
};

class CpAttnCmd : public ::testing::TestWithParam<PassCase> {};

TEST_P(CpAttnCmd, EveryGroupSizePasses) {
  CpAttnArgs a = small_args();
  a.algo = GetParam().algo;
  a.dtype = GetParam().dtype;
  a.ranks = GetParam().ranks;
  std::ostringstream os;
  EXPECT_EQ(run_cp_attn(a, os), 0) << os.str();
  EXPECT_EQ(count_lines_with(os.str(), "PASS"), GetParam().group_lines) << os.str();
  EXPECT_EQ(count_lines_with(os.str(), "FAIL"), 0) << os.str();
  EXPECT_NE(os.str().find("dcpbench cp-attn: passed (" + std::to_string(GetParam().group_lines)),
            std::string::npos)
      << os.str();
}

INSTANTIATE_TEST_SUITE_P(
    CpAttnCmd, CpAttnCmd,
    ::testing::Values(PassCase{"ring", "f64", 4, 3}, PassCase{"ring", "f32", 4, 3},
                      PassCase{"all_gather", "f64", 4, 3}, PassCase{"ring", "f64", 6, 3},
                      PassCase{"ring", "f64", 1, 1}),
    [](const auto& info) {
      return std::string(info.param.algo) + "_" + info.param.dtype + "_ranks" +
             std::to_string(info.param.ranks);
    });

TEST(CpAttnCmd, OnlyWholePoolWithoutAllGroups) {
  CpAttnArgs a = small_args();
  a.all_groups = false;
  std::ostringstream os;
  EXPECT_EQ(run_cp_attn(a, os), 0) << os.str();
  EXPECT_EQ(count_lines_with(os.str(), "PASS"), 1) << os.str();
  EXPECT_EQ(count_lines_with(os.str(), "      4       1 "), 1) << os.str();  // cp=4, one group
}

// cp=2 and cp=4 reorder float64 sums (errors ~1e-16 > 1e-30); only cp=1, which computes
// exactly what the reference computes, can meet it.
TEST(CpAttnCmd, ImpossibleToleranceFails) {
  CpAttnArgs a = small_args();
  a.tolerance = 1e-30;
  std::ostringstream os;
  EXPECT_EQ(run_cp_attn(a, os), 1) << os.str();
  EXPECT_EQ(count_lines_with(os.str(), "  FAIL "), 2) << os.str();  // cp=2 and cp=4
  EXPECT_EQ(count_lines_with(os.str(), "  PASS"), 1) << os.str();   // cp=1
  EXPECT_NE(os.str().find("dcpbench cp-attn: FAILED (3 group sizes)"), std::string::npos)
      << os.str();
}

// float32 results against a float64 tolerance: every CP size fails, cp=1 included.
TEST(CpAttnCmd, Float32AgainstFloat64ToleranceFails) {
  CpAttnArgs a = small_args();
  a.dtype = "f32";
  a.tolerance = 1e-10;
  std::ostringstream os;
  EXPECT_EQ(run_cp_attn(a, os), 1) << os.str();
  EXPECT_EQ(count_lines_with(os.str(), "PASS"), 0) << os.str();
}

void expect_input_error(const CpAttnArgs& a, const std::string& needle) {
  std::ostringstream os;
  try {
    run_cp_attn(a, os);
    ADD_FAILURE() << "no InputError; expected one mentioning " << needle;
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
  EXPECT_TRUE(os.str().empty()) << "printed before validating: " << os.str();
}

TEST(CpAttnCmd, BadArgumentsNameTheValue) {
  CpAttnArgs a = small_args();
  a.heads = 4;
  a.kv_heads = 3;
  expect_input_error(a, "--heads=4 is not divisible by --kv-heads=3");
  a = small_args();
  a.backend = "nccl";
  expect_input_error(a, "--backend=\"nccl\"");
  a = small_args();
  a.algo = "ulysses";
  expect_input_error(a, "--algo=\"ulysses\"");
  a = small_args();
  a.dtype = "bf16";
  expect_input_error(a, "--dtype=\"bf16\"");
  a = small_args();
  a.ranks = 0;
  expect_input_error(a, "--ranks=0");
  a = small_args();
  a.lengths = {5, -2};
  expect_input_error(a, "--lengths: -2 is negative");
  a = small_args();
  a.lengths = {0, 0};
  expect_input_error(a, "has no tokens");
  a = small_args();
  a.head_dim = 0;
  expect_input_error(a, "--head-dim=0");
}

#ifndef DCP_HAVE_MPI
TEST(CpAttnCmd, MpiBackendWithoutMpiIsAnInputError) {
  CpAttnArgs a = small_args();
  a.backend = "mpi";
  expect_input_error(a, "this dcpbench was built without MPI");
}
#endif

}  // namespace
}  // namespace dcp::harness
