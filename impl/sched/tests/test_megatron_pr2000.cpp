// Hand-worked cases for the PR2000 port (next_hdp_group, reference §2.2). Each expected plan is
// derived by hand from the Megatron source, step by step in the comment above it.
#include "plan/validate.h"
#include "sched/megatron_pr2000.h"
#include "test_inputs.h"

#include <gtest/gtest.h>

namespace dcp::sched {
namespace {

using megatron::SeqItem;

using testing_inputs::cfg;

std::vector<SeqItem> items(const std::vector<int64_t>& lengths) {
  std::vector<SeqItem> out;
  for (size_t i = 0; i < lengths.size(); ++i) out.push_back(SeqItem{static_cast<int>(i), lengths[i]});
  return out;
}

std::vector<std::vector<int>> bucket_ids(const std::vector<BucketRange>& b, const std::vector<SeqItem>& in) {
  std::vector<std::vector<int>> out;
  for (const auto& r : b) {
    out.emplace_back();
    for (int i = r.begin; i < r.end; ++i) out.back().push_back(in[i].id);
  }
  return out;
}

// M=100: cp_min 4,2,1,1,1,1 -> k=3; work 40000,20000,10000,10000,2500,2500: target 28333.3,
// 1.1*target 31166.7. i=1: 60000 > 31166.7 closes [0]. i=2: 30000 fits. i=3: 40000 closes [1,2].
// i=4,5: 12500, 15000 fit; the guard len-i <= remaining_k - len(buckets) = 1 - 2 never fires.
TEST(MegatronPr2000, BucketsCloseAtOnePointOneTarget) {
  const auto in = items({400, 200, 100, 100, 50, 50});
  EXPECT_EQ(bucket_ids(megatron_pr2000_buckets(in, 100, 1), in),
            (std::vector<std::vector<int>>{{0}, {1, 2}, {3, 4, 5}}));
}

// One CP size (k=1): the guard len - i <= remaining_k - len(buckets) = 1 - 0 fires at the last
// sample, so the last sample gets a bucket of its own although 5000 <= 1.1 * 5000.
TEST(MegatronPr2000, BucketGuardClosesBeforeLastSample) {
  const auto in = items({50, 40, 30});
  EXPECT_EQ(bucket_ids(megatron_pr2000_buckets(in, 100, 1), in), (std::vector<std::vector<int>>{{0, 1}, {2}}));
}

// N=2, M=100, buckets [[0,1],[2]]: 50 -> new group rank 0 (2500), 40 -> new group rank 1 (1600),
// 30: no free rank; groups of size 1 with room: rank 0 (load 2500), rank 1 (load 1600) -> rank 1.
TEST(MegatronPr2000, LeastLoadedGroupWithRoom) {
  plan::Batch b{{50, 40, 30}};
  const auto p = megatron_pr2000_plan(b, cfg(2, 1, 100));
  EXPECT_EQ(plan::rank_lists_of(p), (plan::RankLists{{{0}, {1, 2}}}));
}

// N=4, M=150: cp_min 2,1,1,1; buckets [[0],[1],[2,3]] (39881 and 39762 > 1.1 * 29893.5).
// 200 -> ranks 0-1 (20000); 141 -> rank 2 (19881): cp 1 < prev_needed 2 sets check_balance; rank 3
// idle so min 0. 141 -> rank 3: max-min = 119 <= 0.05*20000 with samples left -> break.
// Without the break the 5 would join rank 2 (141+5 <= 150). Call 2: [5] on rank 0, then
// fill_empty_gpus doubles it to ranks 0-1, then 0-3.
TEST(MegatronPr2000, BalanceBreakEndsMicrobatch) {
  plan::Batch b{{200, 141, 141, 5}};
  const auto p = megatron_pr2000_plan(b, cfg(4, 1, 150));
  EXPECT_EQ(plan::rank_lists_of(p), (plan::RankLists{{{0}, {0}, {1}, {2}}, {{3}, {3}, {3}, {3}}}));
}

// N=8, M=100: [200] on ranks 0-1, [100] on rank 2; ranks 3-7 empty. fill: smallest size 1 (rank 2)
// -> ranks 2-3; smallest size 2, first group (ranks 0-1) -> ranks 0-3, pushing [100] to 4-5; then
// [100] -> 4-7.
TEST(MegatronPr2000, FillEmptyGpusDoublesFirstSmallestGroupAndPushes) {
  plan::Batch b{{200, 100}};
  const auto p = megatron_pr2000_plan(b, cfg(8, 1, 100));
  ASSERT_EQ(p.microbatches.size(), 1u);
  const auto& g = p.microbatches[0].groups;
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0].first_rank, 0);
  EXPECT_EQ(g[0].cp_size, 4);
  EXPECT_EQ(g[0].samples, std::vector<int>{0});
  EXPECT_EQ(g[1].first_rank, 4);
  EXPECT_EQ(g[1].cp_size, 4);
  EXPECT_EQ(g[1].samples, std::vector<int>{1});
}

// §7m: the candidate scan ignores capacity. N=2, M=100, buckets [[90,80,60,10],[10]]: 90 and 80 open
// ranks 0 and 1; the head 60 counts as placeable (a size-1 group exists) but neither group has room
// and no rank is free, so the call ends although both 10s would fit on rank 0. Call 2: [60] rank 0,
// [10] rank 1, then the last 10 goes to the less loaded rank 1.
TEST(MegatronPr2000, CandidateScanIgnoresCapacity) {
  plan::Batch b{{90, 80, 60, 10, 10}};
  const auto p = megatron_pr2000_plan(b, cfg(2, 1, 100));
  EXPECT_EQ(plan::rank_lists_of(p), (plan::RankLists{{{0}, {1}}, {{2}, {3, 4}}}));
}

// PR2000 sorts once, stably: equal lengths keep ascending id order (§7p).
TEST(MegatronPr2000, StableSortKeepsIdOrderOnTies) {
  plan::Batch b{{7, 9, 7, 9}};
  const auto p = megatron_pr2000_plan(b, cfg(4, 1, 100));
  // buckets (k=1, guard at the last sample): [[1,3,0],[2]]; four free ranks, one sample each.
  EXPECT_EQ(plan::rank_lists_of(p), (plan::RankLists{{{1}, {3}, {0}, {2}}}));
}

TEST(MegatronPr2000, EmptyBatchGivesNoMicrobatches) {
  const auto p = megatron_pr2000_plan(plan::Batch{}, cfg(4, 1, 100));
  EXPECT_TRUE(p.microbatches.empty());
}

}  // namespace
}  // namespace dcp::sched
