// Memory model (formulas and sources in memory.h).
#include "cost/memory.h"

#include "core/error.h"

#include <algorithm>

namespace dcp::cost {

StaticMemory static_memory(const CostModel& cm, int s) {
  const double params = stage_params(cm, s);
  StaticMemory m;
  m.weights_bytes = 2.0 * params;
  m.grads_bytes = (cm.training.grad_reduce_fp32 ? 4.0 : 2.0) * params;
  const double shard = cm.training.distributed_optimizer ? static_cast<double>(cm.cluster.pool()) : 1.0;
  m.optimizer_bytes = 12.0 * params / shard;
  m.reserved_bytes = cm.hardware.memory_reserved_bytes;
  return m;
}

double activation_bytes_per_token_layer(const CostModel& cm) {
  const auto& m = cm.model;
  const double h = static_cast<double>(m.hidden), q = static_cast<double>(m.q_dim()),
               kv = static_cast<double>(m.kv_dim()), f = static_cast<double>(m.ffn);
  const double values = 4.0 * h + (q + 2.0 * kv) + q + (mlp_mult(m) - 1.0) * f + f;
  return (2.0 * values + 4.0 * m.heads) / cm.cluster.tp;
}

double stored_bytes_per_token_layer(const CostModel& cm) {
  if (cm.training.recompute_full) return 2.0 * static_cast<double>(cm.model.hidden) / cm.cluster.tp;
  return activation_bytes_per_token_layer(cm);
}

CpBuffers cp_attention_buffers_per_token(const CostModel& cm, int cp_size) {
  if (cp_size <= 1) return {};
  const auto& m = cm.model;
  const double q = static_cast<double>(m.q_dim()), kv = static_cast<double>(m.kv_dim()),
               heads = static_cast<double>(m.heads), k = static_cast<double>(cp_size);
  // In the forward, besides the communication buffers (memory.h): the second set of Q, K and V
  // (the fused QKV output Megatron's attention still holds beside the contiguous tensors the
  // kernel reads) and TE's output buffers; without recompute the final output is the attention
  // output the stored activations already count.
  const double second_qkv = 2.0 * (q + 2.0 * kv), final_out = cm.training.recompute_full ? 2.0 * q : 0.0;
  CpBuffers b;
  if (cm.training.cp_comm == CpComm::ring) {
    b.fwd = k * (2.0 * 2.0 * kv + 2.0 * q + 4.0 * heads) + second_qkv + final_out;
    b.bwd = 2.0 * 2.0 * 2.0 * 2.0 * kv + 2.0 * q + 2.0 * (q + 2.0 * kv);
  } else {
    // out_f16 and the two steps' outputs (whole-size for THD) beside the final output.
    b.fwd = k * 2.0 * 2.0 * kv + second_qkv + 3.0 * 2.0 * q + final_out;
    b.bwd = k * 4.0 * 2.0 * kv;
  }
  b.fwd /= cm.cluster.tp;
  b.bwd /= cm.cluster.tp;
  return b;
}

double cp_attention_buffer_bytes_per_token(const CostModel& cm, int cp_size) {
  const CpBuffers b = cp_attention_buffers_per_token(cm, cp_size);
  return std::max(b.fwd, b.bwd);
}

namespace {

// A layer's re-materialised activations up to its attention (full recompute), per token.
double up_to_attention_bytes_per_token(const CostModel& cm) {
  const auto& m = cm.model;
  return (2.0 * (2.0 * static_cast<double>(m.hidden) + static_cast<double>(m.q_dim()) + 2.0 * static_cast<double>(m.kv_dim())) +
          4.0 * static_cast<double>(m.heads)) /
         cm.cluster.tp;
}

}  // namespace

double sp_forward_bytes_per_token(const CostModel& cm) {
  return cm.cluster.tp > 1 ? 2.0 * static_cast<double>(cm.model.hidden) : 0.0;
}

double sp_backward_bytes_per_token(const CostModel& cm) {
  if (cm.cluster.tp <= 1) return 0.0;
  const double h = static_cast<double>(cm.model.hidden);
  const double widest = static_cast<double>(std::max(cm.model.ffn, cm.model.q_dim()));
  return std::max(4.0 * h, 2.0 * h + 2.0 * widest / cm.cluster.tp);
}

double head_gather_bytes_per_token(const CostModel& cm) {
  return cm.cluster.tp > 1 ? 2.0 * static_cast<double>(cm.model.hidden) : 0.0;
}

double layer_transient_bytes_per_token(const CostModel& cm, int cp_size) {
  const double fwd = cp_attention_buffers_per_token(cm, cp_size).fwd;
  const double sp = sp_forward_bytes_per_token(cm);
  if (!cm.training.recompute_full) return std::max(fwd, sp);
  return std::max(activation_bytes_per_token_layer(cm) + sp, up_to_attention_bytes_per_token(cm) + std::max(fwd, sp));
}

double mlp_grad_bytes_per_token(const CostModel& cm) {
  return 2.0 * (mlp_mult(cm.model) - 1.0) * static_cast<double>(cm.model.ffn) / cm.cluster.tp;
}

double layer_output_grad_bytes_per_token(const CostModel& cm) {
  return 2.0 * static_cast<double>(cm.model.hidden) / cm.cluster.tp;
}

double layer_backward_transient_bytes_per_token(const CostModel& cm, int cp_size) {
  const double grad = layer_output_grad_bytes_per_token(cm);
  const CpBuffers b = cp_attention_buffers_per_token(cm, cp_size);
  const double sp = sp_backward_bytes_per_token(cm);
  if (!cm.training.recompute_full) return grad + std::max({b.bwd, mlp_grad_bytes_per_token(cm), sp});
  // Full recompute: the re-materialised activations count the layer input the stage stores
  // already (2h), and the recomputed layer output (2h) and the gradient arriving for it (2h) are
  // live beside them: net + one 2h. Up to the attention (re-running the layer with the forward's
  // buffers, then the attention's backward with its own, the MLP's activations freed by then)
  // the double-counted input stands for that gradient.
  return std::max(up_to_attention_bytes_per_token(cm) + std::max({b.fwd, b.bwd, sp}),
                  activation_bytes_per_token_layer(cm) + std::max(mlp_grad_bytes_per_token(cm), sp) + grad);
}

double embedding_grad_bytes(const CostModel& cm) {
  return 2.0 * static_cast<double>(cm.model.vocab) / cm.cluster.tp * static_cast<double>(cm.model.hidden);
}

double embedding_input_grad_bytes_per_token(const CostModel& cm) {
  return 2.0 * static_cast<double>(cm.model.hidden);  // not split by tp (memory.h)
}

LogitBytes logit_bytes_per_token(const CostModel& cm) {
  const auto& hw = cm.hardware;
  const bool te = cm.training.cross_entropy_fusion && cm.training.cross_entropy_te;
  const double logits = static_cast<double>(cm.model.vocab) / cm.cluster.tp;
  return {logits * (te ? hw.ce_te_saved_bytes_per_logit : hw.ce_fp32_saved_bytes_per_logit),
          logits * (te ? hw.ce_te_peak_bytes_per_logit : hw.ce_fp32_peak_bytes_per_logit), logits * 2.0};
}

double tied_output_grad_bytes(const CostModel& cm) {
  const bool held = cm.model.tied_embeddings && cm.cluster.pp == 1 && !cm.training.gradient_accumulation_fusion;
  return held ? embedding_grad_bytes(cm) : 0.0;  // the same table: V / tp x h x 2
}

double head_saved_bytes_per_token(const CostModel& cm) {
  return 2.0 * 2.0 * static_cast<double>(cm.model.hidden) / cm.cluster.tp;
}

double uniform_peak_bytes(const CostModel& cm, int s, int in_flight, double tokens, int cp_size) {
  DCP_CHECK(s >= 0 && s < cm.cluster.pp, "stage ", s);
  double layers = 0;
  for (int chunk = 0; chunk < cm.cluster.vpp; ++chunk)
    layers += layers_of_virtual_stage(cm.model, cm.cluster, chunk * cm.cluster.pp + s);
  const double one = tokens * stored_bytes_per_token_layer(cm) * layers / cm.cluster.vpp;
  const bool last = s == cm.cluster.pp - 1;
  const LogitBytes logits = logit_bytes_per_token(cm);
  const double head = last ? head_saved_bytes_per_token(cm) : 0.0;
  const double gather = last ? head_gather_bytes_per_token(cm) : 0.0;  // resident, and as much in the backward
  const double head_and_logits = last ? head + logits.peak + gather : 0.0;
  // A forward's transient may be the larger (without recompute, with CP); the held tied table
  // lives through backwards only.
  const double layer_bwd = layer_backward_transient_bytes_per_token(cm, cp_size);
  const double layer = std::max(layer_transient_bytes_per_token(cm, cp_size), layer_bwd);
  double running = in_flight * one + tokens * (gather + std::max(layer, head_and_logits));
  const double tied = tied_output_grad_bytes(cm);  // pp 1 only: stage 0 is the last
  if (tied > 0)
    running = std::max(running, in_flight * one + tied + tokens * (gather + std::max(layer_bwd, head + logits.grad + gather)));
  const double embedding = s == 0 ? (in_flight - 1) * one + embedding_grad_bytes(cm) +
                                        tokens * (embedding_input_grad_bytes_per_token(cm) + gather) + tied
                                  : 0.0;
  return static_memory(cm, s).total() + std::max(running, embedding);
}

}  // namespace dcp::cost
