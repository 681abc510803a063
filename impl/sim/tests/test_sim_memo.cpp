// Simulations with a cost::AttnTermsMemo (the planners' scorers pass one, harness
// planner_options_of) are the simulations without it, to the bit: on random plans, after the
// memo has seen other plans of the same samples, with the groups' samples in another order.
#include "core/error.h"
#include "core/rng.h"
#include "sim/simulator.h"
#include "sim_fixtures.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>

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
cost::CostModel pool8(int pp, int vpp, int gpus_per_node) { return h100_llama3_8b(8 * pp, pp, 4, vpp, gpus_per_node); }

TEST(AttnTermsMemo, SimulationsEqualThoseWithoutIt) {
  Rng rng(59);
  int plans = 0;
  for (const auto& [pp, vpp, per_node] : std::vector<std::tuple<int, int, int>>{{1, 1, 8}, {4, 1, 8}, {4, 2, 6}, {2, 1, 2}}) {
    const auto cm = pool8(pp, vpp, per_node);
    cost::AttnTermsMemo memo(cm);  // shared by every plan of this cost model
    for (const int64_t pad_to : {int64_t{0}, int64_t{4096}}) {
      for (int rep = 0; rep < 3; ++rep) {
        plan::Batch batch;
        plan::Plan p = random_pool8_plan(rng, batch, 1, 4000, pad_to);
        for (int order = 0; order < 2; ++order) {  // then the micro-batches reversed: every sample seen
          const StepResult plain = simulate_step(p, batch, cm);
          const StepResult memoised = simulate_step(p, batch, cm, {}, Bound::compute, &memo);
          EXPECT_EQ(plain.step_s, memoised.step_s);
          EXPECT_EQ(plain.peak_memory_bytes, memoised.peak_memory_bytes);
          EXPECT_EQ(plain.schedule.comm_s, memoised.schedule.comm_s);
          EXPECT_EQ(plain.schedule.imbalance_s, memoised.schedule.imbalance_s);
          expect_same_costs(build_schedule_input(p, batch, cm), build_schedule_input(p, batch, cm, &memo));
          std::reverse(p.microbatches.begin(), p.microbatches.end());
        }
        ++plans;
      }
    }
    EXPECT_GT(memo.entries(), 0u);
  }
  EXPECT_EQ(plans, 4 * 2 * 3);
}

TEST(AttnTermsMemo, GroupsOfTheSameSamplesInAnotherOrder) {
  // A group's per-layer sums run over its samples in order, and floating-point addition is not
  // associative: with the memo the sums must still be taken in each group's own order (a memo
  // that summed per distinct sample set, or sorted, would fail here). Three lengths whose two
  // orders give different costs (found here, so the test discriminates), both orders in one plan.
  const auto cm = pool8(4, 1, 8);
  const std::vector<int64_t> pool{8191, 3, 1300, 40000, 128, 777, 2049, 65536, 5, 12345};
  bool found = false;
  for (size_t a = 0; a < pool.size() && !found; ++a)
    for (size_t b = 0; b < pool.size() && !found; ++b)
      for (size_t c = 0; c < pool.size() && !found; ++c) {
        if (a == b || b == c || a == c) continue;
        const std::vector<int64_t> fwd{pool[a], pool[b], pool[c]}, rev{pool[c], pool[b], pool[a]};
        if (cost::group_stage_times_all(cm, fwd, 4, 0) == cost::group_stage_times_all(cm, rev, 4, 0)) continue;
        found = true;
        plan::Batch batch{{pool[a], pool[b], pool[c], pool[a], pool[b], pool[c], 100, 100}};
        plan::Plan p;
        p.planner = "test";
        p.config.dp = 2;
        p.config.cp = 4;
        p.config.max_seqlen_per_rank = 65536;
        p.microbatches.push_back({{{0, 4, {0, 1, 2}}, {4, 4, {6}}}});
        p.microbatches.push_back({{{0, 4, {5, 4, 3}}, {4, 4, {7}}}});
        cost::AttnTermsMemo memo(cm);
        expect_same_costs(build_schedule_input(p, batch, cm, &memo), build_schedule_input(p, batch, cm));
        EXPECT_EQ(memo.entries(), 4u);  // three lengths and 100, at k = 4
      }
  EXPECT_TRUE(found) << "no order-dependent triple: the test does not discriminate";
}

TEST(AttnTermsMemo, RefusesAnotherCostModel) {
  const auto cm = pool8(1, 1, 8);
  const auto other = pool8(1, 1, 8);  // equal, but not the one the memo was made for
  cost::AttnTermsMemo memo(cm);
  plan::Batch batch;
  Rng rng(3);
  const plan::Plan p = random_pool8_plan(rng, batch, 1, 4000);
  EXPECT_THROW(simulate_step(p, batch, other, {}, Bound::skip, &memo), Error);
}

}  // namespace
}  // namespace dcp::sim
