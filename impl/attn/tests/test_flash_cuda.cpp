// The CUDA tensor-core attention forward and backward (cuda/flash_{fwd,bwd}.cu) on the device, on the same cases
// and under the same rule as the host emulator's test (flash_cases.h): label gpu, skips without
// a device, fails under DCP_REQUIRE_GPU=1 (ci/gpu.sh).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "attn/cuda/flash_cuda.h"
#include "attn/cuda/flash_ring_cuda.h"
#include "attn/flash_emu.h"
#include "attn/tolerances.h"
#include "flash_cases.h"
#include "gpu_test_util.h"

namespace dcp::attn {
namespace {

using namespace dcp::attn::testing;

// The kernel as the library runs it (kFwdTilesM m16 tiles per warp).
const FlashFwd kCuda = fwd_with_tiles(flash_fwd_cuda, flash::kFwdTilesM);

class FlashFwdCuda : public ::testing::TestWithParam<int> {};

TEST_P(FlashFwdCuda, MeetsTheRuleAgainstFloat64) {
  DCP_SKIP_WITHOUT_GPU();
  const FlashCase c = flash_fwd_cases()[GetParam()];
  expect_pass(check_flash_fwd(c, kCuda), c.what);
}

INSTANTIATE_TEST_SUITE_P(Cases, FlashFwdCuda, ::testing::Range(0, static_cast<int>(flash_fwd_cases().size())));

// The forward with one m16 tile per warp (the variant bench_attn_cuda times beside the kernel's
// two): the same cases, the same rule.
TEST_P(FlashFwdCuda, OneTilePerWarpMeetsTheRule) {
  DCP_SKIP_WITHOUT_GPU();
  const FlashCase c = flash_fwd_cases()[GetParam()];
  expect_pass(check_flash_fwd(c, fwd_with_tiles(flash_fwd_cuda, 1)), c.what);
}

// The device against the emulator on the same inputs: the hardware accumulates the MMAs in its
// own order and exp2 differs in the last bits, so each output may land one 16-bit rounding step
// away (|gpu - emu| <= 2^-7 |emu| + 2^-14 for out, 1e-5 relative for the fp32 lse). A PTX layout
// that the hardware does not implement as transcribed fails by far more.
TEST_P(FlashFwdCuda, AgreesWithTheEmulatorToARoundingStep) {
  DCP_SKIP_WITHOUT_GPU();
  const FlashCase c = flash_fwd_cases()[GetParam()];
  const FlashInputs in = flash_inputs(c, 7);
  const size_t nq = in.q.size(), nl = static_cast<size_t>(in.bq.total_tokens() * in.s.heads);
  std::vector<uint16_t> og(nq), oe(nq);
  std::vector<float> lg(nl), le(nl);
  flash_fwd_cuda(c.half, in.bq, in.bk, in.s, in.qh, in.kh, in.vh, og, lg);
  flash_fwd_emulated(c.half, in.bq, in.bk, in.s, in.qh, in.kh, in.vh, oe, le);
  for (size_t i = 0; i < nq; ++i) {
    const double g = from_bits(og[i], c.half), e = from_bits(oe[i], c.half);
    ASSERT_LE(std::fabs(g - e), std::ldexp(std::fabs(e), -7) + std::ldexp(1.0, -14)) << c.what << " out[" << i << "]";
  }
  for (size_t i = 0; i < nl; ++i) {
    if (std::isinf(le[i])) {
      ASSERT_EQ(lg[i], le[i]) << c.what << " lse[" << i << "]";
      continue;
    }
    ASSERT_LE(std::fabs(lg[i] - le[i]), 1e-5 * std::max(1.0f, std::fabs(le[i]))) << c.what << " lse[" << i << "]";
  }
}

// A size the emulator cannot run in a test: 4096 tokens in three sequences, 8 heads over 4 kv
// heads, d = 128, causal: 24 query blocks of 128 rows and up to 47 key blocks per CTA, so every
// stage of the cp.async pipeline turns over many times. Checked against float64 and run twice: the forward
// has no atomics, so a race shows as two different results.
TEST(FlashFwdCudaStress, LongPacksMeetTheRuleAndAreDeterministic) {
  DCP_SKIP_WITHOUT_GPU();
  const FlashCase c{"stress: 4096 tokens, 8 heads, GQA, d=128", {3001, 1000, 95}, {}, {}, 8, 4, 128, true};
  expect_pass(check_flash_fwd(c, kCuda), c.what);
  const FlashInputs in = flash_inputs(c, 7);
  std::vector<uint16_t> o1(in.q.size()), o2(in.q.size());
  std::vector<float> l1(static_cast<size_t>(in.bq.total_tokens() * in.s.heads)), l2(l1.size());
  flash_fwd_cuda(c.half, in.bq, in.bk, in.s, in.qh, in.kh, in.vh, o1, l1);
  flash_fwd_cuda(c.half, in.bq, in.bk, in.s, in.qh, in.kh, in.vh, o2, l2);
  EXPECT_EQ(o1, o2);
  EXPECT_EQ(0, std::memcmp(l1.data(), l2.data(), l1.size() * sizeof(float)));
}

TEST(FlashBwdCudaStress, LongPacksMeetTheRule) {
  DCP_SKIP_WITHOUT_GPU();
  const FlashCase c{"stress: 2048 tokens, 8 heads, GQA, d=128", {1500, 500, 48}, {}, {}, 8, 4, 128, true};
  expect_pass(check_flash_bwd(c, flash_bwd_cuda), c.what);
}

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
