// The simulator's lower bound (sim/simulator.h "Lower bound"): the busiest stage, the costs no
// plan avoids, the longest sample's critical path, and that it stays a bound on random plans, on
// the H100 tables, with a static cp of the plan's own, over the real lengths and when the GEMM
// curve dips.
#include "core/rng.h"
#include "cost/time_model.h"
#include "plan/validate.h"
#include "sim/simulator.h"
#include "sim_fixtures.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>

namespace dcp::sim {
namespace {

using namespace fixtures;

TEST(Step, BoundIsTheBusiestStage) {
  // pp = 2, 2 layers (one per stage), a large vocabulary: the last stage holds one layer plus the
  // output layer and loss, so it sets the bound, above the even split over both stages.
  auto cm = unit_cm(4, 2, 1);
  cm.model.vocab = 65536;
  const plan::Batch batch{{1000, 600, 300}};
  const int64_t m = 2000;
  double all = 0, head = 0;
  for (int64_t l : batch.lengths) {
    all += cost::sequence_compute_s(cm, l, m);
    head += cost::sequence_head_compute_s(cm, l, m);
  }
  ASSERT_GT(head, 0.0);
  const double per_layer = (all - head) / 2;
  // Pool N = 2. The overlapped reduce of the last stage is still exposed: without VPP it is
  // launched after the cool-down (Megatron's align_grad_reduce, simulator.cpp).
  // And without VPP its first forward waits for its whole param gather (one bucket there), after
  // the first stage's first forward waited for its embedding bucket.
  const double reduce_last = cost::grad_sync_time(cm, 1).reduce_s;
  const double gather_last = cost::grad_sync_time(cm, 1).gather_waited_s;
  const double gather_first = cost::grad_sync_time(cm, 0).gather_waited_s;
  ASSERT_GT(reduce_last, 0.0);
  ASSERT_GT(gather_first, 0.0);
  const double expect = std::max(all / 2 / 2, gather_first + (per_layer + head) / 2 + reduce_last + gather_last);
  EXPECT_NEAR(lower_bound_s(batch, cm, m), expect, 1e-15);
  EXPECT_GT(lower_bound_s(batch, cm, m), all / 4 * (1 + 1e-9));  // tighter than the even split
  // pp = 1: everything on one stage.
  const auto cm1 = unit_cm(2, 1, 1);
  double all1 = 0;
  for (int64_t l : batch.lengths) all1 += cost::sequence_compute_s(cm1, l, m);
  // (+ the embedding bucket's reduce and gather, which overlap cannot hide)
  const auto g1 = cost::grad_sync_time(cm1, 0);
  EXPECT_NEAR(lower_bound_s(batch, cm1, m), all1 / 2 + g1.reduce_tail_s + g1.gather_waited_s, 1e-15);
}

// A micro-batch's fixed cost is per virtual stage: pp 2, vpp 2 (4 layers, virtual stages 0 .. 3;
// stage 0 holds 0 and 2, stage 1 holds 1 and 3). With costs of seconds, far above the work, the
// stage they land on sets the bound, and raising a cost by 10 s raises the bound by 10 s times how
// often a micro-batch pays it there (m_min = 1): the first stage's once (virtual stage 0 only), the
// last's once (virtual stage 3), the every-stage cost once per chunk.
TEST(Step, BoundChargesEachVirtualStagesMicroBatchCost) {
  auto cm = unit_cm(4, 2, 1);
  cm.cluster.vpp = 2;
  cm.model.layers = 4;
  const plan::Batch batch{{1000, 600, 300}};
  const int64_t m = 2000;
  const auto bound_with = [&](double every, double first, double last) {
    auto c = cm;
    c.hardware.microbatch_every_stage_s = every;
    c.hardware.microbatch_first_stage_s = first;
    c.hardware.microbatch_last_stage_s = last;
    return lower_bound_s(batch, c, m);
  };
  EXPECT_NEAR(bound_with(0, 20, 0) - bound_with(0, 10, 0), 10.0, 1e-9);
  EXPECT_NEAR(bound_with(0, 0, 20) - bound_with(0, 0, 10), 10.0, 1e-9);
  EXPECT_NEAR(bound_with(20, 0, 0) - bound_with(10, 0, 0), 2 * 10.0, 1e-9);
}

// The costs every plan pays are in the bound: a host-bound balanced plan reaches it exactly, and
// each term is the hand-computed one.
TEST(Step, BoundChargesTheCostsNoPlanAvoids) {
  auto cm = unit_cm(2, 1, 1);
  cm.hardware.host_layer_fwd_s = 1e-3;  // far above the GPU time of 1000 tokens on the unit model
  cm.hardware.host_layer_bwd_s = 2e-3;
  cm.hardware.microbatch_every_stage_s = 5e-4;
  cm.hardware.iteration_overhead_s = 7e-3;
  cm.training.overlap_grad_reduce = false;
  const plan::Batch batch{{1000, 1000}};
  plan::Plan p = two_rank_plan();
  p.dynamic = false;  // the unit profile has no THD data-path costs (packed_data_overhead_s 0)
  const auto r = simulate_step(p, batch, cm);
  double work = 0;
  for (int64_t l : batch.lengths) work += cost::sequence_compute_s(cm, l, 2000);
  const double host = 2 * (1e-3 + 2e-3);  // 2 layers x (fwd + bwd host), 1 micro-batch
  ASSERT_GT(host, work / 2);
  const auto g = cost::grad_sync_time(cm, 0);
  ASSERT_GT(g.reduce_s + g.gather_s, 0.0);
  const double it = cost::iteration_time(cm, false, 0).total_s();
  const double expect = host + 5e-4 + g.reduce_s + g.gather_s + it;
  EXPECT_NEAR(lower_bound_s(batch, cm, 2000), expect, 1e-15);
  EXPECT_NEAR(r.step_s, expect, 1e-12);
  EXPECT_NEAR(r.plan_efficiency, 1.0, 1e-9);
  // --no-gradient-accumulation-fusion: every backward pass also issues one main-gradient add per
  // parameter tensor (15 on the unit model); the host-bound plan still meets the bound.
  cm.training.gradient_accumulation_fusion = false;
  cm.hardware.grad_add_host_s = 1e-4;
  ASSERT_NEAR(cost::grad_add(cm, 0).host_s, 15 * 1e-4, 1e-15);
  EXPECT_NEAR(lower_bound_s(batch, cm, 2000), expect + 15 * 1e-4, 1e-15);
  EXPECT_NEAR(simulate_step(p, batch, cm).step_s, expect + 15 * 1e-4, 1e-12);
  cm.training.gradient_accumulation_fusion = true;
  cm.hardware.grad_add_host_s = 0;
  {
    // TP 2: every layer issues TP's collectives too, 4 calls forward and 10 backward, which the
    // bound keeps; the step adds the embedding's 1 + 1 and the output layer's 1 + 4 calls once per
    // micro-batch, which the bound leaves out. Still host-bound on the unit model.
    auto tp = cm;
    tp.cluster.tp = 2;
    tp.cluster.gpus = 4;
    tp.hardware.tp_collective_host_s = 1e-4;
    const auto gt = cost::grad_sync_time(tp, 0);
    const double tp_host = 2 * (1e-3 + 4e-4 + 2e-3 + 10e-4);
    const double tp_expect = tp_host + 5e-4 + gt.reduce_s + gt.gather_s + cost::iteration_time(tp, false, 0).total_s();
    EXPECT_NEAR(lower_bound_s(batch, tp, 2000), tp_expect, 1e-15);
    EXPECT_NEAR(simulate_step(p, batch, tp).step_s, tp_expect + 7e-4, 1e-12);
  }
  // Twice the tokens of one micro-batch (N * M = 4000): at least two micro-batches, twice the host
  // floor and the micro-batch overhead.
  const plan::Batch big{{2500, 2500, 1500, 1500}};
  double work_big = 0;
  for (int64_t l : big.lengths) work_big += cost::sequence_compute_s(cm, l, 2000);
  EXPECT_NEAR(lower_bound_s(big, cm, 2000), std::max(work_big / 2, 2 * host) + 2 * 5e-4 + g.reduce_s + g.gather_s + it,
              1e-15);
  // A 3000-token sample with M = 2000 needs a group of >= 2 ranks: with ring CP they issue the ring's
  // call and 1 later step per layer and pass (fwd + bwd) in its micro-batch. The plan that does so
  // meets the bound.
  cm.hardware.ring_step_fwd_s = 2e-3;
  cm.hardware.ring_step_bwd_s = 3e-3;
  cm.hardware.ring_call_fwd_s = 1e-3;
  cm.hardware.ring_call_bwd_s = 4e-3;
  const plan::Batch longer{{3000, 500}};
  const double ring = 2 * ((1e-3 + 2e-3) + (4e-3 + 3e-3));  // layers x (call + (k - 1) steps), fwd + bwd
  double work_longer = 0;
  for (int64_t l : longer.lengths) work_longer += cost::sequence_compute_s(cm, l, 2000);
  ASSERT_GT(host + ring, work_longer / 2);
  plan::Plan pr = two_rank_plan();
  pr.microbatches = {{{{0, 2, {0, 1}}}}};
  const auto rr = simulate_step(pr, longer, cm);
  const double bound_ring = host + ring + 5e-4 + g.reduce_s + g.gather_s + it;
  EXPECT_NEAR(lower_bound_s(longer, cm, 2000), bound_ring, 1e-15);
  EXPECT_LE(lower_bound_s(longer, cm, 2000), rr.step_s * (1 + 1e-12));
  EXPECT_GT(rr.plan_efficiency, 0.9);
  // The flash THD backward's device syncs idle the GPU of that micro-batch: dear enough (1 s per
  // layer), they put the GPU side of the backward, not the host's, in the bound; the forward stays
  // host-bound (2 layers x (host floor + the ring's call and 1 step)). The mean rank's backward
  // holds both samples' least backward (the 3000-token one at k = 2, the only valid size) and the
  // 2 forced ring rank-micro-batches' idle.
  cm.hardware.thd_flash_ring_bwd_sync_s = 1.0;
  const auto w2 = cost::sequence_compute_split(cm, 3000, 2000, 2);
  const auto s1 = cost::sequence_compute_split(cm, 500, 2000, 1), s2 = cost::sequence_compute_split(cm, 500, 2000, 2);
  const double fwd2 = (2 * w2.layer_fwd_s + w2.head_fwd_s) / 2;
  const double bwd2 =
      (2 * (w2.layer_bwd_s + std::min(s1.layer_bwd_s, s2.layer_bwd_s)) + w2.head_bwd_s + s1.head_bwd_s) / 2;
  ASSERT_LT(fwd2, 2 * (1e-3 + 1e-3 + 2e-3));
  EXPECT_NEAR(lower_bound_s(longer, cm, 2000),
              2 * (1e-3 + 1e-3 + 2e-3) + bwd2 + 2 * 1.0 + 5e-4 + g.reduce_s + g.gather_s + it, 1e-12);
  EXPECT_LE(lower_bound_s(longer, cm, 2000), simulate_step(pr, longer, cm).step_s * (1 + 1e-12));
  cm.hardware.thd_flash_ring_bwd_sync_s = 0;
  cm.training.cp_comm = cost::CpComm::all_gather;  // no ring loop on the host
  EXPECT_NEAR(lower_bound_s(longer, cm, 2000), bound_ring - host - ring + std::max(host, work_longer / 2), 1e-15);
  cm.training.cp_comm = cost::CpComm::ring;
  // Overlapped gradient sync may hide, but for the embedding bucket's reduce after the last
  // backward and its gather before the first forward (cost::GradSyncTime).
  cm.training.overlap_grad_reduce = true;
  const auto go = cost::grad_sync_time(cm, 0);
  EXPECT_GT(go.reduce_tail_s, 0.0);
  EXPECT_NEAR(lower_bound_s(batch, cm, 2000), host + 5e-4 + it + go.reduce_tail_s + go.gather_waited_s, 1e-15);
}

// The longest sample is a critical path: on one rank it is that rank's work; spread over k ranks
// each of them issues the ring's call and k - 1 later steps per layer. The bound takes the cheaper of the two, which can
// exceed the even split of all work (a 3000-token sample beside a 100-token one on 2 ranks).
TEST(Step, BoundChargesTheLongestSamplesCriticalPath) {
  auto cm = unit_cm(2, 1, 1);
  cm.hardware.host_layer_fwd_s = 0;
  cm.hardware.host_layer_bwd_s = 0;
  cm.hardware.microbatch_every_stage_s = 0;
  cm.hardware.iteration_overhead_s = 0;
  const plan::Batch batch{{3000, 100}};
  const int64_t m = 4000;  // both fit on one rank: k = 1 and k = 2 are valid for the long one
  const double w_long = cost::sequence_compute_s(cm, 3000, m, 1);
  const double w_short = cost::sequence_compute_s(cm, 100, m, 1);
  // (it: the iteration's cost and the embedding bucket's unhidden reduce and gather, as every plan)
  const auto g0 = cost::grad_sync_time(cm, 0);
  const double it = cost::iteration_time(cm, false, 0).total_s() + g0.reduce_tail_s + g0.gather_waited_s;
  // Ring steps far dearer than the sample: k = 2 loses, the sample's whole work is on one rank.
  cm.hardware.ring_step_fwd_s = cm.hardware.ring_call_fwd_s = 1.0;
  cm.hardware.ring_step_bwd_s = cm.hardware.ring_call_bwd_s = 1.0;
  ASSERT_GT(w_long, (w_long + w_short) / 2);
  EXPECT_NEAR(lower_bound_s(batch, cm, m), w_long + it, 1e-12);
  plan::Plan p = two_rank_plan();
  p.config.max_seqlen_per_rank = m;
  const auto r = simulate_step(p, batch, cm);  // {3000} on rank 0, {100} on rank 1
  EXPECT_LE(r.bound_s, r.step_s * (1 + 1e-12));
  EXPECT_GT(r.plan_efficiency, 0.99);  // and this plan is the best one: the bound is tight
  // Free ring steps: spreading it costs nothing extra, the even split of all work is the bound.
  cm.hardware.ring_step_fwd_s = cm.hardware.ring_call_fwd_s = 0;
  cm.hardware.ring_step_bwd_s = cm.hardware.ring_call_bwd_s = 0;
  const double w2 = cost::sequence_compute_s(cm, 3000, m, 2);
  ASSERT_LT(w2 / 2, (w_long + w_short) / 2);
  EXPECT_NEAR(lower_bound_s(batch, cm, m), (std::min(w_long, w2) + w_short) / 2 + it, 1e-12);
  // Ring steps whose host time alone equals the whole sample's compute (2 layers x (the call and 1
  // later step) x (fwd + bwd) = w_long): spreading saves nothing, the bound is w_long again.
  cm.hardware.ring_step_fwd_s = cm.hardware.ring_call_fwd_s = w_long / 8;
  cm.hardware.ring_step_bwd_s = cm.hardware.ring_call_bwd_s = w_long / 8;
  EXPECT_NEAR(lower_bound_s(batch, cm, m), w_long + it, 1e-12);
}


// Random valid plans on the H100 profile: the lower bound never exceeds the simulated time and
// the breakdown always sums to the step.
TEST(Step, BoundHoldsOnRandomPlansH100) {
  Rng rng(17);
  for (int trial = 0; trial < 80; ++trial) {
    // VPP 2 and 1 (with overlap, the first forward's wait for its param gather differs: chunk 0
    // of the first stage, or each stage's, cost::GradSyncTime); half the trials with the
    // gradient sync exposed, half with short samples only (host-bound: the host floor and
    // micro-batch overheads dominate); the NaN check of the grads on in some, tied embeddings in
    // some; a third at TP 2 (the bound keeps its synchronous collectives' bandwidth time and its
    // host calls).
    const int vpp = trial < 40 ? 2 : 1;
    const int tp = trial % 3 == 1 ? 2 : 1;
    cost::CostModel cm = h100_llama3_8b(32 * tp, 4, 4, vpp, 4);
    cm.cluster.tp = tp;
    cm.training.recompute_full = true;
    cm.training.overlap_grad_reduce = trial % 2 == 0;
    cm.training.distributed_optimizer = trial % 3 != 0;
    cm.training.check_for_nan_in_grad = trial % 5 < 2;
    cm.model.tied_embeddings = trial % 7 == 3;  // the end stages' embedding all-reduce
    const int64_t cap = trial % 4 >= 2 ? 256 : 16384;
    plan::Batch batch;
    const plan::Plan p = random_pool8_plan(rng, batch, 64, cap);
    ASSERT_FALSE(plan::find_violation(p, batch).has_value()) << "trial " << trial << ": " << plan::find_violation(p, batch).value_or("");
    const auto r = simulate_step(p, batch, cm);
    EXPECT_LE(r.plan_efficiency, 1.0) << "trial " << trial;
    EXPECT_GT(r.plan_efficiency, 0.05) << "trial " << trial;
    expect_breakdown_sums(r.schedule);
    EXPECT_EQ(r.schedule.events, int64_t{8} * 8 * 2 * 4 * vpp);  // mb x ranks x dir x stages x vpp
  }
}

// A padded plan's bound charges the bshd ring's host cost per call and step (cheaper than THD's):
// cases where every sample needs a ring (L > M) and the plan is tight (host-bound, one
// micro-batch, equal lengths: the padding adds nothing), so a bound that charged THD's ring would
// exceed the step. FA3 and cuDNN (each its own TE path), CP sizes 2, 4 and 8, with and without
// recompute; the gradient sync not overlapped (overlapped, the bound counts only its unhidden
// parts while the step still shows its tail: not tight enough to tell the layouts).
TEST(Step, BoundHoldsOnTightPaddedPlansH100) {
  for (const char* backend : {"fa3", "cudnn"})
  for (const int k : {2, 4, 8})
    for (const bool recompute : {false, true})
      for (const bool overlap : {false}) {
        cost::CostModel cm = h100_llama3_8b(8, 1, k);
        cm.training.attention_backend = backend;
        cm.training.recompute_full = recompute;
        cm.training.overlap_grad_reduce = overlap;
        const auto bshd = cost::ring_host(cm, k, cost::QkvFormat::bshd), thd = cost::ring_host(cm, k, cost::QkvFormat::thd);
        ASSERT_LT(bshd.fwd_s, thd.fwd_s) << cm.training.attention_backend;
        ASSERT_LT(bshd.bwd_s, thd.bwd_s) << cm.training.attention_backend;
        const int dp = 8 / k;
        const int64_t len = 256 * k;  // 256 tokens per rank: host-bound
        plan::Plan p;
        p.planner = "bshd-like";
        p.config.dp = dp;
        p.config.cp = k;
        p.config.max_seqlen_per_rank = 256;
        p.pad_to = len;
        plan::Batch batch;
        plan::MicroBatch mb;
        for (int d = 0; d < dp; ++d) {
          batch.lengths.push_back(len);
          mb.groups.push_back({d * k, k, {d}});
        }
        p.microbatches.push_back(mb);
        const std::string at = std::string(backend) + " k " + std::to_string(k) + (recompute ? " recompute" : "") +
                               (overlap ? " overlap" : "");
        ASSERT_FALSE(plan::find_violation(p, batch).has_value()) << at << ": " << plan::find_violation(p, batch).value_or("");
        const auto r = simulate_step(p, batch, cm);
        EXPECT_LE(r.plan_efficiency, 1.0 + 1e-12) << at;
        EXPECT_GT(r.plan_efficiency, 0.9) << at;
        EXPECT_GT(lower_bound_s(batch, cm, 256, k), r.step_s) << at << ": THD's ring steps must not fit this plan";
      }
}

// A GEMM curve that falls as tokens grow (a measured calibration may dip): the bound reads the
// efficiency where it is highest at or below M, so a plan whose micro-batches run fewer tokens
// than M at a better efficiency still cannot beat it (it had: efficiency 1.036, helper-20).
TEST(Step, BoundHoldsWhenTheGemmCurveDips) {
  {
    cost::CostModel cm = h100_llama3_8b(4, 1, 1);
    cm.hardware.gemm_efficiency.points = {{128, 0.30}, {1024, 0.70}, {4096, 0.80}, {8192, 0.70}};
    const plan::Batch batch{{4096, 4096, 4096, 4096}};
    plan::Plan p;
    p.planner = "test";
    p.config.dp = 4;
    p.config.cp = 1;
    p.config.max_seqlen_per_rank = 8192;
    p.microbatches.push_back({{{0, 1, {0}}, {1, 1, {1}}, {2, 1, {2}}, {3, 1, {3}}}});
    const auto r = simulate_step(p, batch, cm);
    EXPECT_LE(r.plan_efficiency, 1.0 + 1e-12);
    EXPECT_GT(r.plan_efficiency, 0.95);  // and still tight: the plan is the best one
  }
  cost::CostModel cm = h100_llama3_8b(32, 4, 4, 2, 4);
  cm.training.recompute_full = true;
  cm.hardware.gemm_efficiency.points = {{128, 0.30}, {512, 0.75}, {2048, 0.55}, {4096, 0.80}, {16384, 0.50}};
  Rng rng(23);
  for (int trial = 0; trial < 24; ++trial) {
    const int64_t cap = trial % 2 ? 16384 : 4096;
    plan::Batch batch;
    const plan::Plan p = random_pool8_plan(rng, batch, 64, cap);
    ASSERT_FALSE(plan::find_violation(p, batch).has_value()) << "trial " << trial;
    EXPECT_LE(simulate_step(p, batch, cm).plan_efficiency, 1.0 + 1e-12) << "trial " << trial;
  }
}


// On the h100 attention tables a ring step's shorter, non-causal kernels are rated faster than
// one (L, L) causal kernel for long sequences, so a bound that charged every sample at cp = 1
// exceeded the step of a plan running one 512k-token sample over 8 ranks (by 0.8%). The bound
// takes the cheapest group size a valid plan may use, and stays below the step, and close to it.
TEST(Step, BoundHoldsForLongRingSamplesOnH100Tables) {
  cost::CostModel cm = h100_llama3_8b(8, 1, 8);
  cm.training.recompute_full = true;
  const int64_t m = 65536, l = 8 * m;
  plan::Plan p;
  p.planner = "ring";
  p.config.dp = 1;
  p.config.cp = 8;
  p.config.max_seqlen_per_rank = m;
  p.microbatches.push_back({{{0, 8, {0}}}});
  const plan::Batch batch{{l}};
  ASSERT_FALSE(plan::find_violation(p, batch).has_value());
  const auto r = simulate_step(p, batch, cm);
  // The old rule (cp = 1, which no valid plan can use for this sample) would exceed the step.
  EXPECT_GT(cost::sequence_compute_s(cm, l, m, 1) / 8, r.step_s);
  EXPECT_LT(cost::sequence_compute_s(cm, l, m, 8), cost::sequence_compute_s(cm, l, m, 1));
  EXPECT_LE(r.plan_efficiency, 1.0);
  EXPECT_GT(r.plan_efficiency, 0.98);
}

// A static plan's group size is its own cp, which may differ from the cluster's (the simulator
// checks only the pool): the bound considers the plan's cp, not the cluster's (a reviewer's case:
// pool 6, cluster cp 1, static cp 3 read 1.055 efficient when the bound ignored size 3).
TEST(Step, BoundUsesThePlansStaticCp) {
  const cost::CostModel cm = h100_llama3_8b(6, 1, 1);
  plan::Plan p;
  p.planner = "static3";
  p.dynamic = false;
  p.config.dp = 2;
  p.config.cp = 3;
  p.config.max_seqlen_per_rank = 512;
  p.microbatches.push_back({{{0, 3, {0}}, {3, 3, {1}}}});
  const plan::Batch b{{1536, 1536}};
  ASSERT_FALSE(plan::find_violation(p, b).has_value());
  const auto r = simulate_step(p, b, cm);
  EXPECT_LE(r.plan_efficiency, 1.0 + 1e-12);
  EXPECT_GT(r.plan_efficiency, 0.95);
  EXPECT_NEAR(r.bound_s, lower_bound_s(b, cm, 512, 3), 1e-15);
  EXPECT_GT(lower_bound_s(b, cm, 512, 0), r.step_s);  // without size 3: only 6 is valid, dearer
}

// The bound is over the real lengths: padding a plan chose (bshd's pad_to, a dynamic planner's
// multiple of 2 * cp) is not work the batch needs, so it lowers the plan's efficiency.
TEST(Step, BoundIsOverTheRealLengths) {
  const auto cm = unit_cm2(2, 1);
  plan::Plan p = two_rank_plan();
  p.config.max_seqlen_per_rank = 4096;
  const plan::Batch padded{{1024, 1024}};
  const std::vector<int64_t> real{1000, 700};
  const auto r = simulate_step(p, padded, cm, real);
  EXPECT_NEAR(r.bound_s, lower_bound_s(plan::Batch{real}, cm, 4096), 1e-15);
  EXPECT_LT(r.bound_s, lower_bound_s(padded, cm, 4096));
  const auto skipped = simulate_step(p, padded, cm, real, Bound::skip);
  EXPECT_EQ(skipped.step_s, r.step_s);
  EXPECT_EQ(skipped.bound_s, 0.0);
}


// Martello and Toth's L2 bin-packing bound (bins_lower_bound): hand cases, and never above the
// optimum (found by exhaustive search) nor below the token total's ceil(sum / c), on random small
// instances.
TEST(Step, BinsLowerBoundIsABoundOnTheMicroBatchCount) {
  // megatron-example-4gpu's step 3 on Megatron's batches: 22,340 tokens fit 3 bins of 8192 by
  // volume, but the three samples above 4096 take one each and 3062 fits beside none of them.
  EXPECT_EQ(bins_lower_bound({6134, 5947, 5473, 3062, 1293, 177, 127, 127}, 8192), 4);
  EXPECT_EQ(bins_lower_bound({}, 10), 0);
  EXPECT_EQ(bins_lower_bound({10, 10, 10}, 10), 3);
  EXPECT_EQ(bins_lower_bound({5, 5, 5, 5}, 10), 2);  // exactly half: two per bin
  EXPECT_EQ(bins_lower_bound({6, 6, 6, 1}, 10), 3);
  EXPECT_EQ(bins_lower_bound({1, 1, 1}, 10), 1);
  Rng rng(5);
  for (int trial = 0; trial < 400; ++trial) {
    const int64_t c = 10 + rng.uniform_int(0, 20);
    const int n = 1 + static_cast<int>(rng.uniform_int(0, 7));
    std::vector<int64_t> w(static_cast<size_t>(n));
    for (auto& x : w) x = 1 + rng.uniform_int(0, c - 1);
    // The optimum by exhaustive search: items in order into an existing bin with room or a new one.
    std::vector<int64_t> room;
    int best = n;
    std::function<void(size_t)> go = [&](size_t i) {
      if (static_cast<int>(room.size()) >= best) return;
      if (i == w.size()) {
        best = static_cast<int>(room.size());
        return;
      }
      for (size_t b = 0; b < room.size(); ++b)  // by index: the recursion grows `room`
        if (room[b] >= w[i]) {
          room[b] -= w[i];
          go(i + 1);
          room[b] += w[i];
        }
      room.push_back(c - w[i]);
      go(i + 1);
      room.pop_back();
    };
    go(0);
    int64_t sum = 0;
    for (int64_t x : w) sum += x;
    const int64_t l2 = bins_lower_bound(w, c);
    EXPECT_LE(l2, best) << "trial " << trial;
    EXPECT_GE(l2, (sum + c - 1) / c) << "trial " << trial;
  }
}

// The bound counts the micro-batches indivisible samples force and the ring calls long samples
// force on the mean rank; the plans that pay exactly those meet it (tight cases on the unit model,
// host-bound), and no plan beats it.
TEST(Step, BoundChargesIndivisibleSamplesAndForcedRings) {
  auto cm = unit_cm(2, 1, 1);
  cm.hardware.host_layer_fwd_s = 1e-3;
  cm.hardware.host_layer_bwd_s = 2e-3;
  cm.hardware.microbatch_every_stage_s = 5e-4;
  cm.training.overlap_grad_reduce = false;
  const auto g = cost::grad_sync_time(cm, 0);
  const double it = cost::iteration_time(cm, false, 0).total_s();
  const double host = 2 * (1e-3 + 2e-3);  // 2 layers x (fwd + bwd host), one micro-batch
  // Three samples of 2100 tokens on N = 2 ranks of M = 2000: 6300 tokens fit 2 micro-batches of
  // 4000 by volume, but no two share one: 3 micro-batches.
  const plan::Batch three{{2100, 2100, 2100}};
  EXPECT_NEAR(lower_bound_s(three, cm, 2000), 3 * (host + 5e-4) + g.reduce_s + g.gather_s + it, 1e-12);
  // With ring host costs, each of those micro-batches runs a ring of 2 on both ranks: 3 x 2 ring
  // rank-micro-batches (ceil(6300 / 2000) = 4 forced) over 2 ranks.
  cm.hardware.ring_call_fwd_s = 1e-3;
  cm.hardware.ring_call_bwd_s = 4e-3;
  cm.hardware.ring_step_fwd_s = 2e-3;
  cm.hardware.ring_step_bwd_s = 3e-3;
  const double ring = 2 * ((1e-3 + 2e-3) + (4e-3 + 3e-3));  // per rank and micro-batch at k = 2
  const double bound = lower_bound_s(three, cm, 2000);
  EXPECT_NEAR(bound, 3 * (host + 5e-4) + 4.0 / 2 * ring + g.reduce_s + g.gather_s + it, 1e-12);
  plan::Plan p = two_rank_plan();  // M = 2000 on 2 ranks
  p.microbatches = {{{{0, 2, {0}}}}, {{{0, 2, {1}}}}, {{{0, 2, {2}}}}};
  ASSERT_FALSE(plan::find_violation(p, three).has_value()) << plan::find_violation(p, three).value_or("");
  const auto r = simulate_step(p, three, cm);
  EXPECT_LE(bound, r.step_s * (1 + 1e-12));
  // Host-bound, the plan pays its 3 x 2 ring rank-micro-batches, the bound the 4 it cannot avoid.
  EXPECT_NEAR(r.step_s, 3 * (host + ring + 5e-4) + g.reduce_s + g.gather_s + it, 1e-9);
}

// Each pass is charged its own max(GPU, host) (2026-12-07, stop 64): a plan whose forwards wait on the host
// and whose backwards on the GPU pays both, and meets the bound exactly, above the max of the sums
// the bound took before. And each forced ring is charged at the least size its samples may use: two
// 4000-token samples on 4 ranks of M = 1000 need rings of 4 (call + 3 steps per layer and pass),
// not the cheapest ring of 2.
TEST(Step, BoundChargesEachPassItsMaxAndEachForcedRingItsSize) {
  // With and without full recompute (its forward runs in the backward pass, GPU and host), and with
  // a loss that costs HBM traffic (half of it in each pass, as cost::group_stage_times splits it:
  // a split that put it all in one pass would miss the simulated step by half the loss).
  for (const bool recompute : {false, true}) {
    auto cm = unit_cm(2, 1, 1);
    cm.model.vocab = 65536;
    cm.hardware.hbm_bytes_per_s = 1e12;
    cm.hardware.loss_bytes_per_token_vocab = 8;
    cm.training.recompute_full = recompute;
    cm.training.overlap_grad_reduce = false;
    cm.hardware.microbatch_every_stage_s = 0;
    const int64_t m = 1000;
    const auto one = cost::sequence_compute_split(cm, 1000, m, 1), two = cost::sequence_compute_split(cm, 1000, m, 2);
    ASSERT_LE(one.layer_fwd_s, two.layer_fwd_s);  // k = 1 is the least: the plan below uses it
    ASSERT_LE(one.layer_bwd_s, two.layer_bwd_s);
    auto free_loss = cm;
    free_loss.hardware.hbm_bytes_per_s = 0;  // loss_s is 0 then
    const auto nl = cost::sequence_compute_split(free_loss, 1000, m, 1);
    ASSERT_GT(one.head_bwd_s - nl.head_bwd_s, 1e-6) << "the loss must cost something here";
    const double gpu_fwd = 2 * one.layer_fwd_s + one.head_fwd_s, gpu_bwd = 2 * one.layer_bwd_s + one.head_bwd_s;
    cm.hardware.host_layer_fwd_s = gpu_fwd;  // a forward's host time: 2 x its GPU time
    cm.hardware.host_layer_bwd_s = 0;
    const double host_fwd = 2 * gpu_fwd, host_bwd = recompute ? host_fwd : 0.0;
    ASSERT_GT(gpu_bwd, host_bwd);  // the backward waits on the GPU
    const auto g = cost::grad_sync_time(cm, 0);
    const double it = cost::iteration_time(cm, false, 0).total_s();
    const double add = cost::grad_add(cm, 0).gpu_s;  // the main-gradient adds of the backward (HBM)
    const double expect = host_fwd + gpu_bwd + add + g.reduce_s + g.gather_s + it;
    const plan::Batch batch{{1000, 1000}};
    const std::string at = recompute ? "recompute" : "no recompute";
    EXPECT_NEAR(lower_bound_s(batch, cm, m), expect, 1e-15) << at;
    // The max of the sums, the bound before: lower by the forward's wait on the host.
    EXPECT_GT(expect - (std::max(gpu_fwd + gpu_bwd + add, host_fwd + host_bwd) + g.reduce_s + g.gather_s + it), 5e-4)
        << at;
    plan::Plan p = two_rank_plan();  // one sample per rank
    p.dynamic = false;
    p.config.max_seqlen_per_rank = m;
    ASSERT_FALSE(plan::find_violation(p, batch).has_value()) << plan::find_violation(p, batch).value_or("");
    const auto r = simulate_step(p, batch, cm);
    EXPECT_NEAR(r.step_s, expect, 1e-12) << at;
    EXPECT_NEAR(r.plan_efficiency, 1.0, 1e-9) << at;
  }
  // Samples of 1500 and 2500 tokens at M = 1000 on 4 ranks need rings of >= 2 and >= 4: the
  // rank-micro-batches at size >= 2 number >= ceil(4000 / 1000) = 4, those at size >= 4 >=
  // ceil(2500 / 1000) = 3, so the mean rank pays (4 ring(2) + 3 (ring(4) - ring(2))) / 4. A sum of
  // each tier's own ceilings, (2 ring(2) + 3 ring(4)) / 4, would not be a bound: with calls far
  // dearer than steps it exceeds the plan that runs both on one ring of 4 (1000 tokens per rank),
  // whose step the longest sample's critical path meets exactly.
  {
    auto cm = unit_cm(4, 1, 1);
    cm.training.overlap_grad_reduce = false;
    cm.hardware.host_layer_fwd_s = 1e-4;
    cm.hardware.host_layer_bwd_s = 1e-4;
    cm.hardware.ring_call_fwd_s = cm.hardware.ring_call_bwd_s = 1e-2;
    cm.hardware.ring_step_fwd_s = cm.hardware.ring_step_bwd_s = 1e-4;
    const auto g = cost::grad_sync_time(cm, 0);
    const double it = cost::iteration_time(cm, false, 0).total_s();
    const double ring2 = 2 * 2 * (1e-2 + 1e-4), ring4 = 2 * 2 * (1e-2 + 3 * 1e-4);  // 2 layers, fwd + bwd
    const double floor = 2 * (1e-4 + 1e-4);
    const plan::Batch batch{{1500, 2500}};
    plan::Plan p;
    p.planner = "test";
    p.config.dp = 1;
    p.config.cp = 4;
    p.config.max_seqlen_per_rank = 1000;
    p.microbatches = {{{{0, 4, {0, 1}}}}};
    ASSERT_FALSE(plan::find_violation(p, batch).has_value()) << plan::find_violation(p, batch).value_or("");
    const auto r = simulate_step(p, batch, cm);
    const double expect = floor + ring4 + cm.hardware.microbatch_every_stage_s + g.reduce_s + g.gather_s + it;
    EXPECT_NEAR(r.step_s, expect, 1e-9);  // host-bound
    EXPECT_NEAR(lower_bound_s(batch, cm, 1000), expect, 1e-12);
    EXPECT_LE(r.plan_efficiency, 1.0 + 1e-12);
    EXPECT_GT(floor + (2 * ring2 + 3 * ring4) / 4, floor + ring4);  // the wrong sum would exceed it
    EXPECT_LT(floor + (4 * ring2 + 3 * (ring4 - ring2)) / 4, floor + ring4);
  }
  auto cm = unit_cm(4, 1, 1);
  cm.training.overlap_grad_reduce = false;
  cm.hardware.host_layer_fwd_s = 1e-3;
  cm.hardware.host_layer_bwd_s = 2e-3;
  cm.hardware.microbatch_every_stage_s = 5e-4;
  cm.hardware.ring_call_fwd_s = 1e-3;
  cm.hardware.ring_call_bwd_s = 4e-3;
  cm.hardware.ring_step_fwd_s = 2e-3;
  cm.hardware.ring_step_bwd_s = 3e-3;
  const auto g = cost::grad_sync_time(cm, 0);
  const double it = cost::iteration_time(cm, false, 0).total_s();
  const double host = 2 * (1e-3 + 2e-3);                          // 2 layers, fwd + bwd, per micro-batch
  const double ring4 = 2 * ((1e-3 + 3 * 2e-3) + (4e-3 + 3 * 3e-3));  // per rank and micro-batch at k = 4
  const double ring2 = 2 * ((1e-3 + 2e-3) + (4e-3 + 3e-3));
  const plan::Batch batch{{4000, 4000}};  // 8000 tokens: 2 micro-batches of N * M = 4000
  const double expect = 2 * (host + ring4 + 5e-4) + g.reduce_s + g.gather_s + it;
  EXPECT_NEAR(lower_bound_s(batch, cm, 1000), expect, 1e-12);
  // Priced at the cheapest ring, the 8 forced ring rank-micro-batches gave 2 x ring2 per rank.
  EXPECT_GT(expect, 2 * (host + ring2 + 5e-4) + g.reduce_s + g.gather_s + it + 1e-3);
  plan::Plan p;
  p.planner = "test";
  p.config.dp = 1;
  p.config.cp = 4;
  p.config.max_seqlen_per_rank = 1000;
  p.microbatches = {{{{0, 4, {0}}}}, {{{0, 4, {1}}}}};
  ASSERT_FALSE(plan::find_violation(p, batch).has_value()) << plan::find_violation(p, batch).value_or("");
  const auto r = simulate_step(p, batch, cm);
  EXPECT_NEAR(r.step_s, expect, 1e-9);  // host-bound: it pays exactly those rings
}

}  // namespace
}  // namespace dcp::sim
