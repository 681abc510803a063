// Simulator tests on hand-checkable schedules (known op costs -> exact times) and on plans through
// the unit-profile time model (where every cost is flops / 1e12).
#include "core/error.h"
#include "core/rng.h"
#include "cost/time_model.h"
#include "plan/validate.h"
#include "sim/rank_share.h"
#include "sim/simulator.h"
#include "sim_fixtures.h"

#include <gtest/gtest.h>

#include <array>

#include <cmath>
#include <numeric>

namespace dcp::sim {
namespace {

using namespace fixtures;

TEST(Schedule, P2pEdgeIsTheLinkBetweenTheTwoStagesBothWays) {
  // pp = 3, one micro-batch, t_f = t_b = 1; only the stage 0 <-> 1 link is slow (10 s).
  // F0 [0,1], F1 [11,12], F2 [12,13], B2 [13,14], B1 [14,15] (link 1<->2 is free),
  // B0 [25,26] (the gradient crosses the slow 0<->1 link again): step = 26.
  ScheduleInput in = singles(1, 3, 1, 1, op(1, 1));
  in.cost[0][0][0].p2p_s = 10;
  const auto r = simulate_schedule(in);
  EXPECT_DOUBLE_EQ(r.step_s, 26.0);
}

TEST(Schedule, OneF1BBubbleFormula) {
  // pp = 4, m = 8, t_f = 1, t_b = 2: step = (m + p - 1)(t_f + t_b) = 33,
  // bubble fraction = (p - 1)/(m + p - 1) = 3/11.
  const auto r = simulate_schedule(singles(1, 4, 1, 8, op(1, 2)));
  EXPECT_DOUBLE_EQ(r.step_s, 33.0);
  EXPECT_NEAR(r.bubble_s / r.step_s, 3.0 / 11.0, 1e-12);
  EXPECT_NEAR(r.imbalance_s, 0.0, 1e-12);
  EXPECT_NEAR(r.compute_s, 24.0, 1e-12);
  EXPECT_EQ(r.events, 4 * 8 * 2);
  expect_breakdown_sums(r);
}

TEST(Schedule, InterleavedShrinksTheBubble) {
  // pp = 2, vpp = 2, m = 4; each chunk does half the work (0.5 fwd, 1 bwd). Megatron's
  // interleaved bubble: (p - 1)/v * (t_f + t_b) = 1.5 on top of m * 3 = 12.
  const auto r = simulate_schedule(singles(1, 2, 2, 4, op(0.5, 1)));
  EXPECT_DOUBLE_EQ(r.step_s, 13.5);
  const auto plain = simulate_schedule(singles(1, 2, 1, 4, op(1, 2)));
  EXPECT_DOUBLE_EQ(plain.step_s, 15.0);  // (4 + 1) * 3
  expect_breakdown_sums(r);
  auto bad = singles(1, 2, 2, 3, op(0.5, 1));
  EXPECT_THROW(simulate_schedule(bad), InputError);  // 3 micro-batches, group of 2
}

TEST(Schedule, P2pDelaysTheDependentStage) {
  // F(s0) [0,1] -> +0.5 -> F(s1) [1.5,2.5] -> B(s1) [2.5,3.5] -> +0.5 -> B(s0) [4,5].
  const auto r = simulate_schedule(singles(1, 2, 1, 1, op(1, 1, 0.5)));
  EXPECT_DOUBLE_EQ(r.step_s, 5.0);
  EXPECT_DOUBLE_EQ(r.busiest_idle_s, 3.0);  // each stage busy 2 s of the 5
}

// With --overlap-grad-reduce and no VPP, Megatron's default align_grad_reduce hides only the first
// stage's reduce behind its last backward; every later stage launches it after its cool-down.
TEST(Schedule, AlignedGradReduceIsExposedAfterTheFirstStage) {
  // pp = 2, m = 1, ops 1 s, no transfer time: s0 F0 [0, 1]; s1 F0 [1, 2] B0 [2, 3]; s0 B0 [3, 4].
  ScheduleInput in = singles(1, 2, 1, 1, op(1, 1));
  in.grad_reduce_s = {0.5, 2.0};
  in.overlap_grad_reduce = true;
  auto r = simulate_schedule(in);
  EXPECT_DOUBLE_EQ(r.gpu[0].sync_s, 0.0);  // 0.5 s behind stage 0's last (1 s) backward
  EXPECT_DOUBLE_EQ(r.gpu[1].sync_s, 2.0);  // launched after the cool-down
  EXPECT_DOUBLE_EQ(r.step_s, 5.0);         // stage 1: 3 + 2
  in.overlap_grad_reduce = false;
  r = simulate_schedule(in);
  EXPECT_DOUBLE_EQ(r.gpu[0].sync_s, 0.5);
  EXPECT_DOUBLE_EQ(r.step_s, 5.0);
  // With VPP every stage still hides its reduce behind its last backward (not aligned here).
  ScheduleInput v = singles(1, 2, 2, 2, op(1, 1));
  v.grad_reduce_s = {0.5, 0.5};
  v.overlap_grad_reduce = true;
  r = simulate_schedule(v);
  EXPECT_DOUBLE_EQ(r.gpu[0].sync_s + r.gpu[1].sync_s, 0.0);
}

// The parts of the DP sync no overlap hides (cost::GradSyncTime, helper-51's review): the gather
// a stage's first forward waits for (overlap without VPP: a later stage's whole buffer, the first
// stage's embedding bucket), the embedding bucket's reduce after the first stage's last backward,
// and the NaN check of the grads before any reduce.
TEST(Schedule, UnhiddenGradSyncParts) {
  // pp = 2, m = 1, ops 1 s: s0 F0 [0, 1]; s1 waits 0.5 for its gather, F0 [1.5, 2.5], B0 [2.5, 3.5];
  // s0 B0 [3.5, 4.5].
  ScheduleInput in = singles(1, 2, 1, 1, op(1, 1));
  in.overlap_grad_reduce = true;
  in.grad_reduce_s = {0.5, 0.0};
  in.grad_gather_s = {0.6, 0.5};
  in.grad_gather_waited_s = {0.0, 0.5};
  auto r = simulate_schedule(in);
  // stage 0: reduce 0.5 behind its 1 s backward, gather 0.6 behind its 1 s forward: nothing at the end
  EXPECT_DOUBLE_EQ(r.step_s, 4.5);
  EXPECT_DOUBLE_EQ(r.gpu[1].comm_s, 0.5);  // the wait is exposed communication, DP sync,
  EXPECT_DOUBLE_EQ(r.gpu[1].sync_s, 0.5);  // not charged again at the end
  expect_breakdown_sums(r);
  // The first stage waits for its embedding bucket (0.2 of its 0.6) at the start: everything
  // after it moves by 0.2; the embedding bucket's reduce (0.3 of 0.5) follows the last backward.
  in.grad_gather_waited_s = {0.2, 0.5};
  in.grad_reduce_tail_s = {0.3, 0.0};
  r = simulate_schedule(in);
  EXPECT_DOUBLE_EQ(r.gpu[0].sync_s, 0.2 + 0.3);  // the wait and the tail; the reduce's other 0.2 hides
  EXPECT_DOUBLE_EQ(r.step_s, 4.7 + 0.3);
  // The NaN check adds to the end of every stage, overlap or not.
  in.grad_check_s = {0.1, 2.0};
  r = simulate_schedule(in);
  EXPECT_DOUBLE_EQ(r.gpu[0].sync_s, 0.2 + 0.4);
  EXPECT_DOUBLE_EQ(r.gpu[1].sync_s, 0.5 + 2.0);
  EXPECT_DOUBLE_EQ(r.step_s, std::max(4.7 + 0.4, 3.7 + 2.0));
  expect_breakdown_sums(r);
}

TEST(Schedule, TwoRanksImbalance) {
  ScheduleInput in = singles(2, 1, 1, 2, op(1, 2));
  in.cost[0][1][0] = op(2, 4);
  in.cost[1][1][0] = op(0.5, 1);
  const auto r = simulate_schedule(in);
  EXPECT_DOUBLE_EQ(r.step_s, 7.5);
  EXPECT_DOUBLE_EQ(r.gpu[0].imbalance_s, 1.5);
  EXPECT_DOUBLE_EQ(r.gpu[1].imbalance_s, 0.0);
  EXPECT_DOUBLE_EQ(r.busiest_idle_s, 0.0);  // rank 1, busy all 7.5 s, sets the step
  EXPECT_DOUBLE_EQ(r.gpu[0].bubble_s, 0.0);  // pp = 1
  expect_breakdown_sums(r);
}

TEST(Schedule, CpGroupWaitsForItsSlowestMember) {
  // mb0: ranks 0 and 1 alone (2 s and 6 s of work); mb1: one group of both ranks (1 + 1 s):
  // it starts at 6 on both ranks, so the step is 8 and rank 0 waits 4 s.
  ScheduleInput in = singles(2, 1, 1, 1, op(1, 1));
  in.cost[0][1][0] = op(3, 3);
  in.groups.push_back({{0, 2}});
  in.cost.push_back({std::vector<OpCost>(1, op(1, 1))});
  const auto r = simulate_schedule(in);
  EXPECT_DOUBLE_EQ(r.step_s, 8.0);
  EXPECT_DOUBLE_EQ(r.gpu[0].imbalance_s, 4.0);
  EXPECT_DOUBLE_EQ(r.gpu[1].imbalance_s, 0.0);
}

TEST(Schedule, CouplingPropagatesThroughThePipeline) {
  // pp = 2, 2 ranks, one micro-batch with a group of both; rank 1 is ready later on stage 0
  // because of a previous solo micro-batch that is slower there.
  ScheduleInput in = singles(2, 2, 1, 1, op(1, 1));
  in.cost[0][1] = {op(2, 1), op(1, 1)};
  in.groups.push_back({{0, 2}});
  in.cost.push_back({std::vector<OpCost>{op(1, 1), op(1, 1)}});
  const auto r = simulate_schedule(in);
  // Stage 0: warmup 1 forward: F0 (rank0 [0,1], rank1 [0,2]); steady: F1 coupled [2,3];
  // stage 1: F0 r0 [1,2] B0 r0 [2,3], r1 [2,3] [3,4]; F1 coupled [3.., after B0 of r1 at 4] = [4,5],
  // B1 [5,6]; stage 0: B0 after its F1: r0 [3,4], r1 needs B0(s1,r1)=4 -> [4,5]; B1 coupled
  // waits for B1(s1) = 6 -> [6,7].
  EXPECT_DOUBLE_EQ(r.step_s, 7.0);
}

TEST(Schedule, DataParallelSync) {
  ScheduleInput in = singles(2, 1, 1, 1, op(1, 2));
  in.grad_reduce_s = {0.5};
  in.grad_gather_s = {0.25};
  in.overlap_grad_reduce = false;
  EXPECT_DOUBLE_EQ(simulate_schedule(in).step_s, 3.75);
  in.overlap_grad_reduce = true;  // 0.5 hidden by the 2 s backward, 0.25 by the 1 s forward
  EXPECT_DOUBLE_EQ(simulate_schedule(in).step_s, 3.0);
  in.grad_reduce_s = {3.0};  // 1 s exposed
  const auto r = simulate_schedule(in);
  EXPECT_DOUBLE_EQ(r.step_s, 4.0);
  EXPECT_DOUBLE_EQ(r.gpu[0].sync_s, 1.0);
  EXPECT_DOUBLE_EQ(r.comm_s, 1.0);
  expect_breakdown_sums(r);
}

TEST(Schedule, RejectsGroupsThatDoNotCoverThePool) {
  ScheduleInput in = singles(2, 1, 1, 1, op(1, 1));
  in.groups[0].pop_back();
  in.cost[0].pop_back();
  EXPECT_THROW(simulate_schedule(in), Error);
}

// ---- plan level (the lower bound: test_sim_bound.cpp) --------------------------------------

TEST(Step, BalancedPlanReachesTheBound) {
  const auto cm = unit_cm(2, 1, 1);
  const plan::Batch batch{{1000, 1000}};
  const auto r = simulate_step(two_rank_plan(), batch, cm);
  const auto st = cost::group_stage_times(cm, std::vector<int64_t>{1000}, 1, 0, 0);
  // sync hidden but for the embedding bucket's gather before the first forward and its reduce
  // after the last backward (cost::GradSyncTime)
  const auto g = cost::grad_sync_time(cm, 0);
  EXPECT_NEAR(r.step_s, st.fwd.total_s() + st.bwd.total_s() + g.gather_waited_s + g.reduce_tail_s, 1e-15);
  EXPECT_NEAR(r.plan_efficiency, 1.0, 1e-12);
  EXPECT_NEAR(r.balance, 1.0, 1e-12);
  EXPECT_EQ(r.source, "simulated:dcp-cost-v2@unit");
  EXPECT_NEAR(r.tflops_per_gpu, r.useful_flops / (r.step_s * 2) / 1e12, 1e-12);
  EXPECT_NEAR(r.tokens_per_s_per_gpu, 2000 / (r.step_s * 2), 1e-6);
}

TEST(Step, ImbalancedPlanLosesEfficiency) {
  const auto cm = unit_cm(2, 1, 1);
  const plan::Batch batch{{1800, 200}};
  const auto r = simulate_step(two_rank_plan(), batch, cm);
  EXPECT_LT(r.plan_efficiency, 0.7);
  EXPECT_GT(r.balance, 1.5);
  EXPECT_GT(r.imbalance_frac, 0.3);
  // Same batch as one CP-2 group: balanced, but pays ring communication.
  plan::Plan cp2 = two_rank_plan();
  cp2.microbatches[0].groups = {{0, 2, {0, 1}}};
  const auto r2 = simulate_step(cp2, batch, cm);
  EXPECT_NEAR(r2.balance, 1.0, 1e-12);
  EXPECT_GT(r2.comm_frac, 0.0);
  EXPECT_GT(r2.plan_efficiency, r.plan_efficiency);
  // Useful FLOPs do not depend on the plan.
  EXPECT_DOUBLE_EQ(r.useful_flops, r2.useful_flops);
}

TEST(Step, RealLengthsDriveUsefulFlops) {
  const auto cm = unit_cm(2, 1, 1);
  const plan::Batch padded{{1024, 1024}};
  const std::vector<int64_t> real{1000, 1000};
  const auto r = simulate_step(two_rank_plan(), padded, cm, real);
  EXPECT_DOUBLE_EQ(r.useful_flops, cost::train_flops_of_lengths(cm.model, real));
  EXPECT_THROW(simulate_step(two_rank_plan(), padded, cm, std::vector<int64_t>{1}), InputError);
}

TEST(Step, PoolMismatchIsAnInputError) {
  const auto cm = unit_cm(4, 1, 1);  // pool 4, plan has 2
  EXPECT_THROW(simulate_step(two_rank_plan(), plan::Batch{{10, 10}}, cm), InputError);
}

TEST(Step, PipelinePlanBreakdownSums) {
  // 8 GPUs: pp 2 x pool 4; 8 micro-batches of mixed group sizes.
  auto cm = unit_cm(8, 2, 2);
  cm.training.recompute_full = true;
  plan::Plan p;
  p.planner = "test";
  p.config.dp = 2;
  p.config.cp = 2;
  p.config.max_seqlen_per_rank = 4096;
  plan::Batch batch;
  for (int mb = 0; mb < 8; ++mb) {
    plan::MicroBatch m;
    const int id = static_cast<int>(batch.lengths.size());
    batch.lengths.insert(batch.lengths.end(), {8000, 900 + 100 * mb, 1500, 700});
    m.groups = {{0, 2, {id}}, {2, 1, {id + 1}}, {3, 1, {id + 2, id + 3}}};
    p.microbatches.push_back(m);
  }
  const auto r = simulate_step(p, batch, cm);
  expect_breakdown_sums(r.schedule);
  EXPECT_GT(r.schedule.recompute_s, 0.0);
  EXPECT_GT(r.bubble_frac, 0.0);
  EXPECT_LE(r.plan_efficiency, 1.0);
  EXPECT_EQ(r.rank_busy_s.size(), 4u);
  EXPECT_EQ(r.microbatches, 8);
  // Deterministic.
  EXPECT_EQ(simulate_step(p, batch, cm).step_s, r.step_s);
}

TEST(Step, InterleavedPlanUsesTheVppGroup) {
  auto cm = unit_cm(4, 2, 1);
  cm.cluster.vpp = 2;
  cm.model.layers = 4;
  plan::Plan p = two_rank_plan();
  p.config.vpp_group = 3;
  plan::Batch batch{{1000, 1000}};
  for (int mb = 1; mb < 3; ++mb) p.microbatches.push_back(p.microbatches[0]);
  EXPECT_NO_THROW(simulate_step(p, batch, cm));  // 3 micro-batches, group 3
  p.config.vpp_group.reset();                     // group = pp = 2: 3 is not a multiple
  EXPECT_THROW(simulate_step(p, batch, cm), InputError);
  p.config.vpp_group = 1;                         // smaller than pp
  EXPECT_THROW(simulate_step(p, batch, cm), InputError);
}

}  // namespace
}  // namespace dcp::sim

