// THD ring helper kernels (cuda/thd_kernels.h) on the GPU against the host functions they mirror
// (label gpu; skips without a device): the checks of thd_kernel_checks.h through the CUDA host
// entries (cuda/thd_cuda.h), at cp 1, 2 and 4. test_thd_emu.cpp runs the same checks on the CPU
// through the host emulator of the same kernel bodies.
#include <gtest/gtest.h>

#include <string>

#include "attn/cuda/thd_cuda.h"
#include "gpu_test_util.h"
#include "thd_kernel_checks.h"

namespace dcp::attn {
namespace {

using namespace dcp::attn::testing;

DCP_THD_ENTRIES(ThdCudaEntries, cuda);

class ThdCuda : public ::testing::TestWithParam<int> {};

TEST_P(ThdCuda, PartitionUnpartitionReadHalfMatchTheHost) {
  DCP_SKIP_WITHOUT_GPU();
  check_thd_partition_unpartition_read_half<ThdCudaEntries>(GetParam());
}

TEST_P(ThdCuda, LseMergeAndGradientCorrectionMatchTheHost) {
  DCP_SKIP_WITHOUT_GPU();
  check_thd_lse_merge_and_gradient_correction<ThdCudaEntries>(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Thd, ThdCuda, ::testing::Values(1, 2, 4),
                         [](const auto& info) { return "cp" + std::to_string(info.param); });

}  // namespace
}  // namespace dcp::attn
