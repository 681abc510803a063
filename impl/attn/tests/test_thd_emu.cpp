// THD ring helper kernels' bodies (flash/thd_elems.h) run by the host emulator (thd_emu.h) over
// every thread index, against the host functions they mirror: the checks of thd_kernel_checks.h
// at cp 1, 2, 4 and 8, without a GPU (test_thd_cuda.cpp runs the same on one). Plus the argument
// checks the emulator shares with the CUDA entries.
#include <gtest/gtest.h>

#include <string>

#include "attn/thd_emu.h"
#include "core/error.h"
#include "thd_kernel_checks.h"

namespace dcp::attn {
namespace {

using namespace dcp::attn::testing;

DCP_THD_ENTRIES(ThdEmuEntries, emu);

class ThdEmulated : public ::testing::TestWithParam<int> {};

TEST_P(ThdEmulated, PartitionUnpartitionReadHalfMatchTheHost) {
  check_thd_partition_unpartition_read_half<ThdEmuEntries>(GetParam());
}

TEST_P(ThdEmulated, LseMergeAndGradientCorrectionMatchTheHost) {
  check_thd_lse_merge_and_gradient_correction<ThdEmuEntries>(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Thd, ThdEmulated, ::testing::Values(1, 2, 4, 8),
                         [](const auto& info) { return "cp" + std::to_string(info.param); });

// The checks both sets of entries run before a launch.
TEST(ThdEmulatedArgs, RejectsRowsOutOfRangeRepeatedOrMisSized) {
  const ThdBatch b = make_thd_batch(std::vector<int32_t>{3, 5}, 2);
  const std::vector<float> global(b.total_tokens() * 4, 1.f);
  EXPECT_THROW(thd_partition_emu<float>(global, 4, b, 2, 2), Error);               // rank outside cp
  EXPECT_THROW(thd_partition_emu<float>(global, 3, b, 2, 0), Error);               // not rows of 3
  const std::vector<float> src(8, 1.f);
  EXPECT_THROW(thd_gather_rows_emu<float>(src, std::vector<int64_t>{0, 2}, 4), Error);  // row 2 of 2
  std::vector<float> acc(8, 0.f);
  EXPECT_THROW(thd_add_rows_emu(src, acc, std::vector<int64_t>{1, 1}, 4), Error);  // in place, twice
  EXPECT_NO_THROW(thd_add_rows_emu(src, acc, std::vector<int64_t>{1, 0}, 4));
  EXPECT_EQ(acc, std::vector<float>(8, 1.f));
}

}  // namespace
}  // namespace dcp::attn
