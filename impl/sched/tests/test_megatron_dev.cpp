// Hand-worked cases for the DEV port (next_hdp_group_packing_aware, reference §2.3). Each expected
// plan is derived by hand from the Megatron source in the comment above it.
#include "plan/validate.h"
#include "sched/megatron_dev.h"
#include "test_inputs.h"

#include <gtest/gtest.h>

namespace dcp::sched {
namespace {

using testing_inputs::cfg;

// N=2, M=100, cap = 100*100*1.05 = 10500. 100 -> rank 0 (10000). 100: rank 0 is full (pack 200 >
// 100); new rank 1: pm = 10000. Third 100: no room at k=1, no free rank at k=1 or 2 -> leftover.
// Call 2: [100] on rank 0, fill doubles it to ranks 0-1.
TEST(MegatronDev, LeftoverWhenNoRoomThenFill) {
  plan::Batch b{{100, 100, 100}};
  EXPECT_EQ(plan::rank_lists_of(megatron_dev_plan(b, cfg(2, 1, 100))),
            (plan::RankLists{{{0}, {1}}, {{2}, {2}}}));
}

// N=4, M=100, cap 6300. 60 -> rank 0 (3600). 30: add to rank 0 gives pm 4500; new rank 1 gives
// max(3600, 900) = 3600 < 4500 -> new. 30: rank 0 -> 4500, rank 1 -> max(3600, 1800) = 3600 -> rank 1.
// fill: first size-1 group (rank 0) -> ranks 0-1, pushing [1,2] to rank 2; then rank 2 -> ranks 2-3.
TEST(MegatronDev, ProjectedMaxPicksIdleGroupThenFills) {
  plan::Batch b{{60, 30, 30}};
  EXPECT_EQ(plan::rank_lists_of(megatron_dev_plan(b, cfg(4, 1, 100))),
            (plan::RankLists{{{0}, {0}, {1, 2}, {1, 2}}}));
}

// N=8, M=100: [50] rank 0, [50] rank 1 (pm 2500 = current max, smaller k wins); fill: rank 0 ->
// 0-1 (pushing rank 1 to 2), rank 2 -> 2-3, then 0-3 (pushing to 4-5), then 4-7.
TEST(MegatronDev, FillDoublesPowerOfTwoPool) {
  plan::Batch b{{50, 50}};
  EXPECT_EQ(plan::rank_lists_of(megatron_dev_plan(b, cfg(8, 1, 100))),
            (plan::RankLists{{{0}, {0}, {0}, {0}, {1}, {1}, {1}, {1}}}));
}

// N=6 under d48bd6be0a's rules (sizes 1, 2, 4): [0] rank 0, [1] rank 1; fill: rank 0 -> 0-1
// (pushing [1] to 2), [1] -> 2-3, [0] -> 0-3 (pushing [1] to 4-5); [1] cannot grow to 4 (5+2 >= 6)
// -> fill_with_full_dpxcp_group: both samples on all 6 ranks (the later rules agree).
TEST(MegatronDev, NonPowerOfTwoFallsBackToFullPool) {
  plan::Batch b{{50, 50}};
  EXPECT_EQ(plan::rank_lists_of(megatron_dev_plan(b, cfg(6, 1, 100))),
            (plan::RankLists{std::vector<std::vector<int>>(6, std::vector<int>{0, 1})}));
}

// Ties in the sort keep ascending id order; ties in pm keep the earlier candidate (lower group id).
// N=2, M=100, cap 4200: id0 -> rank 0 (1600); id1: add gives 3200, new rank 1 gives 1600 -> new;
// id2: rank 0 and rank 1 both give pm 3200 -> the first, rank 0; id3: rank 0 is full (120 > 100)
// -> rank 1.
TEST(MegatronDev, TiesKeepEarlierCandidate) {
  plan::Batch b{{40, 40, 40, 40}};
  EXPECT_EQ(plan::rank_lists_of(megatron_dev_plan(b, cfg(2, 1, 100))), (plan::RankLists{{{0, 2}, {1, 3}}}));
}

TEST(MegatronDev, EmptyBatchGivesNoMicrobatches) {
  EXPECT_TRUE(megatron_dev_plan(plan::Batch{}, cfg(4, 1, 100)).microbatches.empty());
}

}  // namespace
}  // namespace dcp::sched
