// The tensor-core attention forward and backward (flash/flash_{fwd,bwd}_block.h) run by the host emulator
// (flash_emu.h) against the float64 reference under the FlashAttention rule (flash_cases.h):
// the kernel's own tiling, masking, fragment indexing and online softmax, checked without a GPU.
// The CUDA build runs the same cases on the device (test_flash_cuda.cpp, label gpu).
#include <gtest/gtest.h>

#include "attn/cta_emu.h"
#include "attn/flash/flash_common.h"
#include "attn/flash/flash_fwd_block.h"
#include "attn/flash_emu.h"
#include "attn/flash_ring.h"
#include "attn/tolerances.h"
#include "flash_cases.h"

namespace dcp::attn {
namespace {

using namespace dcp::attn::testing;

const FlashFwd kEmulated = fwd_with_tiles(flash_fwd_emulated, flash::kFwdTilesM);

const FlashBwd kEmulatedBwd = [](Half h, const ThdBatch& bq, const ThdBatch& bk, const AttnShape& s,
                                 std::span<const uint16_t> q, std::span<const uint16_t> k, std::span<const uint16_t> v,
                                 std::span<const uint16_t> out, std::span<const float> lse,
                                 std::span<const uint16_t> dout, std::span<uint16_t> dq, std::span<uint16_t> dk,
                                 std::span<uint16_t> dv) { flash_bwd_emulated(h, bq, bk, s, q, k, v, out, lse, dout, dq, dk, dv); };

class FlashFwdEmulated : public ::testing::TestWithParam<int> {};

TEST_P(FlashFwdEmulated, MeetsTheRuleAgainstFloat64) {
  if (sanitized_subset_skips(GetParam())) GTEST_SKIP() << "sanitizer build: run in the normal build";
  const FlashCase c = flash_fwd_cases()[GetParam()];
  expect_pass(check_flash_fwd(c, kEmulated), c.what);
}

INSTANTIATE_TEST_SUITE_P(Cases, FlashFwdEmulated,
                         ::testing::Range(0, static_cast<int>(flash_fwd_cases().size())));

// The forward with one m16 tile per warp (64-row CTAs), the variant bench_attn_cuda times beside
// the kernel's two: the same cases, the same rule, cp.async completed only at its wait.
class FlashFwdEmulatedOneTile : public ::testing::TestWithParam<int> {};

TEST_P(FlashFwdEmulatedOneTile, MeetsTheRuleAgainstFloat64) {
  if (sanitized_subset_skips(GetParam())) GTEST_SKIP() << "sanitizer build: run in the normal build";
  const emu::ScopedCpAsync deferred(emu::CpAsync::deferred);
  const FlashCase c = flash_fwd_cases()[GetParam()];
  expect_pass(check_flash_fwd(c, fwd_with_tiles(flash_fwd_emulated, 1)), c.what);
}

INSTANTIATE_TEST_SUITE_P(Cases, FlashFwdEmulatedOneTile,
                         ::testing::Range(0, static_cast<int>(flash_fwd_cases().size())));

// The same cases with cp.async completed only at the wait that retires it (cta_emu.h, CpAsync):
// the forward's and the backward's prefetches wait and synchronise before they read each tile.
class FlashFwdEmulatedDeferredCopies : public ::testing::TestWithParam<int> {};

TEST_P(FlashFwdEmulatedDeferredCopies, MeetsTheRuleAgainstFloat64) {
  if (sanitized_subset_skips(GetParam())) GTEST_SKIP() << "sanitizer build: run in the normal build";
  const emu::ScopedCpAsync deferred(emu::CpAsync::deferred);
  const FlashCase c = flash_fwd_cases()[GetParam()];
  expect_pass(check_flash_fwd(c, kEmulated), c.what);
}

INSTANTIATE_TEST_SUITE_P(Cases, FlashFwdEmulatedDeferredCopies,
                         ::testing::Range(0, static_cast<int>(flash_fwd_cases().size())));

class FlashBwdEmulatedDeferredCopies : public ::testing::TestWithParam<int> {};

TEST_P(FlashBwdEmulatedDeferredCopies, MeetsTheRuleAgainstFloat64) {
  if (sanitized_subset_skips(GetParam())) GTEST_SKIP() << "sanitizer build: run in the normal build";
  const emu::ScopedCpAsync deferred(emu::CpAsync::deferred);
  const FlashCase c = flash_fwd_cases()[GetParam()];
  expect_pass(check_flash_bwd(c, kEmulatedBwd), c.what);
}

INSTANTIATE_TEST_SUITE_P(Cases, FlashBwdEmulatedDeferredCopies,
                         ::testing::Range(0, static_cast<int>(flash_fwd_cases().size())));

// The forward skips the mask on a key block only when the mask would keep every score of it:
// for every row from the CTA's first on and every key of the block (flash_params.h's rule).
// Exhaustive over small extents, both causal settings; and the shortcut does occur.
TEST(FlashFwdUnmasked, OnlyWhereTheMaskKeepsEveryScore) {
  int shortcuts = 0;
  for (const bool causal : {true, false})
    for (int len_q = 0; len_q <= 200; len_q += 7)
      for (int len_k = 0; len_k <= 260; len_k += 13)
        for (int row0 = 0; row0 < len_q; row0 += 16)
          for (int key0 = 0; key0 < len_k; key0 += flash::kBlockN) {
            if (!flash::key_block_unmasked(key0, row0, len_q, len_k, causal)) continue;
            ++shortcuts;
            for (int i = row0; i < len_q; ++i)
              for (int j = key0; j < key0 + flash::kBlockN; ++j)
                ASSERT_TRUE(j < len_k && (!causal || j <= i + len_k - len_q))
                    << "row " << i << " key " << j << " len_q " << len_q << " len_k " << len_k << " causal " << causal;
          }
  EXPECT_GT(shortcuts, 100);
  EXPECT_TRUE(flash::key_block_unmasked(0, 128, 193, 193, true));     // below the diagonal
  EXPECT_FALSE(flash::key_block_unmasked(128, 128, 193, 193, true));  // the diagonal block
  EXPECT_FALSE(flash::key_block_unmasked(128, 0, 150, 150, false));   // past len_k
}

class FlashBwdEmulated : public ::testing::TestWithParam<int> {};

TEST_P(FlashBwdEmulated, MeetsTheRuleAgainstFloat64) {
  if (sanitized_subset_skips(GetParam())) GTEST_SKIP() << "sanitizer build: run in the normal build";
  const FlashCase c = flash_fwd_cases()[GetParam()];
  expect_pass(check_flash_bwd(c, kEmulatedBwd), c.what);
}

INSTANTIATE_TEST_SUITE_P(Cases, FlashBwdEmulated,
                         ::testing::Range(0, static_cast<int>(flash_fwd_cases().size())));

// Ring CP with the emulated kernels per step, the ranks of a group as virtual ranks: the
// un-sharded result of every rank meets the rule against the float64 reference of the whole
// batch (as CP = 1 does above).
class FlashRingEmulated : public ::testing::TestWithParam<int> {};

TEST_P(FlashRingEmulated, MatchesTheWholeBatch) {
  if (sanitized_subset_skips(GetParam() == 0 ? 0 : 1)) GTEST_SKIP() << "sanitizer build: run in the normal build";
  const FlashRingCase c = flash_ring_cases()[GetParam()];
  HostFlashBackend be;
  expect_pass(check_flash_ring(be, c), c.what);
}

INSTANTIATE_TEST_SUITE_P(Cases, FlashRingEmulated, ::testing::Range(0, static_cast<int>(flash_ring_cases().size())));

// The rule is not vacuous for this kernel: the base-2 factor applied twice to the softmax scale
// (scale x log2 e), or a causal mask on a non-causal problem, fails it.
TEST(FlashFwdEmulatedRule, RejectsAWrongScale) {
  const FlashCase c = flash_fwd_cases()[2];
  const FlashFwdChecks r = check_flash_fwd(c, kEmulated, 7, [](AttnShape& s) { s.softmax_scale = 1.4426950408889634 / std::sqrt(s.head_dim); });
  EXPECT_FALSE(r.out.pass()) << r.out.report("out");
}

TEST(FlashFwdEmulatedRule, RejectsCausalForNonCausal) {
  const FlashCase c = flash_fwd_cases()[6];
  const FlashFwdChecks r = check_flash_fwd(c, kEmulated, 7, [](AttnShape& s) { s.causal = true; });
  EXPECT_FALSE(r.out.pass()) << r.out.report("out");
}

TEST(FlashBwdEmulatedRule, RejectsCausalForNonCausal) {
  const FlashCase c = flash_fwd_cases()[6];
  const FlashBwdChecks r = check_flash_bwd(c, kEmulatedBwd, 7, [](AttnShape& s) { s.causal = true; });
  EXPECT_FALSE(r.dq.pass()) << r.dq.report("dq");
  EXPECT_FALSE(r.dk.pass()) << r.dk.report("dk");
}

// The 16-bit conversions the kernel uses agree with the rounding of the reference side.
TEST(FlashTypes, ConversionsRoundToNearestEven) {
  for (int i = -2000; i <= 2000; ++i) {
    const double x = i * 0.0371 + (i % 7) * 1e-5;
    for (const Half h : {Half::bf16, Half::fp16}) {
      const double want = round_half(x, h);
      EXPECT_EQ(from_bits(to_bits(x, h), h), want) << x;
    }
  }
  // (not below float's normal range: round_bf16 keeps 8 bits there, real bf16 fewer)
  for (const double x : {1e-7, -3e-6, 6.1e-5, 65504.0, 65519.0, 65520.0, 1e6, 3.0e38, 2e-38}) {
    EXPECT_EQ(from_bits(to_bits(x, Half::fp16), Half::fp16), round_fp16(x)) << x;
    EXPECT_EQ(from_bits(to_bits(x, Half::bf16), Half::bf16), round_bf16(static_cast<double>(static_cast<float>(x)))) << x;
  }
}

TEST(FlashFwdEmulatedInput, RejectsUnsupportedHeadDim) {
  FlashCase c = flash_fwd_cases()[0];
  c.head_dim = 96;
  const FlashInputs in = flash_inputs(c, 1);
  std::vector<uint16_t> out(in.q.size());
  std::vector<float> lse(in.bq.total_tokens() * in.s.heads);
  EXPECT_THROW(flash_fwd_emulated(Half::bf16, in.bq, in.bk, in.s, in.qh, in.kh, in.vh, out, lse), InputError);
}

}  // namespace
}  // namespace dcp::attn
