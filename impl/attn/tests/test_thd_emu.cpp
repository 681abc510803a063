// THD ring helper kernels' bodies (flash/thd_elems.h) run by the host emulator (thd_emu.h) over
// every thread index, against the host functions they mirror: the checks of thd_kernel_checks.h
// at cp 1, 2, 4 and 8, without a GPU (test_thd_cuda.cpp runs the same on one). Plus the argument
// checks the emulator shares with the CUDA entries.
#include <gtest/gtest.h>

#include <string>

#include "attn/flash/thd_elems.h"
#include "attn/thd_emu.h"
#include "core/error.h"
#include "core/rng.h"
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

// The random fill's element (flash/thd_elems.h; cuda fill_uniform runs it per thread, and
// test_thd_cuda.cpp checks the device against it): core/rng.h's hash mapped to [-scale, scale),
// rounded to the storage type, never zero, about centred; distinct seeds give distinct streams.
TEST(ThdFill, UniformElementsAreTheHashInRange) {
  double sum = 0;
  int64_t same_as_other_seed = 0;
  for (int64_t i = 0; i < 100000; ++i) {
    const float v = flash::uniform_value(3, i, 0.25f);
    ASSERT_EQ(v, static_cast<float>((2.0 * hash_uniform(3, static_cast<uint64_t>(i)) - 1.0) * 0.25)) << i;
    ASSERT_TRUE(v >= -0.25f && v < 0.25f && v != 0.f) << i << ": " << v;
    const uint16_t b = flash::uniform_elem<flash::Bf16>(3, i, 1.f);
    ASSERT_EQ(b, flash::Bf16::from_float(static_cast<float>(2.0 * hash_uniform(3, static_cast<uint64_t>(i)) - 1.0)));
    ASSERT_NE(b & 0x7fff, 0) << i;  // not +-0
    ASSERT_NE(flash::uniform_elem<flash::Fp16>(3, i, 1.f) & 0x7fff, 0) << i;
    sum += v;
    same_as_other_seed += flash::uniform_value(4, i, 0.25f) == v;
  }
  EXPECT_NEAR(sum / 100000, 0.0, 0.25 * 0.01);  // mean 0, sd 0.25 / sqrt(3 x 1e5) = 0.00046
  EXPECT_LT(same_as_other_seed, 10);
}

}  // namespace
}  // namespace dcp::attn
