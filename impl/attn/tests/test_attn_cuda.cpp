// CUDA varlen attention forward against the float64 reference (label gpu). Skips without a
// device. Cases: the varlen table at cp=1 (length 1, block +-1, long, many short, padding between
// and after, zero-length sequences, GQA d=128, non-causal) plus d=64 and d=128 MHA.
#include <gtest/gtest.h>

#include <string>

#include "attn/compare.h"
#include "attn/cuda/attn_cuda.h"
#include "attn/tolerances.h"
#include "attn_test_util.h"
#include "gpu_test_util.h"

namespace dcp::attn {
namespace {

using namespace dcp::attn::testing;

class AttnFwdCuda : public ::testing::TestWithParam<int> {};

TEST_P(AttnFwdCuda, MatchesFloat64Reference) {
  DCP_SKIP_WITHOUT_GPU();
  const auto cases = varlen_cases(1);
  VarlenCase c = GetParam() < static_cast<int>(cases.size())
                     ? cases[GetParam()]
                     : VarlenCase{"MHA d=" + std::to_string(GetParam() == 8 ? 64 : 128),
                                  {300, 77, 1}, {0, 1, 2}, 4, 4, GetParam() == 8 ? 64 : 128, true};
  const ThdBatch b = case_batch(c, 1);
  const AttnShape s = case_shape(c);
  const RefResult ref = reference<float>(b, s, 42);
  std::vector<float> q(ref.q.begin(), ref.q.end()), k(ref.k.begin(), ref.k.end()),
      v(ref.v.begin(), ref.v.end()), out(ref.out.size()), lse(ref.lse.size());
  attn_fwd_cuda(b, s, q, k, v, out, lse);
  const Tolerance tol = kTolF32;
  const auto co = compare_to_ref<float>(ref.out, out);
  const auto cl = compare_to_ref<float>(ref.lse, lse);
  EXPECT_TRUE(co.within(tol.rel_to_max)) << c.what << ": " << co.report("out");
  EXPECT_TRUE(cl.within(tol.rel_to_max)) << c.what << ": " << cl.report("lse");
}

INSTANTIATE_TEST_SUITE_P(AttnFwd, AttnFwdCuda, ::testing::Range(0, 10),
                         [](const auto& info) { return "f32_case" + std::to_string(info.param); });

}  // namespace
}  // namespace dcp::attn
