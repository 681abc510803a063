// Memory model: peak bytes per GPU of a training step (issue 8).
//
//   peak(stage s, rank j) = reserved + weights + grads + optimizer states
//                         + max over the stage's op order of
//                             (stored activations of the micro-batches in flight
//                              + the transient of the running op)
//
//   weights    = params(s) * 2                       (bf16 model params; params(s) = stage_params)
//   grads      = params(s) * (4 if grad_reduce_fp32 else 2)   (Megatron DDP main-grad buffer)
//   optimizer  = params(s) * 12 / (N if distributed_optimizer else 1)
//                (fp32 main params 4 + Adam exp_avg 4 + exp_avg_sq 4, sharded over the DP x CP pool
//                 by the distributed optimizer)
//   stored activations per token per layer (bf16, TP = 1 shares divided by tp) [derived from
//   Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models" §4.1,
//   with flash attention (no s^2 term), no dropout masks (dropout 0), SwiGLU and GQA]:
//       2 * (4h          norm inputs and outputs of both blocks
//            + q + 2kv   Q, K, V kept by the attention kernel
//            + q         attention output (also the projection's input)
//            + (m-1)F    first MLP GEMM's output (2F values with SwiGLU, F without)
//            + F)        activation output (second MLP GEMM's input)
//       + 4 * heads      fp32 softmax LSE
//     (GPT: 32h + 4a, the paper's 34h minus its dropout masks). Not charged (helper-49's review,
//     2026-12-07; moderate confidence, so not in the numbers): with RoPE on a rank outside a CP
//     group (k = 1), Q, K and V are views of the fused QKV GEMM output (Megatron attention.py
//     torch.split), RoPE writes new Q and K (out of place), and V reaches the flash kernel still a
//     view (TE copies to contiguous only under CP; flash-attn's maybe_contiguous only when the last
//     stride is not 1), so the saved V keeps the whole fused buffer alive: 2q + 3kv values rather
//     than q + 2kv, 2 (q + kv) bytes per token more (Llama-13B: 20 KB, 1.25 GiB of one layer's
//     transient at 65,536 tokens under full recompute; learned positions, as in Megatron's
//     example, have no such copy). No shipped scenario's oom verdict at its published setting is
//     near enough to capacity to move (megatron-dev on llama13b-github: 64.8 of 80 GiB).
//     With full recompute only the layer
//     input (2h) is stored, and the backward of a layer re-materialises that layer's activations
//     for one micro-batch (the transient).
//   head inputs (the last virtual stage only): the final norm keeps its input (the last layer's
//     output, 2h) and the output layer its input (the norm's output, 2h), bf16, from that chunk's
//     forward to its backward: 4h / tp per token. Megatron's TransformerBlock checkpoints only its
//     layers (full recompute), so both are stored with or without recompute [derived: Megatron-LM
//     3b309c627e transformer_block.py:702 checkpoints the layers, :765-766 runs final_layernorm
//     after them; the output layer's linear saves its input for its weight gradient].
//   logits (the last virtual stage only, which holds the output layer and the loss): T * V / tp
//     * bytes per logit: `saved` kept from that chunk's forward to its backward (like the stored
//     activations), `peak` live at once while the loss or its gradient runs (hardware.cpp derives
//     both from Megatron's and TE's source: fp32 cross-entropy 4 and 6, TE's 2 and 2).
//   CP attention buffers (a rank of a CP group of k > 1 ranks), per local token, held during one
//   layer's attention [derived from TransformerEngine d0067d0 pytorch/attention/
//   dot_product_attention/context_parallel.py]:
//     ring (AttnFuncWithCPAndKVP2P): the forward keeps all k KV buffers (p2p_comm_buffers, a list
//     of cp_size: the first a copy of the local K and V, each later one received, 1685-1706) and
//     all k per-step outputs and fp32 LSEs (out_per_step, softmax_lse_per_step, 1672-1673) until
//     its final correction: k (2 * 2kv + 2q + 4 heads); the backward two (KV, dKV) buffers
//     (2396-2401), dq_buffer and one step's dq, dk, dv: 2 * 2 * 2 * 2kv + 2q + 2(q + 2kv).
//     all-gather (AttnFuncWithCPAndKVAllGather): the gathered K and V, k * 2 * 2kv, and in the
//     backward the gathered dK and dV besides: k * 4 * 2kv.
//     Either forward also holds (helper-81's review, 2026-12-07; helper-82's):
//     a second set of Q, K and V, 2 (q + 2kv) per token: Megatron splits Q, K and V as views of
//     the fused QKV GEMM output and keeps referencing that buffer through the attention call (the
//     value view; Megatron-LM 3b309c627e transformer/attention.py:857-859), RoPE writes new Q and
//     K (:886-909), and under CP TransformerEngine makes the kernel's inputs contiguous, which
//     copies V (and Q, K where they are still views) (TransformerEngine d0067d0
//     dot_product_attention/backends.py:947-950 FlashAttention, :2248-2250 FusedAttention): the
//     fused buffer, RoPE's Q and K and the copy of V are 2q + 4kv values, q + 2kv more than one set;
//     and TE's output buffers: the ring's corrected output, 2q (allocated at step 1 for THD,
//     context_parallel.py:1939-1943, or its correction init for bshd); the all-gather's out_f16
//     (:3249), its final output (:3263) and its two steps' outputs, each whole-size for THD
//     (out_per_step, :3258; q_part = q, :3395): 8q. Without recompute the final output is the
//     attention output the stored activations count (below), so 2q less. Ring forward:
//     k (2 * 2kv + 2q + 4 heads) + 2 (q + 2kv) + 2q (Llama-13B at k = 8 with full recompute:
//     288,000 B per token, 247,040 before these); all-gather: k * 2 * 2kv + 2 (q + 2kv) + 8q
//     (THD's; a padded plan's two step outputs are half-size, :3503-3504, 2q less: charged as
//     THD's, the model has no layout input here).
//     (At k = 1 the second set is the helper-49 note above, not charged.)
//   At the attention, a layer's own activations are live only up to it: with full recompute its
//   re-materialised inputs, 2 * (2h + q + 2kv) + 4 heads, below the whole layer's; without, the
//   stored activations already hold them. So a forward op's transient is max(the layer's
//   re-materialised activations, those up to the attention + the forward's CP buffers), or the
//   forward's CP buffers alone without recompute.
//   The backward adds the MLP's activation gradients [derived: autograd order of the MLP's
//   backward]: when the activation's backward runs, the gradient of fc2's input (F values) and
//   the one it writes for fc1's output ((m-1)F: 2F with SwiGLU) are live, and fc2's saved input
//   (F) was freed after fc2's backward: net 2 * (m-1) F bytes per token on top of the layer's
//   activations (stored without recompute, re-materialised with). So a backward's transient is
//   max(the forward's, those activations + 2 (m-1) F / tp); with ring CP the buffers are larger.
//   Through a layer's backward the gradient arriving for its output, 2h / tp, is live too
//   (helper-81's review, 2026-12-07: CheckpointFunction.backward holds it and the re-materialised
//   output while autograd runs, Megatron-LM 3b309c627e core/tensor_parallel/random.py:461-472;
//   without recompute the engine holds it the same way). With full recompute the re-materialised
//   activations above count the layer input the stage already stores (2h), which stands for one
//   of those two; so a backward's transient is, with full recompute, max(those up to the
//   attention + the larger of the forward's CP buffers (the layer re-run) and the backward's (its
//   attention's backward, the MLP's activations freed by then), activations + 2 (m-1) F + 2h),
//   and without, 2h + max(the backward's CP buffers, 2 (m-1) F).
//   Embedding gradient: the backward of the first virtual stage ends with the embedding's, which
//   autograd writes as a dense bf16 gradient of the whole table (V / tp x h x 2 bytes;
//   torch.nn.functional.embedding without sparse), added into the main-grad buffer by Megatron's
//   DDP hook and freed; by then that micro-batch's activations on the stage are released. The
//   gradient flowing into the embedding (its output's: T x h x 2 bytes in bf16, per local token,
//   whole on every TP rank: VocabParallelEmbedding's output is the full [s, b, h] before its
//   all-reduce or reduce-scatter, whose backward hands every rank the whole gradient; aten's
//   embedding_dense_backward reads it while it writes the table's) is live beside it: ~0.6 GiB
//   at 65,536 tokens of Llama-13B. (A copy autograd may make of that
//   gradient to make it contiguous after the embedding's transpose to [s, b, h] is not charged.)
//   (Megatron's theoretical_memory_usage.py and Korthikanti et al. leave both out.)
//   Tied embeddings on a one-stage pipeline (pp = 1: the output layer's weight is the embedding's
//   table, one parameter): without gradient accumulation fusion the output layer's backward
//   returns the weight's dense gradient (grad_output.t() @ input, bf16, V / tp x h x 2 bytes;
//   Megatron-LM 192cbc3554 tensor_parallel/layers.py:651), which autograd keeps in that
//   parameter's AccumulateGrad input buffer until its other input, the embedding's gradient,
//   arrives at the end of the micro-batch's backward (the engine runs a node once all its inputs
//   are in; Megatron's DDP hook, which adds param.grad into the main-grad buffer and frees it, is
//   registered on that node: distributed_data_parallel.py:369-372). So from the output layer's
//   backward on the stage holds one table more, and at the end two (autograd then adds the
//   embedding's into the held one in place). At that output layer's weight-gradient GEMM the
//   logits' gradient it reads is live beside the new table: bf16, 2 V / tp bytes per token (the
//   fp32 path casts its gradient to bf16 first; TE's writes it into the bf16 logits).
//   (The dgrad it wrote before, 2h / tp per token, is not charged: h tp / V of that, 1.6% in
//   Megatron's example; with tp > 1 the whole input gradient before its reduce-scatter, 2h, is:
//   head_gather.) With the fusion the layer returns a placeholder of the same shape
//   instead (torch.empty, or TransformerEngine's get_dummy_wgrad buffer, cached across calls):
//   not modelled, no shipped scenario ties its embeddings with the fusion on (Megatron's example
//   turns it off, its benchmark_dcp.sh:130). With pp > 1 the last stage has its own copy
//   (below): nothing is held.
//   Transients do not add up: the logits exist after the stage's last layer in the forward and
//   are freed by the output layer's backward before full recompute re-materialises any layer, so
//   a running op adds max(layer transient, head inputs + logits), never their sum. The simulator's
//   walk of a last-virtual-stage op: forward: live += stored; peak >= live + T max(layer, head +
//   logits peak); live += T (head + saved). Backward: peak >= live + T (peak - saved);
//   live -= T (head + saved); peak >= live + T layer (the backward's); live -= stored. Other ops:
//   the layer transient alone (the backward's in a backward), and after the first virtual stage's
//   backward peak >= live + the embedding gradient + T x the gradient flowing into it. With a held
//   tied gradient (pp = 1, the one virtual stage is both): at the loss, also peak >= live - T saved
//   + T logits' gradient + the table; then live += the table until after the embedding's peak.
//   With tp > 1, a last-virtual-stage forward first grows the resident gathered-input buffer to
//   T head_gather (live += the growth, never freed), and its backward's peaks add T head_gather
//   (the whole input gradient).
// In-flight micro-batches follow the schedule (1F1B: min(pp - s, M) on stage s; interleaved 1F1B:
// its warm-up), which the simulator walks op by op with each micro-batch's real token count.
// Parameters per stage: cost::stage_params (with tied embeddings and pp > 1 the last stage keeps
// its own copy of the embedding as the output weight, Megatron language_module.py:253-258 at
// d98e8a64dd). Activations are divided by tp as with sequence parallelism, the only tensor
// parallelism the models charge (a scenario with tp > 1 must set training.sequence_parallel;
// without it Megatron keeps part of them unsplit). Its collectives add whole-sequence transients
// on every TP rank [derived: TransformerEngine d0067d0 pytorch/module/layernorm_linear.py and
// linear.py, sequence_parallel paths]: in the forward a column-parallel linear's all-gathered
// input, or a row-parallel one's output before its reduce-scatter, 2h per token (sp_forward); in
// the backward of a column-parallel linear (QKV, FC1) its re-gathered input and its whole dgrad
// before the reduce-scatter, 4h (sp_backward). The forward's is another op than the attention's
// CP buffers (max); the backward's runs at FC1's (or QKV's) backward, after the activation's
// backward has freed its saved input and FC2's input gradient (autograd frees a node's tensors
// once it has run), so it is not on top of the MLP's gradients either (max; helper-86). A
// row-parallel linear's backward (FC2, the projection) gathers its output gradient whole (2h)
// beside its own input gradient (2F / tp, 2q / tp): max(4h, 2h + 2 max(F, q) / tp) in all
// (sp_backward; helper-87: with GeLU's F = 4h at tp 2 the row-parallel one is the larger).
// The output layer (Megatron's ColumnParallelLinear, layers.py:623-628, 671-676) gathers its
// input into Megatron's global memory buffer, which keeps it allocated (core/utils.py
// GlobalMemoryBuffer): 2h per token of the largest micro-batch the last virtual stage has run,
// resident from its first forward (head_gather); its backward also holds the whole input
// gradient before the reduce-scatter, 2h more, beside the logits' gradient.
#pragma once

