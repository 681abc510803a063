// Fixtures of the simulator's tests (test_sim.cpp: schedules, steps, rank shares;
// test_sim_bound.cpp: the lower bound): cost models on the unit and public H100 profiles, small
// plans and a random valid plan generator.
#pragma once

#include "core/rng.h"
#include "cost/time_model.h"
#include "plan/plan.h"
#include "sim/simulator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

namespace dcp::sim::fixtures {

inline void expect_breakdown_sums(const ScheduleResult& r) {
  EXPECT_NEAR(r.compute_s + r.comm_s + r.overhead_s + r.bubble_s + r.imbalance_s, r.step_s, 1e-9 * r.step_s);
  for (const auto& g : r.gpu)
    EXPECT_NEAR(g.compute_s + g.comm_s + g.overhead_s + g.bubble_s + g.imbalance_s, r.step_s, 1e-9 * r.step_s);
}

inline cost::CostModel unit_cm(int gpus, int pp, int cp) {
  cost::ModelConfig m{"unit", 2, 128, 128, 1, 1, 128, 1, false};
  cost::ClusterConfig c;
  c.gpus = gpus;
  c.pp = pp;
  c.cp = cp;
  c.gpus_per_node = 64;
  cost::CostModel cm{m, cost::hardware_preset("unit"), c, {}};
  // Distributed optimizer, bf16 grads, overlapped: the sync of these tiny models stays hidden.
  cm.training.distributed_optimizer = true;
  cm.training.grad_reduce_fp32 = false;
  cm.training.overlap_grad_reduce = true;
  return cm;
}

// Llama3-8B on the public H100 profile (every GPU on one node unless gpus_per_node says).
inline cost::CostModel h100_llama3_8b(int gpus, int pp, int cp, int vpp = 1, int gpus_per_node = 8) {
  cost::ClusterConfig c;
  c.gpus = gpus;
  c.pp = pp;
  c.cp = cp;
  c.vpp = vpp;
  c.gpus_per_node = gpus_per_node;
  return cost::CostModel{cost::model_preset("llama3-8b"), cost::hardware_preset("h100-sxm"), c, {}};
}

inline plan::Plan two_rank_plan() {
  plan::Plan p;
  p.planner = "test";
  p.config.dp = 2;
  p.config.cp = 1;
  p.config.max_seqlen_per_rank = 2000;
  p.microbatches.push_back({{{0, 1, {0}}, {1, 1, {1}}}});
  return p;
}

inline cost::CostModel unit_cm2(int gpus, int pp) {
  cost::ModelConfig m{"unit", 2, 128, 128, 1, 1, 128, 1, false};
  cost::ClusterConfig c;
  c.gpus = gpus;
  c.pp = pp;
  c.gpus_per_node = 64;
  return cost::CostModel{m, cost::hardware_preset("unit"), c, {}};
}

// A random valid plan on a pool of 8 ranks (dp 2 x cp 4; aligned groups of 1..8 ranks, 1-3
// samples each of lo .. max(lo, cap k / n) tokens), 8 micro-batches; the lengths go to `batch`.
inline plan::Plan random_pool8_plan(Rng& rng, plan::Batch& batch, int64_t lo, int64_t cap, int64_t pad_to = 0) {
  plan::Plan p;
  p.planner = "random";
  p.config.dp = 2;
  p.config.cp = 4;
  p.config.max_seqlen_per_rank = 16384;
  p.pad_to = pad_to;
  for (int mb = 0; mb < 8; ++mb) {
    plan::MicroBatch m;
    int rank = 0;
    while (rank < 8) {
      int k = 1 << rng.uniform_int(0, 3);
      while (rank % k != 0 || rank + k > 8) k /= 2;
      plan::Group g{rank, k, {}};
      const int n = static_cast<int>(rng.uniform_int(1, 3));
      for (int i = 0; i < n; ++i) {
        g.samples.push_back(static_cast<int>(batch.lengths.size()));
        batch.lengths.push_back(rng.uniform_int(lo, std::max<int64_t>(lo, cap * k / n)));
      }
      m.groups.push_back(g);
      rank += k;
    }
    p.microbatches.push_back(m);
  }
  return p;
}

// An op of the given forward and backward time (all compute) and transfer to the next stage.
inline OpCost op(double f, double b, double p2p = 0) {
  OpCost c;
  c.fwd_s = c.fwd_compute_s = f;
  c.bwd_s = c.bwd_compute_s = b;
  c.p2p_s = p2p;
  return c;
}

// Every micro-batch: one group per rank (sizes 1), uniform costs over stages.
inline ScheduleInput singles(int pool, int pp, int vpp, int m, OpCost c) {
  ScheduleInput in;
  in.pool = pool;
  in.pp = pp;
  in.vpp = vpp;
  for (int mb = 0; mb < m; ++mb) {
    auto& g = in.groups.emplace_back();
    auto& k = in.cost.emplace_back();
    for (int j = 0; j < pool; ++j) {
      g.push_back({j, 1});
      k.emplace_back(pp * vpp, c);
    }
  }
  return in;
}

}  // namespace dcp::sim::fixtures