namespace dcp::sim {
namespace {

using namespace fixtures;

// bshd: a plan with pad_to is charged as if every sample were that long, while useful FLOPs and
// tokens/s stay on the real lengths.
TEST(Step, PaddedPlanIsChargedAtThePaddedLength) {
  const auto cm = unit_cm2(2, 1);
  plan::Plan p;
  p.planner = "bshd-like";
  p.config.dp = 2;
  p.config.max_seqlen_per_rank = 4096;
  p.microbatches.push_back({{{0, 1, {0}}, {1, 1, {1}}}});
  const plan::Batch real{{300, 1000}};
  const auto unpadded = simulate_step(p, real, cm);
  p.pad_to = 4096;
  const auto padded = simulate_step(p, real, cm);
  plan::Batch explicit_pad{{4096, 4096}};
  p.pad_to = 0;
  const auto by_hand = simulate_step(p, explicit_pad, cm, real.lengths);
  EXPECT_DOUBLE_EQ(padded.step_s, by_hand.step_s);
  EXPECT_GT(padded.step_s, 3 * unpadded.step_s);
  EXPECT_DOUBLE_EQ(padded.useful_flops, unpadded.useful_flops);
  EXPECT_DOUBLE_EQ(padded.useful_flops, cost::train_flops_of_lengths(cm.model, real.lengths));
  EXPECT_NEAR(padded.tokens_per_s_per_gpu, 1300 / (padded.step_s * 2), 1e-9);
  // Memory is charged on the padded length too.
  EXPECT_GT(padded.peak_memory_bytes, unpadded.peak_memory_bytes);
}

// A padded plan's CP groups run TE's bshd ring (cost::QkvFormat::bshd): its host cost per call and step
// and side-kernel bytes, not THD's; the same groups unpadded run THD's.
// A packed plan's pipeline calls carry the shape exchange (one latency of the link), a padded
// plan's none; the step pays it only through the blocking calls.
TEST(Step, PackedPlansPayTheShapeExchangeOnEveryPipelineCall) {
  auto cm = unit_cm2(4, 2);
  cm.hardware.intra_node_latency_s = 1e-3;
  plan::Plan p;
  p.planner = "two";
  p.config.dp = 2;
  p.config.max_seqlen_per_rank = 4096;
  p.microbatches.push_back({{{0, 1, {0}}, {1, 1, {1}}}});
  p.microbatches.push_back({{{0, 1, {2}}, {1, 1, {3}}}});
  const plan::Batch batch{{1000, 1000, 1000, 1000}};
  const ScheduleInput thd = build_schedule_input(p, batch, cm);
  p.pad_to = 1000;  // the same lengths, padded layout
  const ScheduleInput bshd = build_schedule_input(p, batch, cm);
  for (const auto& mb : thd.cost)
    for (const auto& g : mb) EXPECT_EQ(g[0].p2p_shape_s, 1e-3);
  for (const auto& mb : bshd.cost)
    for (const auto& g : mb) EXPECT_EQ(g[0].p2p_shape_s, 0.0);
  // Blocking calls: 2 micro-batches, 4 calls per stage on the path; each costs the latency more.
  ScheduleInput no_shape = thd;
  for (auto& mb : no_shape.cost)
    for (auto& g : mb)
      for (auto& c : g) c.p2p_shape_s = 0;
  EXPECT_GT(simulate_schedule(thd).step_s, simulate_schedule(no_shape).step_s + 1e-3);
}

TEST(Step, PaddedPlanRunsTheBshdRing) {
  auto cm = unit_cm2(2, 1);
  cm.hardware.host_layer_fwd_s = 1e-2;  // host-bound: the ring's host cost sets the pass
  cm.hardware.host_layer_bwd_s = 1e-2;
  cm.hardware.ring_step_fwd_s = 1e-3;
  cm.hardware.ring_step_bwd_s = 3e-3;
  cm.hardware.ring_call_fwd_s = 1e-3;
  cm.hardware.ring_call_bwd_s = 3e-3;
  plan::Plan p;
  p.planner = "bshd-like";
  p.config.dp = 1;
  p.config.cp = 2;
  p.config.max_seqlen_per_rank = 4096;
  p.microbatches.push_back({{{0, 2, {0}}}});
  const plan::Batch batch{{1000}};
  p.pad_to = 1000;  // no padding: only the layout differs
  cm.hardware.bshd_ring_step_fwd_s = cm.hardware.ring_step_fwd_s;
  cm.hardware.bshd_ring_step_bwd_s = cm.hardware.ring_step_bwd_s;
  cm.hardware.bshd_ring_call_fwd_s = cm.hardware.ring_call_fwd_s;
  cm.hardware.bshd_ring_call_bwd_s = cm.hardware.ring_call_bwd_s;
  const auto same = simulate_step(p, batch, cm);
  cm.hardware.bshd_ring_step_fwd_s = 5e-4;
  cm.hardware.bshd_ring_step_bwd_s = 1e-3;
  cm.hardware.bshd_ring_call_fwd_s = 2e-4;
  cm.hardware.bshd_ring_call_bwd_s = 6e-4;
  const auto bshd = simulate_step(p, batch, cm);
  // fwd + bwd, 2 layers, the call and 1 later step each: 2 x ((1e-3 - 2e-4) + (1e-3 - 5e-4) +
  // (3e-3 - 6e-4) + (3e-3 - 1e-3)) = 1.14e-2 s less.
  EXPECT_NEAR(same.step_s - bshd.step_s, 1.14e-2, 1e-9);
  p.pad_to = 0;
  EXPECT_DOUBLE_EQ(simulate_step(p, batch, cm).step_s, same.step_s);  // THD's ring steps
}

// A plan on one rank (dp 1): `mbs` micro-batches of one sample of `tokens` each; the lengths go
// to `batch`.
plan::Plan one_sample_microbatches(int mbs, int64_t tokens, plan::Batch& batch) {
  plan::Plan p;
  p.planner = "t";
  p.config.dp = 1;
  p.config.max_seqlen_per_rank = 4096;
  for (int mb = 0; mb < mbs; ++mb) {
    p.microbatches.push_back({{{0, 1, {mb}}}});
    batch.lengths.push_back(tokens);
  }
  return p;
}

// The simulator's memory walk against memory.h's closed form: 1F1B with pp 4 and 8 equal
// micro-batches keeps min(pp - s, M) of them in flight on stage s.
TEST(Step, MemoryPeakFollowsTheMicroBatchesInFlight) {
  auto cm = unit_cm2(4, 4);
  cm.model.layers = 4;
  cm.model.vocab = 1000;
  cm.hardware.ce_fp32_saved_bytes_per_logit = 4;
  cm.hardware.ce_fp32_peak_bytes_per_logit = 6;
  plan::Batch batch;
  const plan::Plan p = one_sample_microbatches(8, 1000, batch);
  const auto r = simulate_step(p, batch, cm);
  ASSERT_EQ(r.schedule.gpu.size(), 4u);
  for (int s = 0; s < 4; ++s)
    EXPECT_DOUBLE_EQ(r.schedule.gpu[s].peak_bytes, cost::uniform_peak_bytes(cm, s, 4 - s, 1000)) << "stage " << s;
  EXPECT_TRUE(r.fits);
  // At tp 2 as well (sequence parallelism's transients, and on the last stage the output layer's
  // gathered input, resident, and its whole input gradient in the backward).
  auto tp = cm;
  tp.cluster.tp = 2;
  tp.cluster.gpus *= 2;
  const auto rt = simulate_step(p, batch, tp);
  for (int s = 0; s < 4; ++s)
    EXPECT_DOUBLE_EQ(rt.schedule.gpu[s].peak_bytes, cost::uniform_peak_bytes(tp, s, 4 - s, 1000)) << "tp 2, stage " << s;
  EXPECT_GT(cost::uniform_peak_bytes(tp, 3, 1, 1000) - cost::static_memory(tp, 3).total(),
            1000 * 2 * cost::head_gather_bytes_per_token(tp));  // resident + backward
  // Full recompute keeps only the layer inputs: a lower peak on stage 0.
  auto rc = cm;
  rc.training.recompute_full = true;
  EXPECT_LT(simulate_step(p, batch, rc).schedule.gpu[0].peak_bytes, r.schedule.gpu[0].peak_bytes);
  {
    // Without recompute, on a CP group of 8, the forward's transient (its ring buffers with the
    // second Q, K, V set) exceeds the backward's: the peak takes it (helper-83's review; the
    // uniform estimate had taken the backward's only).
    auto cp = unit_cm2(32, 4);  // pool 8
    cp.model.layers = 4;
    cp.model.vocab = 1000;
    cp.hardware.ce_fp32_saved_bytes_per_logit = 4;
    cp.hardware.ce_fp32_peak_bytes_per_logit = 6;
    ASSERT_GT(cost::layer_transient_bytes_per_token(cp, 8), cost::layer_backward_transient_bytes_per_token(cp, 8));
    plan::Plan q;
    q.planner = "test";
    q.config.dp = 1;
    q.config.cp = 8;
    q.config.max_seqlen_per_rank = 4096;
    plan::Batch b;
    for (int mb = 0; mb < 8; ++mb) {
      plan::MicroBatch m;
      m.groups = {{0, 8, {mb}}};
      q.microbatches.push_back(m);
      b.lengths.push_back(8000);
    }
    const auto rq = simulate_step(q, b, cp);
    ASSERT_EQ(rq.schedule.gpu.size(), 32u);
    for (int s = 0; s < 4; ++s)
      EXPECT_DOUBLE_EQ(rq.schedule.gpu[static_cast<size_t>(s) * 8].peak_bytes, cost::uniform_peak_bytes(cp, s, 4 - s, 1000, 8))
          << "stage " << s;
  }
  // A capacity below the peak: the plan does not fit.
  cm.hardware.memory_bytes = r.peak_memory_bytes - 1;
  const auto tight = simulate_step(p, batch, cm);
  EXPECT_FALSE(tight.fits);
  EXPECT_DOUBLE_EQ(tight.step_s, r.step_s);  // the time is still simulated; the harness hides it
}

// Unequal micro-batches: the peak is the largest running sum, not in_flight x the mean.
TEST(Schedule, MemoryWalkUsesEachMicroBatchsTokens) {
  ScheduleInput in = singles(1, 2, 1, 3, op(1, 1));
  in.tokens = {{100}, {1000}, {10}};
  in.static_bytes = {5, 7};
  in.stored_bytes_per_token_layer = 2;
  in.layer_transient_bytes_per_token = 0.25;
  in.logits_saved_bytes_per_token = 0.5;  // the last virtual stage (stage 1) only
  in.logits_peak_bytes_per_token = 1;
  in.layers = {3, 3};
  in.capacity_bytes = 1e9;
  const auto r = simulate_schedule(in);
  // Stage 0 (warmup 1): F0 F1 B0 F2 B1 B2 -> live 600, 6600 (peak, + the layer transient of
  // 1000 tokens: 250), 6000, 6060, ...; no logits here.
  EXPECT_DOUBLE_EQ(r.gpu[0].peak_bytes, 5 + 6 * (100 + 1000) + 250);
  // Stage 1 (no warmup): one at a time. F1: 6000 + max(250, 1000 logits) = 7000, then 500 saved;
  // B1: 6500 + (1000 - 500) = 7000, then 6000 + 250. The logits peak and the layer transient
  // never add up.
  EXPECT_DOUBLE_EQ(r.gpu[1].peak_bytes, 7 + 6 * 1000 + 1000);
  EXPECT_DOUBLE_EQ(r.peak_bytes, 7007);
  EXPECT_EQ(r.peak_gpu, 1);
  EXPECT_TRUE(r.fits);
  // The saved part is not charged twice: F1 peaks at 6000 + 1500, keeps 900, and B1 starts at
  // 6000 + 900 + (1500 - 900) = 7500 again.
  in.logits_saved_bytes_per_token = 0.9;
  in.logits_peak_bytes_per_token = 1.5;
  EXPECT_DOUBLE_EQ(simulate_schedule(in).gpu[1].peak_bytes, 7 + 6000 + 1500);
  {
    // The head's inputs (the final norm's and the output layer's, 0.3 B per token here) are saved
    // beside the logits on the last virtual stage and live under their peak: F1 peaks at
    // 6000 + 300 + 1500, B1 at 6000 + 300 + 900 + (1500 - 900), the same; stage 0 holds no head.
    auto hd = in;
    hd.head_saved_bytes_per_token = 0.3;
    const auto h = simulate_schedule(hd);
    EXPECT_DOUBLE_EQ(h.gpu[1].peak_bytes, 7 + 6000 + 300 + 1500);
    EXPECT_DOUBLE_EQ(h.gpu[0].peak_bytes, simulate_schedule(in).gpu[0].peak_bytes);
    // The head sits under the logits' peak, not on top of the layer transient: with micro-batch
    // 1's transient at 1.6 B per token (above the logits' 1.5, below head + logits 1.8), F1
    // peaks at 6000 + max(1600, 300 + 1500) = 7800, not 6000 + 1600 + 300.
    hd.transient_bytes_per_token = {{0.25}, {1.6}, {0.25}};
    EXPECT_DOUBLE_EQ(simulate_schedule(hd).gpu[1].peak_bytes, 7 + 6000 + 1800);
  }
  // A transient per group (its CP attention buffers) replaces the scalar for that group's ops:
  // micro-batch 1's 2 bytes per token make stage 0's F1 peak 6600 + 2000 and stage 1's F1
  // 6000 + max(2000, 1500).
  in.transient_bytes_per_token = {{0.25}, {2.0}, {0.25}};
  const auto t = simulate_schedule(in);
  EXPECT_DOUBLE_EQ(t.gpu[0].peak_bytes, 5 + 6600 + 2000);
  EXPECT_DOUBLE_EQ(t.gpu[1].peak_bytes, 7 + 6000 + 2000);
  // A backward transient of its own (the MLP's gradients) for backward ops only: micro-batch 1's
  // 3 bytes per token raise stage 0's B1 (after F2: live 6060) to 6060 + 3000; stage 1's B1 sees
  // 6000 + 3000 after its logits are freed. The forwards' peaks stay below (8600, 8000).
  in.backward_transient_bytes_per_token = {{0.25}, {3.0}, {0.25}};
  const auto b = simulate_schedule(in);
  EXPECT_DOUBLE_EQ(b.gpu[0].peak_bytes, 5 + 6060 + 3000);
  EXPECT_DOUBLE_EQ(b.gpu[1].peak_bytes, 7 + 6000 + 3000);
  {
    // The head's inputs are freed with the logits, before the layers' backward: B1 still peaks at
    // 6000 + 3000 with 0.3 B per token of them (not 6000 + 300 + 3000); F1's 6000 + max(2000,
    // 300 + 1500) stays below.
    auto hd = in;
    hd.head_saved_bytes_per_token = 0.3;
    EXPECT_DOUBLE_EQ(simulate_schedule(hd).gpu[1].peak_bytes, 7 + 6000 + 3000);
  }
  // The embedding gradient after each backward of virtual stage 0 (stage 0 only): after B0
  // (live 6000: F1's), 6000 + 10,000 is stage 0's peak; stage 1 holds no embedding.
  in.embedding_grad_bytes = 10000;
  const auto e = simulate_schedule(in);
  EXPECT_DOUBLE_EQ(e.gpu[0].peak_bytes, 5 + 6000 + 10000);
  EXPECT_DOUBLE_EQ(e.gpu[1].peak_bytes, 7 + 6000 + 3000);
  // With it the gradient flowing into the embedding, per token of that micro-batch: after B1
  // (1000 tokens; live 60, F2's) 60 + 10,000 + 1000 x 7 = 17,060 is above B0's 6000 + 10,000 +
  // 100 x 7.
  in.embedding_input_grad_bytes_per_token = 7;
  const auto f = simulate_schedule(in);
  EXPECT_DOUBLE_EQ(f.gpu[0].peak_bytes, 5 + 17060);
  EXPECT_DOUBLE_EQ(f.gpu[1].peak_bytes, 7 + 6000 + 3000);
}

// Tied embeddings on a one-stage pipeline without gradient accumulation fusion: the walk holds
// the output weight's gradient from the loss's backward to the embedding's, as memory.h's closed
// form does, in each of its three regimes (the embedding's end of the backward at 10 tokens, the
// layers' backward at 1000, the output layer's weight-gradient GEMM at 1000 with a vocabulary of
// 2000).
TEST(Step, MemoryPeakHoldsTheTiedOutputGradientOnOneStage) {
  for (const int tp : {1, 2}) {  // tp 2: the output layer's resident gathered input and its whole dgrad
    auto cm = unit_cm2(tp, 1);
    cm.cluster.tp = tp;
    cm.model.layers = 4;
    cm.model.vocab = 1000;
    cm.model.tied_embeddings = true;
    cm.training.recompute_full = true;
    cm.training.cross_entropy_fusion = true;
    cm.training.cross_entropy_te = true;
    cm.hardware.ce_te_saved_bytes_per_logit = 2;
    cm.hardware.ce_te_peak_bytes_per_logit = 2;
    for (const int64_t vocab : {1000, 2000})
      for (const int64_t tokens : {10, 1000}) {
        cm.model.vocab = vocab;
        plan::Batch batch;
        const plan::Plan p = one_sample_microbatches(3, tokens, batch);
        auto fused = cm;
        fused.training.gradient_accumulation_fusion = true;
        auto held = cm;
        held.training.gradient_accumulation_fusion = false;
        const double with = simulate_step(p, batch, held).schedule.gpu[0].peak_bytes;
        const double without = simulate_step(p, batch, fused).schedule.gpu[0].peak_bytes;
        const auto d = static_cast<double>(tokens);
        EXPECT_DOUBLE_EQ(with, cost::uniform_peak_bytes(held, 0, 1, d)) << tp << " " << vocab << " " << tokens;
        EXPECT_DOUBLE_EQ(without, cost::uniform_peak_bytes(fused, 0, 1, d)) << tp << " " << vocab << " " << tokens;
        EXPECT_GT(with, without) << tp << " " << vocab << " " << tokens;  // the held table shows in each regime
      }
  }
}

// Interleaved with M == pp: Megatron's warm-up is (pp - s - 1) * 2 + (vpp - 1) * G capped at
// M * vpp (get_pp_rank_microbatches, d48bd6be0a schedules.py:878-931); the last stage does not
// run every forward first (a rule Megatron dropped in 4295be1a6c, which the simulator had kept).
// pp = 2, vpp = 2, M = 2, G = 2: stage 1 warms up 2 chunks, then F(mb0, c1) B(mb0, c1) F(mb1, c1)
// B(mb1, c1) B(mb0, c0) B(mb1, c0): at most 3 chunks of 100 tokens x 1 layer live (4 with every
// forward first); stage 0 warms up 4 = M * vpp, so all 4.
TEST(Schedule, InterleavedWarmupAtMEqualPpFollowsMegatron) {
  ScheduleInput in = singles(1, 2, 2, 2, op(1, 1));
  in.tokens = {{100}, {100}};
  in.static_bytes = {0, 0};
  in.stored_bytes_per_token_layer = 1;
  in.layers = {1, 1, 1, 1};
  in.capacity_bytes = 1e9;
  const auto r = simulate_schedule(in);
  EXPECT_DOUBLE_EQ(r.gpu[0].peak_bytes, 4 * 100);
  EXPECT_DOUBLE_EQ(r.gpu[1].peak_bytes, 3 * 100);
  // Times (every op 1 s, no p2p; (mb, virtual stage)): stage 1 runs F(0,1) [1,2] F(1,1) [2,3]
  // F(0,3) [3,4] B(0,3) [4,5] F(1,3) [5,6] B(1,3) [6,7] B(0,1) [7,8] B(1,1) [8,9]; stage 0 ends
  // with B(0,0) [8,9] B(1,0) [9,10].
  EXPECT_DOUBLE_EQ(r.step_s, 10.0);
  expect_breakdown_sums(r);
}

// A one-micro-batch plan on a pool of dp ranks (cp 1), M = 4096.
plan::Plan one_microbatch_plan(int dp, plan::MicroBatch mb) {
  plan::Plan p;
  p.planner = "t";
  p.config.dp = dp;
  p.config.max_seqlen_per_rank = 4096;
  p.microbatches.push_back(std::move(mb));
  return p;
}

// Tied embeddings split over stages (helper-80's trial): the first and the last stage all-reduce
// the embedding's gradient once both have synced theirs and finish together; the middle stage is
// untouched. At pp > 1 tied and untied models hold the same parameters per stage (the last stage
// keeps its own copy), so nothing else moves: the step grows by exactly what the all-reduce adds
// to the slower end stage, and the lower bound by the all-reduce on the stage that sets it.
TEST(Step, TiedEmbeddingsAllReduceAfterBothEndStagesSync) {
  auto cm = unit_cm2(6, 3);  // pp 3, pool 2
  cm.model.vocab = 50000;    // 50,000 x 128 x 4 B = 25.6 MB: 25.6 ms on the unit profile's NVLink
  cm.hardware.intra_node_latency_s = 1e-4;
  cm.hardware.iteration_overhead_s = 0.5;
  const plan::Plan p = one_microbatch_plan(2, {{{0, 1, {0}}, {1, 1, {1}}}});
  const plan::Batch batch{{1000, 3000}};
  const auto untied = simulate_step(p, batch, cm);
  cm.model.tied_embeddings = true;
  const double e = cost::tied_embedding_allreduce_s(cm, 0);
  EXPECT_DOUBLE_EQ(e, 50000.0 * 128 * 4 / 1e9 + 2e-4);
  const auto tied = simulate_step(p, batch, cm);
  expect_breakdown_sums(tied.schedule);
  const auto& u = untied.schedule.gpu;
  const auto& t = tied.schedule.gpu;
  ASSERT_EQ(t.size(), 6u);
  // Untied finishes (iteration cost included) of each stage's slowest GPU.
  const double f0 = std::max(u[0].finish_s, u[1].finish_s), f1 = std::max(u[2].finish_s, u[3].finish_s),
               f2 = std::max(u[4].finish_s, u[5].finish_s);
  for (const int i : {0, 1, 4, 5}) {
    EXPECT_DOUBLE_EQ(t[i].finish_s, std::max(f0, f2) + e) << "GPU " << i;
    EXPECT_NEAR(t[i].comm_s - u[i].comm_s, e, 1e-15) << "GPU " << i;
  }
  for (const int i : {2, 3}) {
    EXPECT_DOUBLE_EQ(t[i].finish_s, u[i].finish_s) << "GPU " << i;
    EXPECT_DOUBLE_EQ(t[i].comm_s, u[i].comm_s) << "GPU " << i;
  }
  EXPECT_NEAR(tied.step_s, std::max(std::max(f0, f2) + e, f1), 1e-12);
  EXPECT_GT(tied.step_s, untied.step_s);
  EXPECT_EQ(tied.peak_memory_bytes, untied.peak_memory_bytes);
  EXPECT_EQ(tied.useful_flops, untied.useful_flops);
  // The bound: stage 0 (the embedding's) or the last sets it, and each now pays the all-reduce.
  EXPECT_NEAR(tied.bound_s - untied.bound_s, e, 1e-12);
  EXPECT_LE(tied.plan_efficiency, 1.0);

  // With the distributed optimizer (no overlap) the reduce is a reduce-scatter, and each stage
  // gathers its params in optimizer.step, after --clip-grad's grad-norm all-reduce over every
  // stage: every stage finishes at R + its own gather, R the latest reduce (the end stages' after
  // the tied all-reduce). The pipeline is the one above: a stage leaves it at its plain finish
  // less its all-reduce.
  const auto done = [](const StepResult& r, int gpu) {
    return r.schedule.gpu[static_cast<size_t>(gpu)].finish_s - r.schedule.gpu[static_cast<size_t>(gpu)].iteration_s;
  };
  std::array<double, 3> reduced{};
  cm.training.distributed_optimizer = true;
  for (int s = 0; s < 3; ++s) {
    auto plain = cm;
    plain.training.distributed_optimizer = false;
    const double free = done(untied, 2 * s) - cost::grad_sync_time(plain, s).reduce_s;
    reduced[static_cast<size_t>(s)] = free + cost::grad_sync_time(cm, s).reduce_s;
  }
  std::array<double, 3> gather{};
  for (int s = 0; s < 3; ++s) gather[static_cast<size_t>(s)] = cost::grad_sync_time(cm, s).gather_s;
  ASSERT_GT(gather[0], 0.0);
  ASSERT_NE(gather[0], gather[2]);  // the last stage also holds the final norm
  cm.model.tied_embeddings = false;
  const auto du = simulate_step(p, batch, cm);
  cm.model.tied_embeddings = true;
  const auto dt = simulate_step(p, batch, cm);
  expect_breakdown_sums(du.schedule);
  expect_breakdown_sums(dt.schedule);
  const double r_untied = std::max({reduced[0], reduced[1], reduced[2]});
  const double r_tied = std::max(std::max(reduced[0], reduced[2]) + e, reduced[1]);
  for (int s = 0; s < 3; ++s) {
    EXPECT_NEAR(done(du, 2 * s), r_untied + gather[static_cast<size_t>(s)], 1e-12) << "untied, stage " << s;
    EXPECT_NEAR(done(dt, 2 * s + 1), r_tied + gather[static_cast<size_t>(s)], 1e-12) << "tied, stage " << s;
  }
  EXPECT_NEAR(dt.step_s - du.step_s, r_tied - r_untied, 1e-12);
}

TEST(Step, IterationCostFollowsTheSlowestGpu) {
  auto cm = unit_cm2(2, 1);
  cm.hardware.iteration_overhead_s = 0.5;
  cm.hardware.packed_data_overhead_s = 0.25;
  plan::Plan p = one_microbatch_plan(2, {{{0, 1, {0}}, {1, 1, {1}}}});
  const plan::Batch batch{{1000, 3000}};
  p.pad_to = 4096;  // padded (bshd): Megatron's ordinary data path
  const auto padded = simulate_step(p, batch, cm);
  cm.hardware.iteration_overhead_s = 0;
  EXPECT_NEAR(padded.step_s - simulate_step(p, batch, cm).step_s, 0.5, 1e-12);
  expect_breakdown_sums(padded.schedule);
  EXPECT_NEAR(padded.schedule.gpu[0].iteration_s, 0.5, 1e-12);
  // THD plans go through the sequence-packing scheduler, static packing as much as a dynamic
  // plan: the same data path, no latency on the unit links, the busiest rank receives 3000
  // tokens of which (DP-1)/DP = 1/2 cross a link, 28 B each at 1e9 B/s.
  cm.hardware.reroute_bytes_per_token = 28;
  p.pad_to = 0;
  const double thd_data = 0.25 + 0.5 * 3000 * 28 / 1e9;
  cm.hardware.packed_data_overhead_s = 0;
  const auto bare = simulate_step(p, batch, cm);
  cm.hardware.packed_data_overhead_s = 0.25;
  for (const bool dynamic : {false, true}) {
    p.dynamic = dynamic;
    const auto thd = simulate_step(p, batch, cm);
    EXPECT_NEAR(thd.step_s - bare.step_s, 0.25, 1e-12) << dynamic;
    EXPECT_NEAR(thd.iteration.data_s, thd_data, 1e-12) << dynamic;
  }
}

// The re-route moves whole samples to every rank of a group (CP siblings slice them afterwards):
// a sample of 4000 tokens on a group of 2 is 4000 received tokens on each of its ranks, not 2000.
TEST(Step, RerouteCountsWholeSamplesOnEveryRankOfAGroup) {
  auto cm = unit_cm2(4, 1);
  cm.hardware.reroute_bytes_per_token = 1;
  cm.hardware.packed_data_overhead_s = 0;
  const plan::Plan p = one_microbatch_plan(4, {{{0, 2, {0}}, {2, 1, {1}}, {3, 1, {2}}}});
  const plan::Batch batch{{4000, 100, 100}};
  // DP 4: 3/4 of the 4000 tokens cross a link at the unit profile's 1e9 B/s.
  EXPECT_NEAR(simulate_step(p, batch, cm).iteration.data_s, 0.75 * 4000 / 1e9, 1e-15);
}

}  // namespace
}  // namespace dcp::sim

