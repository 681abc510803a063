// GroupCostMemo (simulator.h): a simulation with the memo is the simulation without it, to the bit,
// whether the memo hits, misses or has been cleared; the key holds what a group's costs depend on.
#include "core/error.h"
#include "core/rng.h"
#include "sim/simulator.h"
#include "sim_fixtures.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace dcp::sim {
namespace {

using namespace fixtures;

// Every op cost, group and field of two schedule inputs equal (OpCost's defaulted ==: no field
// can be left out of the comparison).
void expect_same_costs(const ScheduleInput& a, const ScheduleInput& b) {
  ASSERT_EQ(a.cost.size(), b.cost.size());
  for (size_t mb = 0; mb < a.cost.size(); ++mb) {
    ASSERT_EQ(a.cost[mb].size(), b.cost[mb].size()) << "micro-batch " << mb;
    for (size_t g = 0; g < a.cost[mb].size(); ++g)
      EXPECT_TRUE(a.cost[mb][g] == b.cost[mb][g]) << "micro-batch " << mb << " group " << g;
  }
}

// Llama3-8B on the public H100 profile with a pool of 8 ranks (dp 2 x cp 4).
cost::CostModel pool8(int pp, int vpp, int gpus_per_node) {
  auto cm = h100_llama3_8b(8 * pp, pp, 4, vpp, gpus_per_node);
  return cm;
}

TEST(GroupCostMemo, SimulationsEqualThoseWithoutIt) {
  Rng rng(59);
  int plans = 0;
  for (const auto& [pp, vpp, per_node] : std::vector<std::tuple<int, int, int>>{{1, 1, 8}, {4, 1, 8}, {4, 2, 6}, {2, 1, 2}}) {
    const auto cm = pool8(pp, vpp, per_node);
    for (const int64_t pad_to : {int64_t{0}, int64_t{4096}}) {
      for (int rep = 0; rep < 3; ++rep) {
        plan::Batch batch;
        plan::Plan p = random_pool8_plan(rng, batch, 1, 4000, pad_to);
        GroupCostMemo memo(cm);
        const StepResult plain = simulate_step(p, batch, cm);
        const StepResult first = simulate_step(p, batch, cm, {}, Bound::compute, &memo);
        // The same micro-batches in reverse order: every group a hit.
        const auto misses = memo.stats().misses;
        std::reverse(p.microbatches.begin(), p.microbatches.end());
        const StepResult reversed_plain = simulate_step(p, batch, cm);
        const StepResult reversed = simulate_step(p, batch, cm, {}, Bound::compute, &memo);
        EXPECT_EQ(memo.stats().misses, misses);
        EXPECT_GT(memo.stats().hits, 0);
        EXPECT_EQ(plain.step_s, first.step_s);
        EXPECT_EQ(plain.peak_memory_bytes, first.peak_memory_bytes);
        EXPECT_EQ(plain.schedule.imbalance_s, first.schedule.imbalance_s);
        EXPECT_EQ(reversed_plain.step_s, reversed.step_s);
        EXPECT_EQ(reversed_plain.schedule.comm_s, reversed.schedule.comm_s);
        expect_same_costs(build_schedule_input(p, batch, cm), build_schedule_input(p, batch, cm, &memo));
        ++plans;
      }
    }
  }
  EXPECT_EQ(plans, 4 * 2 * 3);
}

TEST(GroupCostMemo, KeyHoldsTheFirstRankAndTheLayout) {
  // 6 GPUs per node, pool 8 at pp 1: a group of 4 at rank 0 stays on node 0 (GPUs 0-3), one at
  // rank 4 spans nodes 0 and 1 (GPUs 4-7), so the same lengths cost more there (its ring runs
  // over the inter-node link).
  const auto cm = pool8(1, 1, 6);
  plan::Batch batch{{3000, 3000, 900, 900}};
  plan::Plan p;
  p.planner = "test";
  p.config.dp = 2;
  p.config.cp = 4;
  p.config.max_seqlen_per_rank = 16384;
  p.microbatches.push_back({{{0, 4, {0, 2}}, {4, 4, {1, 3}}}});
  GroupCostMemo memo(cm);
  const ScheduleInput with = build_schedule_input(p, batch, cm, &memo);
  const ScheduleInput without = build_schedule_input(p, batch, cm);
  expect_same_costs(with, without);
  EXPECT_GT(without.cost[0][1][0].bwd_s, without.cost[0][0][0].bwd_s);  // the test discriminates
  EXPECT_EQ(memo.stats().misses, 2);
  // A padded plan of the same groups runs TE's bshd ring: another layout, so other entries.
  p.pad_to = 3000;
  plan::Batch padded{{3000, 3000, 3000, 3000}};
  plan::Plan thd = p;
  thd.pad_to = 0;
  expect_same_costs(build_schedule_input(p, batch, cm, &memo), build_schedule_input(p, batch, cm));
  expect_same_costs(build_schedule_input(thd, padded, cm, &memo), build_schedule_input(thd, padded, cm));
  EXPECT_EQ(memo.stats().misses, 6);  // 2 groups x (thd 3000/900, bshd 3000/3000, thd 3000/3000)
}

TEST(GroupCostMemo, StaysWithinItsBoundAndStaysExact) {
  const auto cm = pool8(4, 2, 8);
  Rng rng(7);
  plan::Batch batch;
  const plan::Plan p = random_pool8_plan(rng, batch, 1, 4000);
  // Room for about two entries (8 virtual stages x 88 B + key + 96 B each): cleared many times.
  GroupCostMemo memo(cm, 2 * (8 * sizeof(OpCost) + 6 * sizeof(int64_t) + 96));
  for (int rep = 0; rep < 2; ++rep) {
    EXPECT_EQ(simulate_step(p, batch, cm, {}, Bound::skip, &memo).step_s, simulate_step(p, batch, cm, {}, Bound::skip).step_s);
    const auto st = memo.stats();
    EXPECT_LE(st.bytes, 2 * (8 * sizeof(OpCost) + 6 * sizeof(int64_t) + 96));
    EXPECT_LE(st.entries, 2u);
    EXPECT_GT(st.clears, 0);
  }
  // A memo of 0 bytes keeps nothing and still answers.
  GroupCostMemo none(cm, 0);
  EXPECT_EQ(simulate_step(p, batch, cm, {}, Bound::skip, &none).step_s, simulate_step(p, batch, cm, {}, Bound::skip).step_s);
  EXPECT_EQ(none.stats().entries, 0u);
  EXPECT_EQ(none.stats().hits, 0);
}

TEST(GroupCostMemo, RefusesAnotherCostModel) {
  const auto cm = pool8(1, 1, 8);
  const auto other = pool8(1, 1, 8);  // equal, but not the one the memo was made for
  GroupCostMemo memo(cm);
  plan::Batch batch;
  Rng rng(3);
  const plan::Plan p = random_pool8_plan(rng, batch, 1, 4000);
  EXPECT_THROW(simulate_step(p, batch, other, {}, Bound::skip, &memo), Error);
}

}  // namespace
}  // namespace dcp::sim
