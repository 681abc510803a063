// Replays the operations of one micro-batch through one pipeline stage (stage_ops.h) on the GPU
// with the real kernels, and times them (issue 10: `dcpbench share --measure`): cuBLASLt GEMMs
// (gemm_lt.h), the tensor-core attention forward / backward of each ring step (attn/cuda/), the
// layer kernels (model/cuda/). A measured run of one rank's share: the other ranks of a CP group
// are virtual, their KV blocks reach this rank as device-to-device copies, timed apart (the
// ring's transfer on one GPU is a stand-in, its real cost is modelled by the simulator).
// What is replayed is the work and its shapes, not a trained model: inputs start as a constant,
// finite, non-zero 16-bit value and buffers are reused between ops; outputs are not checked here
// (the kernels' own tests are). Each ring step of a CP group (cp > 1) runs with
// TransformerEngine's THD side kernels around it, as attn/flash_ring.h does on virtual ranks:
// read-half of the step's operands (our thd_gather_rows), the fp32 output/LSE merge (forward) or
// gradient additions (backward) into the rank's accumulators, rounded to 16-bit after the last
// step; the cost model charges them as HBM traffic (hardware.cpp). GEMMs run in the stored
// forms of a TransformerEngine linear layer (forward X W^T, dgrad dY W, wgrad dY^T X accumulated
// into one fp32 main_grad buffer: exec/stage_ops.h GemmForm). Memory: buffers grow to the largest
// operand (T x vocab on the last stage, three of them, and the vocab x hidden fp32 main_grad).
// NVTX: a range per micro-batch (the caller's label), per run (warm-up / timed run) and per layer
// and pass ("layer 3 fwd", "layer 3 recompute", "layer 3 bwd", "output bwd") for nsys.
// Timing: CUDA events after one untimed run (cuBLASLt plans, buffers), the median of `reps`
// timed runs; forward = the forward ops, backward = recompute + backward ops.
// Only built with CUDA; throws dcp::Error on any CUDA or cuBLASLt error.
#pragma once

#include <memory>
#include <string>

#include "attn/bf16_rule.h"
#include "cost/flops.h"
#include "exec/stage_ops.h"

namespace dcp::exec {

struct MeasuredMicrobatch {
  double fwd_s = 0;       // the forward ops (incl. the ring copies of the forward)
  double bwd_s = 0;       // recompute + backward ops (incl. their ring copies)
  double copy_fwd_s = 0;  // the ring's KV copies inside fwd_s
  double copy_bwd_s = 0;  // inside bwd_s
};

class StageRunner {
 public:
  StageRunner(const cost::ModelConfig& model, attn::Half half);
  ~StageRunner();
  StageRunner(const StageRunner&) = delete;
  StageRunner& operator=(const StageRunner&) = delete;
  // `label`: the NVTX range around this micro-batch's runs (e.g. "strategy dcp mb 3 (cp 4)").
  MeasuredMicrobatch measure(const StageWork& work, int reps = 3, const std::string& label = "");

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dcp::exec