// ---- rank_share ---------------------------------------------------------------------------

namespace dcp::sim {
namespace {

using namespace fixtures;

// The share of every rank and stage is the simulator's own accounting: its busy time equals
// StepResult::rank_busy_s (mean over stages), each micro-batch's prediction equals
// group_stage_times summed over the stage's chunks, and the rows held are the THD padding's.
TEST(RankShare, IsTheSimulatorsAccountingOfThatRank) {
  cost::CostModel cm = h100_llama3_8b(32, 4, 4, 2, 4);
  cm.training.recompute_full = true;
  Rng rng(23);
  plan::Batch batch;
  const plan::Plan p = random_pool8_plan(rng, batch, 33, 4000);
  ASSERT_FALSE(plan::find_violation(p, batch).has_value());
  const auto r = simulate_step(p, batch, cm);
  for (int j = 0; j < 8; ++j) {
    double mean = 0;
    for (int s = 0; s < 4; ++s) {
      const RankShare share = rank_share(p, batch, cm, j, s);
      EXPECT_EQ(share.layers, 8);  // 32 layers over pp 4 (two chunks of 4)
      EXPECT_EQ(share.last_stage, s == 3);
      ASSERT_EQ(share.microbatches.size(), 8u);  // every rank runs every micro-batch
      for (size_t m = 0; m < 8; ++m) {
        const RankMicrobatch& mb = share.microbatches[m];
        EXPECT_EQ(mb.microbatch, static_cast<int>(m));
        EXPECT_TRUE(j >= mb.first_rank && j < mb.first_rank + mb.cp_size);
        EXPECT_EQ(mb.cp_rank, j - mb.first_rank);
        int64_t rows = 0;
        for (int64_t L : mb.lengths) rows += (L + 2 * mb.cp_size - 1) / (2 * mb.cp_size) * 2;
        EXPECT_EQ(mb.local_tokens, rows);
        double fwd = 0, bwd = 0;
        for (int chunk = 0; chunk < 2; ++chunk) {
          const auto st = cost::group_stage_times(cm, mb.lengths, mb.cp_size, mb.first_rank, chunk * 4 + s);
          fwd += st.fwd.total_s();
          bwd += st.bwd.total_s();
        }
        const OpCost& o = mb.predicted;
        EXPECT_NEAR(o.fwd_s, fwd, 1e-12);
        EXPECT_NEAR(o.bwd_s, bwd, 1e-12);
        EXPECT_NEAR(o.fwd_s, o.fwd_compute_s + o.fwd_comm_s + o.fwd_overhead_s, 1e-12);
        EXPECT_NEAR(o.bwd_s, o.bwd_compute_s + o.bwd_comm_s + o.bwd_overhead_s, 1e-12);
      }
      mean += share.busy_s / 4;
    }
    EXPECT_NEAR(mean, r.rank_busy_s[static_cast<size_t>(j)], 1e-9 * r.rank_busy_s[static_cast<size_t>(j)]) << "rank " << j;
  }
  const int busiest = busiest_pool_rank(r);
  for (double b : r.rank_busy_s) EXPECT_LE(b, r.rank_busy_s[static_cast<size_t>(busiest)]);
  const int stage = busiest_stage(r, busiest, 8);
  const double top = rank_share(p, batch, cm, busiest, stage).busy_s;
  for (int s = 0; s < 4; ++s) EXPECT_LE(rank_share(p, batch, cm, busiest, s).busy_s, top + 1e-12);
  EXPECT_EQ(stage, 3);  // the output layer and the loss live on the last stage
}

TEST(RankShare, PaddedPlansAreChargedAtPadTo) {
  const cost::CostModel cm = h100_llama3_8b(8, 1, 8);
  Rng rng(5);
  plan::Batch batch;
  const plan::Plan p = random_pool8_plan(rng, batch, 33, 4000, 4096);
  const RankShare share = rank_share(p, batch, cm, 3, 0);
  for (const auto& mb : share.microbatches)
    for (int64_t L : mb.lengths) EXPECT_GE(L, 4096);
}

TEST(RankShare, RejectsRankOrStageOutsideTheCluster) {
  const cost::CostModel cm = h100_llama3_8b(8, 1, 8);
  Rng rng(5);
  plan::Batch batch;
  const plan::Plan p = random_pool8_plan(rng, batch, 33, 4000);
  EXPECT_THROW(rank_share(p, batch, cm, 8, 0), InputError);
  EXPECT_THROW(rank_share(p, batch, cm, -1, 0), InputError);
  EXPECT_THROW(rank_share(p, batch, cm, 0, 1), InputError);
}

}  // namespace
}  // namespace dcp::sim
