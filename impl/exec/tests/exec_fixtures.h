// Fixtures shared by the executor tests: the tiny attention + Mamba + MTP model, random token
// batches, and every registered planner.
#pragma once

#include "baselines/planners.h"
#include "core/rng.h"
#include "exec/executor.h"
#include "plan/planner.h"
#include "sched/planners.h"

#include <vector>

namespace dcp::exec::testing {

inline model::ModelConfig tiny_model() {
  model::ModelConfig c;
  c.vocab = 17;
  c.hidden = 8;
  c.ffn = 12;
  c.heads = 2;
  c.kv_heads = 1;
  c.head_dim = 4;
  c.mixers = {model::MixerKind::attention, model::MixerKind::mamba};
  c.mamba_heads = 8;  // every CP size up to the pool of 8 divides it
  c.mamba_head_dim = 2;
  c.mamba_state = 4;
  c.mtp = true;
  c.seed = 9;
  return c;
}

// One global batch of random tokens in [0, 16] per list of lengths, from one seeded stream.
inline std::vector<GlobalBatch> token_batches(const std::vector<std::vector<int>>& lengths, uint64_t seed) {
  Rng rng(seed);
  std::vector<GlobalBatch> out;
  for (const auto& ls : lengths) {
    GlobalBatch b;
    for (int len : ls) {
      std::vector<int32_t> s(static_cast<size_t>(len));
      for (auto& t : s) t = static_cast<int32_t>(rng.uniform_int(0, 16));
      b.samples.push_back(std::move(s));
    }
    out.push_back(std::move(b));
  }
  return out;
}

inline GlobalBatch make_batch(const std::vector<int>& lengths, uint64_t seed) {
  return std::move(token_batches({lengths}, seed).front());
}

inline const plan::PlannerRegistry& all_planners() {
  static const plan::PlannerRegistry reg = [] {
    plan::PlannerRegistry r;
    sched::register_sched_planners(r);
    baselines::register_baseline_planners(r);
    return r;
  }();
  return reg;
}

}  // namespace dcp::exec::testing