#include "cost/time_model.h"

namespace dcp::cost {

struct StaticMemory {
  double weights_bytes = 0;
  double grads_bytes = 0;
  double optimizer_bytes = 0;
  double reserved_bytes = 0;
  double total() const { return weights_bytes + grads_bytes + optimizer_bytes + reserved_bytes; }
};

// Static bytes of one GPU of pipeline stage s.
StaticMemory static_memory(const CostModel& cm, int pp_stage);

// Bytes one token keeps per transformer layer without recompute (formula above).
double activation_bytes_per_token_layer(const CostModel& cm);
// Bytes stored per token per layer between a micro-batch's forward and backward: the full
// activations, or the layer input (2h / tp) with full recompute.
double stored_bytes_per_token_layer(const CostModel& cm);
// CP attention buffers per local token on a rank of a CP group of cp_size ranks (formula above;
// 0 for cp_size 1), in the attention's forward and in its backward.
struct CpBuffers {
  double fwd = 0;
  double bwd = 0;
};
CpBuffers cp_attention_buffers_per_token(const CostModel& cm, int cp_size);
// The larger of the two.
double cp_attention_buffer_bytes_per_token(const CostModel& cm, int cp_size);
// Whole-sequence transients of sequence parallelism's collectives per token (0 at tp = 1): 2h in
// a forward; in a backward the larger of a column-parallel linear's 4h and a row-parallel one's
// 2h + 2 max(F, q) / tp (formula above).
double sp_forward_bytes_per_token(const CostModel& cm);
double sp_backward_bytes_per_token(const CostModel& cm);
// The output layer's gathered input per token (0 at tp = 1): 2h, resident on the last virtual
// stage at its largest micro-batch, and as much again in its backward (formula above).
double head_gather_bytes_per_token(const CostModel& cm);
// Transient of a running forward op per token of its micro-batch on a rank of a CP group of
// cp_size ranks: with full recompute, max(one layer's re-materialised activations + sp_forward,
// those up to the attention + max(the forward's CP buffers, sp_forward)); without, max(the
// forward's CP buffers, sp_forward).
double layer_transient_bytes_per_token(const CostModel& cm, int cp_size = 1);
// The MLP's live activation gradients in the backward, per token: 2 (m-1) F / tp (formula above).
double mlp_grad_bytes_per_token(const CostModel& cm);
// The gradient of a layer's output, live through the layer's backward: 2h / tp per token.
double layer_output_grad_bytes_per_token(const CostModel& cm);
// Transient of a running backward op per token: with full recompute max(the activations up to
// the attention + the largest of the CP buffers and sp_backward, the re-materialised activations +
// max(the MLP's gradients, sp_backward) + the output's gradient); without, the output's gradient
// + max(the backward's CP buffers, the MLP's gradients, sp_backward) (formula above).
double layer_backward_transient_bytes_per_token(const CostModel& cm, int cp_size = 1);
// The embedding table's dense bf16 gradient (V / tp x h x 2), live after the first virtual
// stage's backward of a micro-batch.
double embedding_grad_bytes(const CostModel& cm);
// The gradient flowing into the embedding per token, live with the table's: 2 h (bf16, whole on
// every TP rank).
double embedding_input_grad_bytes_per_token(const CostModel& cm);
// Logits per token on the last virtual stage (V / tp x bytes per logit of the scenario's
// cross-entropy): kept from its forward to its backward, and the most live at once.
struct LogitBytes {
  double saved = 0;
  double peak = 0;
  double grad = 0;  // the bf16 gradient the output layer's backward reads: 2 V / tp
};
LogitBytes logit_bytes_per_token(const CostModel& cm);
// The output weight's dense gradient autograd holds from the output layer's backward to the
// embedding's with tied embeddings on a one-stage pipeline without gradient accumulation fusion
// (V / tp x h x 2 bytes; formula above); 0 otherwise.
double tied_output_grad_bytes(const CostModel& cm);
// The output head's saved inputs per token on the last virtual stage: 4h / tp (the final norm's
// input and the output layer's, bf16), kept from its forward to its backward.
double head_saved_bytes_per_token(const CostModel& cm);

// Hand-checkable peak of stage s under 1F1B without VPP with `in_flight` micro-batches of
// `tokens` tokens per rank each (all equal): static + in_flight * tokens * stored * layers(s)
// + tokens * max(forward and backward layer transients at cp_size, head inputs + logits peak
// (+ head_gather) on the last stage) (+ tokens * head_gather there, the resident buffer), and on stage 0 at least static + (in_flight - 1) * tokens * stored * layers(0) + the embedding gradient
// + tokens * the gradient flowing into it. With a held tied gradient (pp = 1) also static +
// in_flight * tokens * stored * layers + the table + tokens * max(backward layer transient,
// head inputs + the logits' gradient), and the table on top of the embedding's term.
double uniform_peak_bytes(const CostModel& cm, int pp_stage, int in_flight, double tokens_per_rank, int cp_size = 1);

// Usable capacity: hardware.memory_bytes (the reserve is counted in static_memory).
inline double capacity_bytes(const CostModel& cm) { return cm.hardware.memory_bytes; }

}  // namespace dcp::cost
