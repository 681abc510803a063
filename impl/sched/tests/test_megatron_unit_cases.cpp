// Megatron-LM's own scheduler unit cases (reference §8, tests/unit_tests/test_sequence_packing.py
// at DEV d48bd6be0a), reproduced on both ports where they apply.
#include "plan/validate.h"
#include "sched/megatron_dev.h"
#include "sched/megatron_pr2000.h"
#include "test_inputs.h"

#include <gtest/gtest.h>

namespace dcp::sched {
namespace {

using testing_inputs::cfg;

// test_next_hdp_group_packing_aware_can_use_larger_cp_group_for_short_sequences:
// [(0,6144),(1,2048)], N=2, M=4096 -> ids [[0,1],[0,1]], no leftovers.
TEST(MegatronUnitCases, DevLargerCpGroupForShortSequences) {
  plan::Batch batch{{6144, 2048}};
  const auto r = megatron_dev_next_group({{0, 6144}, {1, 2048}}, cfg(1, 2, 4096), batch);
  EXPECT_TRUE(r.leftovers.empty());
  ASSERT_EQ(r.groups.size(), 1u);
  EXPECT_EQ(r.groups[0].first_rank, 0);
  EXPECT_EQ(r.groups[0].cp_size, 2);
  EXPECT_EQ(r.groups[0].samples, (std::vector<int>{0, 1}));
  EXPECT_FALSE(r.fallback);
}

// ..._fills_non_power_of_two_dpxcp_group: [(0,50),(1,50)], N=14, M=100 -> all 14 ranks [0,1].
TEST(MegatronUnitCases, DevFillsNonPowerOfTwoPool) {
  plan::Batch batch{{50, 50}};
  const auto r = megatron_dev_next_group({{0, 50}, {1, 50}}, cfg(7, 2, 100), batch);
  EXPECT_TRUE(r.leftovers.empty());
  ASSERT_EQ(r.groups.size(), 1u);
  EXPECT_EQ(r.groups[0].cp_size, 14);
  EXPECT_EQ(r.groups[0].samples, (std::vector<int>{0, 1}));
  const auto p = megatron_dev_plan(batch, cfg(7, 2, 100));
  ASSERT_EQ(p.microbatches.size(), 1u);
  EXPECT_EQ(plan::rank_lists_of(p)[0], std::vector<std::vector<int>>(14, std::vector<int>{0, 1}));
}

// test_default_dynamic_cp_scheduler_uses_packing_aware_grouping_by_default:
// dp=1, cp=2, M=4096 -> [[[0,1],[0,1]]].
TEST(MegatronUnitCases, DevSchedulerDefault) {
  plan::Batch batch{{6144, 2048}};
  const auto p = megatron_dev_plan(batch, cfg(1, 2, 4096));
  EXPECT_EQ(plan::rank_lists_of(p), (plan::RankLists{{{0, 1}, {0, 1}}}));
}

}  // namespace
}  // namespace dcp::sched
