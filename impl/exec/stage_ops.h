// The operations one GPU runs for one micro-batch through one pipeline stage (issue 10): the
// work a measured run of a rank's share (sim/rank_share.h) replays on the device with the real
// kernels (cuBLASLt GEMMs, the tensor-core attention, the layer kernels), and the same work the
// cost model charges, so that measured and simulated times are of the same thing.
//
// Per transformer layer of a Llama-style block (pre-norm, TP1), forward:
//   rmsnorm [T, h]; GEMM qkv [T, h] x [h, q + 2 kv]; rope on q and k; attention: the ring steps
//   of this rank (cp_size k, cp_rank r; cp_attn.h ring_step_type: the diagonal over its local rows,
//   then per step the lower (all local Q x the front half of src's KV) or upper (the back half of
//   Q x all of src's KV) rectangle, the real lengths of each half per sequence); GEMM proj
//   [T, q] x [q, h]; residual add; rmsnorm; GEMM up/gate [T, h] x [h, 2 F] (F with a plain MLP);
//   swiglu; GEMM down [T, F] x [F, h]; residual add.
// Backward, per layer in reverse: with full recompute the forward again, then dgrad and wgrad of
// each linear layer W [out, in] (dgrad dY [T, out] x W; wgrad dY^T x X into fp32, GemmForm below),
// the attention backward of every
// step, the backward of rmsnorm, rope, swiglu. On the last stage: the output layer GEMM
// [T, h] x [h, V] (forward; dgrad + wgrad backward) and the loss over [T, V].
// T = the rank's THD rows (RankMicrobatch::local_tokens: each sequence padded to 2 k, / k).
// Approximations of the replay (stage_runner.h), all element-wise and memory-bound: a plain MLP's
// activation (GeLU, megatron-dcp-bench) runs as the SwiGLU kernel over its F columns, LayerNorm
// as RMSNorm, biases are not added.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "attn/cp_attn.h"
#include "cost/flops.h"

namespace dcp::exec {

enum class OpKind { gemm, attention, rmsnorm, rope, swiglu, residual, loss };
// How a GEMM's row-major operands are stored, C[m, n] = op(A) op(B) with inner dimension k, as a
// TransformerEngine / PyTorch linear layer with weight W [out, in] runs them:
//   nt: A [m, k], B stored [n, k]   forward  Y [T, out] = X [T, in] W^T
//   nn: A [m, k], B [k, n]          dgrad    dX [T, in] = dY [T, out] W
//   tn: A stored [k, m], B [k, n]   wgrad    dW [out, in] = dY^T X (k = T)
enum class GemmForm { nn, nt, tn };
enum class Pass { fwd, recompute, bwd };

struct StageOp {
  OpKind kind = OpKind::gemm;
  Pass pass = Pass::fwd;
  int layer = -1;             // transformer layer within the stage (-1: output layer / loss)
  const char* name = "";      // e.g. "qkv", "qkv.dgrad", "attn.step1"
  // gemm: C[m, n] = op(A) op(B) (GemmForm); accumulate_fp32: C is fp32 and the product is added to
  // it (the wgrad GEMMs: Megatron's gradient accumulation fusion, on by default, accumulates the
  // weight gradient into the fp32 main_grad: megatron/training/arguments.py
  // --no-gradient-accumulation-fusion is store_false), else C is 16-bit and overwritten. Not
  // replayed: the DDP hook's main-gradient adds (norms, biases, embeddings; every parameter
  // without the fusion), which cost::grad_add charges in the prediction beside the measurement.
  int64_t m = 0, n = 0, k = 0;
  GemmForm form = GemmForm::nn;
  bool accumulate_fp32 = false;
  // attention (one ring step): per sequence the real query and key counts; causal only for the
  // diagonal step; backward when pass == bwd
  attn::RingStep step = attn::RingStep::diagonal;
  std::vector<int32_t> len_q, len_k;
  int64_t transfer_rows = 0;  // rows of the KV block the ring sent for this step (src's local rows;
                              // 0 for the diagonal: this rank's own KV)
  // TransformerEngine's THD ring side kernels around the step (cp_size > 1; flash_ring.h runs the
  // same): read-half of the step's operands at gather_rows (lower: src's front-half KV rows;
  // upper: this rank's back-half rows of Q, and in the backward of O, dO and the LSE), then the
  // fp32 output/LSE merge (forward) or gradient additions (backward) into the rank's local
  // accumulators (local_rows rows), rounded to 16-bit after the group's last step.
  int cp_size = 1;
  int64_t local_rows = 0;
  bool last_step = false;
  std::shared_ptr<const std::vector<int64_t>> gather_rows;  // null for diagonal / full steps
  // element-wise ops: rows x width elements
  int64_t rows = 0, width = 0;

  double flops() const;  // GEMM: 2 m n k; attention: 4 heads d x the (q, k) pairs attended (x 2.5
                         // backward, FlashAttention's count); others 0. Needs the heads: see below.
  int heads = 0, head_dim = 0, kv_heads = 0;
};

struct StageWork {
  std::vector<StageOp> ops;
  int64_t rows = 0;  // T
};

// The ops of one micro-batch: the group's sequences `lengths` (as the plan charges them), the
// group size and this rank's place in it, the stage's transformer layers, whether it is the last
// stage, whether the backward recomputes the forward. Throws InputError for an impossible input.
StageWork stage_ops(const cost::ModelConfig& model, const std::vector<int64_t>& lengths, int cp_size, int cp_rank,
                    int layers, bool last_stage, bool recompute_full);

// Sums over the ops of one pass.
double gemm_flops(const StageWork& w, Pass pass);
double attention_flops(const StageWork& w, Pass pass);

}  // namespace dcp::exec
