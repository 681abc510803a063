// The CUDA tensor-core attention forward and backward (cuda/flash_{fwd,bwd}.cu) on the device, on the same cases
// and under the same rule as the host emulator's test (flash_cases.h): label gpu, skips without
// a device, fails under DCP_REQUIRE_GPU=1 (ci/gpu.sh).
#include <gtest/gtest.h>

#include "attn/cuda/flash_cuda.h"
#include "attn/cuda/flash_ring_cuda.h"
#include "attn/tolerances.h"
#include "flash_cases.h"
#include "gpu_test_util.h"

namespace dcp::attn {
namespace {

using namespace dcp::attn::testing;

class FlashFwdCuda : public ::testing::TestWithParam<int> {};

TEST_P(FlashFwdCuda, MeetsTheRuleAgainstFloat64) {
  DCP_SKIP_WITHOUT_GPU();
  const FlashCase c = flash_fwd_cases()[GetParam()];
  expect_pass(check_flash_fwd(c, flash_fwd_cuda), c.what);
}

INSTANTIATE_TEST_SUITE_P(Cases, FlashFwdCuda, ::testing::Range(0, static_cast<int>(flash_fwd_cases().size())));

class FlashBwdCuda : public ::testing::TestWithParam<int> {};

TEST_P(FlashBwdCuda, MeetsTheRuleAgainstFloat64) {
  DCP_SKIP_WITHOUT_GPU();
  const FlashCase c = flash_fwd_cases()[GetParam()];
  expect_pass(check_flash_bwd(c, flash_bwd_cuda), c.what);
}

INSTANTIATE_TEST_SUITE_P(Cases, FlashBwdCuda, ::testing::Range(0, static_cast<int>(flash_fwd_cases().size())));

// Ring CP on one GPU, the ranks of a group as virtual ranks (device-to-device copies for the
// ring's transfers; more ranks on more GPUs go through the NCCL communicator, see README).
class FlashRingCuda : public ::testing::TestWithParam<int> {};

TEST_P(FlashRingCuda, MatchesTheWholeBatch) {
  DCP_SKIP_WITHOUT_GPU();
  const FlashRingCase c = flash_ring_cases()[GetParam()];
  CudaFlashBackend be;
  expect_pass(check_flash_ring(be, c), c.what);
}

INSTANTIATE_TEST_SUITE_P(Cases, FlashRingCuda, ::testing::Range(0, static_cast<int>(flash_ring_cases().size())));

}  // namespace
}  // namespace dcp::attn
