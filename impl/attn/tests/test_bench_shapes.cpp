// The CUDA attention benchmark's problems and FLOP count (bench_shapes.h).
#include <gtest/gtest.h>

#include <numeric>

#include "attn/bench_shapes.h"
#include "core/error.h"

namespace dcp::attn {
namespace {

TEST(BenchShapes, Fa3PaperSweepHas16kTokensAndHidden2048) {
  const auto cases = fa3_paper_cases();
  ASSERT_EQ(cases.size(), 24u);  // d {64, 128} x causal {no, yes} x L {512 ... 16k}
  for (const auto& c : cases) {
    EXPECT_EQ(std::accumulate(c.lengths.begin(), c.lengths.end(), int64_t{0}), kBenchTokens) << c.name;
    EXPECT_EQ(c.heads * c.head_dim, kBenchHidden) << c.name;
  }
}

TEST(BenchShapes, FlopsFollowFlashAttentionsCount) {
  AttnBenchCase c;
  c.lengths.assign(32, 512);  // batch 32 x 512
  c.heads = 16;
  c.head_dim = 128;
  c.causal = false;
  const double fa = 4.0 * 32 * 512.0 * 512.0 * 16 * 128;  // 4 * batch * seqlen^2 * nheads * headdim
  EXPECT_DOUBLE_EQ(attn_flops(c, false), fa);
  EXPECT_DOUBLE_EQ(attn_flops(c, true), 2.5 * fa);
  c.causal = true;
  EXPECT_DOUBLE_EQ(attn_flops(c, false), fa / 2);
  c.lengths = {3, 5};  // varlen: the sum of squares
  c.causal = false;
  EXPECT_DOUBLE_EQ(attn_flops(c, false), 4.0 * 16 * 128 * (9 + 25));
}

TEST(BenchShapes, PacksFillTheBudgetExactlyAndDeterministically) {
  const std::vector<int64_t> docs = {0, 7, 100, 5000, 30000, 1};
  const auto a = pack_lengths(docs, kBenchTokens, 3), b = pack_lengths(docs, kBenchTokens, 3),
             c = pack_lengths(docs, kBenchTokens, 4);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  for (const auto& p : {a, c}) {
    EXPECT_EQ(std::accumulate(p.begin(), p.end(), int64_t{0}), kBenchTokens);
    for (int32_t l : p) {
      EXPECT_GT(l, 0);
      EXPECT_LE(l, 30000);
    }
  }
  EXPECT_THROW(pack_lengths({0, 0}, 10, 1), InputError);
  EXPECT_THROW(pack_lengths({5}, 0, 1), InputError);
}

}  // namespace
}  // namespace dcp::attn
