// The cost tests' unit model on the "unit" hardware profile (test_cost.cpp, test_cost_v2.cpp):
// 2 layers, h 128, FFN 128 (no SwiGLU), 1 head of dim 128, vocab 1:
//   fwd GEMM flops/token/layer = 2*(128*384 + 128*128 + 2*128*128) = 196,608
//   fwd attention flops/token^2/layer = 2*128 = 256;   logits flops/token = 256
#pragma once

#include "cost/hardware.h"
#include "cost/time_model.h"

namespace dcp::cost::testing {

inline CostModel unit_model(int gpus = 2, int pp = 1) {
  ModelConfig m{"unit", 2, 128, 128, 1, 1, 128, 1, false};
  ClusterConfig c;
  c.gpus = gpus;
  c.pp = pp;
  c.gpus_per_node = 64;
  return CostModel{m, hardware_preset("unit"), c, {}};
}

// Llama-13B as NVIDIA's prototype script runs it (run_hybrid_cp.sh): 64 H100s, PP8, CP8, public
// profile; the tests set the training flags they need.
inline CostModel h100_llama13b_pp8_cp8() {
  ClusterConfig c;
  c.gpus = 64;
  c.pp = 8;
  c.cp = 8;
  return CostModel{model_preset("llama-13b"), hardware_preset("h100-sxm"), c, {}};
}

}  // namespace dcp::cost::testing
