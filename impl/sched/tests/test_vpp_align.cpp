// align_sample_id_groups (reference §2.4) on hand-made micro-batches: Megatron's splits and CP
// expansions reproduced exactly, and its failures (§7f hang, §7g assertion) turned into valid
// plans or a clear error.
#include "core/error.h"
#include "sched/vpp_align.h"

#include <gtest/gtest.h>

namespace dcp::sched {
namespace {

using Lists = std::vector<std::vector<int>>;

AlignContext ctx_for(int n, const std::vector<int64_t>& lengths, int64_t m = 100) {
  return AlignContext{n, 1, m, &lengths};
}

// N=8, one micro-batch [A A A A B B C C], multiple 2. Runs 4,2,2; the split point is the first
// boundary >= 4. old = [A A A A _ _ _ _]: all runs equal and 4 <= 4 empty -> A doubled to 8 ranks
// (fill_empty walks to i = -1 here, §7a). new = [B B C C _ _ _ _]: first pass doubles B over C's
// slots and shifts C ([B B B B C C _ _]), second pass doubles C -> [B B B B C C C C].
// groups[0] = new, old appended.
TEST(VppAlign, SplitsLastMicrobatchAndExpandsHalves) {
  const std::vector<int64_t> lengths{100, 100, 100};
  AlignStats st;
  const auto out = align_sample_id_groups({{{0}, {0}, {0}, {0}, {1}, {1}, {2}, {2}}}, 2, ctx_for(8, lengths), &st);
  EXPECT_EQ(out, (plan::RankLists{{{1}, {1}, {1}, {1}, {2}, {2}, {2}, {2}}, Lists(8, {0})}));
  EXPECT_EQ(st.megatron_splits, 1);
  EXPECT_EQ(st.fallback_splits, 0);
}

// Three micro-batches, multiple 4: the last one is a single group (cannot split), so Megatron walks
// back to micro-batch 1 [3 3 4 5]: old [3 3 _ _] -> [3 3 3 3]; new [4 5 _ _] -> [4 4 5 5].
TEST(VppAlign, SkipsUnsplittableTailMicrobatch) {
  const std::vector<int64_t> lengths(7, 10);
  AlignStats st;
  const auto out = align_sample_id_groups({{{0}, {0}, {1}, {2}}, {{3}, {3}, {4}, {5}}, Lists(4, {6})}, 4,
                                          ctx_for(4, lengths), &st);
  EXPECT_EQ(out, (plan::RankLists{{{0}, {0}, {1}, {2}}, {{4}, {4}, {5}, {5}}, Lists(4, {6}), Lists(4, {3})}));
  EXPECT_EQ(st.megatron_splits, 1);
  EXPECT_EQ(st.failed_splits, 1);
}

TEST(VppAlign, AlreadyAlignedIsUnchanged) {
  const std::vector<int64_t> lengths(2, 10);
  const plan::RankLists in{{{0}, {1}}, {{1}, {0}}};
  EXPECT_EQ(align_sample_id_groups(in, 2, ctx_for(2, lengths)), in);
}

// §7f: N=6, [A A A A B C] (Megatron's PR2000 micro-batch for [400,100,100], M=100): the old half
// [A A A A _ _] never changes in fill_empty, so Megatron loops forever. Here that split fails and
// the fallback splits the samples onto the whole pool: [0,1] and [2].
TEST(VppAlign, NonPowerOfTwoHangBecomesWholePoolSplit) {
  const std::vector<int64_t> lengths{400, 100, 100};
  AlignStats st;
  const auto out = align_sample_id_groups({{{0}, {0}, {0}, {0}, {1}, {2}}}, 2, ctx_for(6, lengths), &st);
  EXPECT_EQ(out, (plan::RankLists{Lists(6, {0, 1}), Lists(6, {2})}));
  EXPECT_EQ(st.megatron_splits, 0);
  EXPECT_EQ(st.fallback_splits, 1);
}

// §7g: every micro-batch holds one sample on the whole pool: no split exists, and there are fewer
// samples than the next multiple needs -> a clear InputError instead of an AssertionError.
TEST(VppAlign, ImpossibleAlignmentIsInputError) {
  const std::vector<int64_t> lengths{800, 790, 780};
  try {
    align_sample_id_groups({Lists(8, {0}), Lists(8, {1}), Lists(8, {2})}, 2, ctx_for(8, lengths));
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("multiple of vpp_group 2"), std::string::npos) << e.what();
  }
}

TEST(VppAlign, SplitGroupReportsWhy) {
  const std::vector<int64_t> lengths{10};
  Lists a, b;
  std::string why;
  EXPECT_FALSE(megatron_split_group(Lists(4, {0}), ctx_for(4, lengths), &a, &b, &why));
  EXPECT_EQ(why, "a single CP group cannot be split");
  EXPECT_FALSE(megatron_split_group({{0}, {0}, {1}, {1}, {1}, {1}, {2}, {2}}, ctx_for(8, {10, 10, 10}), &a, &b, &why));
  EXPECT_NE(why.find("not decreasing"), std::string::npos);
}

}  // namespace
}  // namespace dcp::sched
