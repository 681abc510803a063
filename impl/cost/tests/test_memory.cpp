// The memory model (cost/memory.h): static bytes, activations, the layer transients, the CP
// attention buffers, logits, the embedding's gradient and tied embeddings, each against hand
// arithmetic. (Split from test_cost_v2.cpp, which keeps the other parts of cost model v2.)
#include "cost/flops.h"
#include "cost/hardware.h"
#include "cost/memory.h"
#include "cost/time_model.h"
#include "unit_model.h"

#include <gtest/gtest.h>

namespace dcp::cost {
namespace {

using testing::unit_model;  // tests/unit_model.h

TEST(Memory, HandComputedStaticActivationsAndLogits) {
  auto cm = unit_model(2);
  const double p = 197504;
  auto st = static_memory(cm, 0);
  EXPECT_DOUBLE_EQ(st.weights_bytes, 2 * p);
  EXPECT_DOUBLE_EQ(st.grads_bytes, 4 * p);  // fp32 main grads (Megatron's --bf16 default)
  EXPECT_DOUBLE_EQ(st.optimizer_bytes, 12 * p);
  cm.training.distributed_optimizer = true;
  cm.training.grad_reduce_fp32 = false;
  st = static_memory(cm, 0);
  EXPECT_DOUBLE_EQ(st.grads_bytes, 2 * p);
  EXPECT_DOUBLE_EQ(st.optimizer_bytes, 12 * p / 2);  // sharded over the pool of 2
  // Per token per layer: 2 * (4h + (q + 2kv) + q + fc1 output F + activation F) + 4 * heads
  //   = 2 * (512 + 384 + 128 + 128 + 128) + 4 = 2564 (GeLU MLP).
  EXPECT_DOUBLE_EQ(activation_bytes_per_token_layer(cm), 2564);
  cm.model.swiglu = true;  // fc1 output 2F values
  EXPECT_DOUBLE_EQ(activation_bytes_per_token_layer(cm), 2564 + 2 * 128);
  cm.model.swiglu = false;
  EXPECT_DOUBLE_EQ(stored_bytes_per_token_layer(cm), 2564);
  cm.training.recompute_full = true;
  EXPECT_DOUBLE_EQ(stored_bytes_per_token_layer(cm), 256);  // the layer input only
  EXPECT_DOUBLE_EQ(layer_transient_bytes_per_token(cm), 2564);  // one layer re-materialised
  // The backward adds the MLP's activation gradients: 2 (m - 1) F = 2 * 128 with GeLU (F = 128),
  // 4F with SwiGLU; without recompute on top of nothing (the activations are stored). And the
  // gradient of the layer's output, 2h = 256 (with recompute: beside the re-materialised output,
  // the input counted twice standing for one of the two).
  EXPECT_DOUBLE_EQ(mlp_grad_bytes_per_token(cm), 256);
  EXPECT_DOUBLE_EQ(layer_output_grad_bytes_per_token(cm), 256);
  EXPECT_DOUBLE_EQ(layer_backward_transient_bytes_per_token(cm), 2564 + 256 + 256);
  {
    auto sw = cm;
    sw.model.swiglu = true;
    EXPECT_DOUBLE_EQ(mlp_grad_bytes_per_token(sw), 512);
    sw.training.recompute_full = false;
    EXPECT_DOUBLE_EQ(layer_backward_transient_bytes_per_token(sw), 256 + 512);
    EXPECT_DOUBLE_EQ(layer_transient_bytes_per_token(sw), 0);
    sw.cluster.tp = 2;  // the output's gradient is split like the activations
    EXPECT_DOUBLE_EQ(layer_output_grad_bytes_per_token(sw), 128);
  }
  // Logits on the last virtual stage: V / tp x bytes per logit (h100-sxm's derived values:
  // Megatron's fp32 cross-entropy keeps 4 and peaks at 6, unfused or fused natively; TE's 2, 2).
  cm.model.vocab = 1000;
  const auto h100 = hardware_preset("h100-sxm");
  cm.hardware.ce_fp32_saved_bytes_per_logit = h100.ce_fp32_saved_bytes_per_logit;
  cm.hardware.ce_fp32_peak_bytes_per_logit = h100.ce_fp32_peak_bytes_per_logit;
  cm.hardware.ce_te_saved_bytes_per_logit = h100.ce_te_saved_bytes_per_logit;
  cm.hardware.ce_te_peak_bytes_per_logit = h100.ce_te_peak_bytes_per_logit;
  EXPECT_DOUBLE_EQ(logit_bytes_per_token(cm).saved, 4000);
  EXPECT_DOUBLE_EQ(logit_bytes_per_token(cm).peak, 6000);
  cm.training.cross_entropy_te = true;  // the impl without the fusion: ignored, as in Megatron
  EXPECT_DOUBLE_EQ(logit_bytes_per_token(cm).peak, 6000);
  cm.training.cross_entropy_fusion = true;
  EXPECT_DOUBLE_EQ(logit_bytes_per_token(cm).saved, 2000);
  EXPECT_DOUBLE_EQ(logit_bytes_per_token(cm).peak, 2000);
  cm.training.cross_entropy_te = false;  // fused, native implementation: the fp32 path
  EXPECT_DOUBLE_EQ(logit_bytes_per_token(cm).peak, 6000);
  cm.model.vocab = 1001;  // tp 2 splits the vocabulary
  cm.cluster.tp = 2;
  EXPECT_DOUBLE_EQ(logit_bytes_per_token(cm).saved, 4 * 1001 / 2.0);
  cm.cluster.tp = 1;
  cm.model.vocab = 1000;
  // The head's saved inputs: the final norm's and the output layer's, 2h each in bf16, / tp.
  EXPECT_DOUBLE_EQ(head_saved_bytes_per_token(cm), 4.0 * 128);
  cm.cluster.tp = 2;
  EXPECT_DOUBLE_EQ(head_saved_bytes_per_token(cm), 2.0 * 128);
  cm.cluster.tp = 1;
  // Stage 0 is the last stage (pp 1): 3 micro-batches of 1000 tokens in flight, 2 layers, and
  // the larger of the layer transient and the head's inputs + the logits (never their sum,
  // memory.h).
  cm.hardware.memory_reserved_bytes = 1e6;
  const double base = static_memory(cm, 0).total() + 3 * 1000.0 * 256 * 2;
  EXPECT_DOUBLE_EQ(uniform_peak_bytes(cm, 0, 3, 1000), base + 1000.0 * (512 + 6000));
  cm.training.cross_entropy_te = true;  // 512 + 2000 per token: the backward's layer transient is larger
  EXPECT_DOUBLE_EQ(uniform_peak_bytes(cm, 0, 3, 1000), base + 1000.0 * (2564 + 256 + 256));
  EXPECT_DOUBLE_EQ(static_memory(cm, 0).reserved_bytes, 1e6);
  // Stage 0's embedding gradient (V x h x 2 = 1000 x 128 x 2 = 256,000 B) and the gradient flowing
  // into it (2h = 256 B per token) after a micro-batch's backward, beside the other 2
  // micro-batches' stored layer inputs: the peak with micro-batches of 10 tokens (the running op:
  // 3 x 10 x 512 + 10 x max(3076, 512 + 2000 head and logits) = 46,120 B).
  EXPECT_DOUBLE_EQ(embedding_grad_bytes(cm), 1000.0 * 128 * 2);
  EXPECT_DOUBLE_EQ(embedding_input_grad_bytes_per_token(cm), 2.0 * 128);
  cm.cluster.tp = 2;  // whole on every TP rank (the embedding's output is, before its reduction)
  EXPECT_DOUBLE_EQ(embedding_input_grad_bytes_per_token(cm), 2.0 * 128);
  cm.cluster.tp = 1;
  EXPECT_DOUBLE_EQ(uniform_peak_bytes(cm, 0, 3, 10),
                   static_memory(cm, 0).total() + 2 * 10.0 * 256 * 2 + 256000 + 10 * 256.0);

  // Tied embeddings at pp 1 without gradient accumulation fusion (Megatron's example): the output
  // weight's dense gradient, the same 256,000 B as the embedding's table, is held from the output
  // layer's backward until the embedding's gradient is added to it (memory.h).
  auto tied = cm;
  tied.model.tied_embeddings = true;
  EXPECT_DOUBLE_EQ(tied_output_grad_bytes(tied), 0);  // with the fusion: not modelled
  tied.training.gradient_accumulation_fusion = false;
  EXPECT_DOUBLE_EQ(tied_output_grad_bytes(tied), 256000);
  EXPECT_DOUBLE_EQ(tied_output_grad_bytes(unit_model(2, 2)), 0);  // untied
  {
    auto split = unit_model(2, 2);  // pp 2: the last stage has its own copy, nothing is held
    split.model.tied_embeddings = true;
    split.training.gradient_accumulation_fusion = false;
    EXPECT_DOUBLE_EQ(tied_output_grad_bytes(split), 0);
  }
  EXPECT_DOUBLE_EQ(logit_bytes_per_token(tied).grad, 2000);  // bf16, whatever the loss keeps
  const double tied_static = static_memory(tied, 0).total();
  // 10 tokens: after the backward, two tables (the held one and the embedding's) beside the other
  // 2 micro-batches' inputs and the gradient flowing into the embedding: 2 x 10 x 512 + 2 x
  // 256,000 + 10 x 256 = 524,800 (the layers' backward with the held table: 3 x 10 x 512 +
  // 256,000 + 10 x 3076 = 302,120, below).
  EXPECT_DOUBLE_EQ(uniform_peak_bytes(tied, 0, 3, 10), tied_static + 524800);
  // 1000 tokens: the held table on top of the layers' backward: 3 x 1000 x 512 + 256,000 + 1000
  // x max(3076, 512 + 2000) = 4,868,000 (untied: 4,612,000; the end of the backward: 1,792,000).
  EXPECT_DOUBLE_EQ(uniform_peak_bytes(tied, 0, 3, 1000), tied_static + 4868000);
  // A wider vocabulary (2000: the table 512,000 B, the logits' gradient 4000 B per token): the
  // output layer's weight-gradient GEMM is the peak, the held table beside the logits' gradient
  // and the head's inputs: 1,536,000 + 512,000 + 1000 x (512 + 4000) = 6,560,000 (the loss alone,
  // TE's 2 bytes per logit: 1,536,000 + 1000 x (512 + 4000) = 6,048,000).
  tied.model.vocab = 2000;
  EXPECT_DOUBLE_EQ(uniform_peak_bytes(tied, 0, 3, 1000), static_memory(tied, 0).total() + 6560000);
}

TEST(Memory, Llama13bPipelineStageOfThePrototype) {
  // run_hybrid_cp.sh: PP8, distributed optimizer over the pool of 8, fp32 grads, full recompute.
  CostModel cm = testing::h100_llama13b_pp8_cp8();
  cm.training.distributed_optimizer = true;
  cm.training.recompute_full = true;
  // Stage 1 holds 5 layers of 317,204,480 params (4h^2 + 3hF + 2h).
  EXPECT_DOUBLE_EQ(layer_params(cm.model), 4.0 * 5120 * 5120 + 3.0 * 5120 * 13824 + 2 * 5120);
  const double params = 5 * layer_params(cm.model);
  const auto st = static_memory(cm, 1);
  EXPECT_DOUBLE_EQ(st.weights_bytes + st.grads_bytes + st.optimizer_bytes, params * (2 + 4 + 12.0 / 8));
  // 8 micro-batches of 65,536 tokens in flight keep 8 x 65,536 x 5 layers x 2h bytes.
  const double peak = uniform_peak_bytes(cm, 1, 8, 65536);
  // The running backward re-materialises one layer and holds the SwiGLU MLP's gradients, 4F, and
  // the gradient of the layer's output, 2h.
  const double mlp_grads = 4.0 * 13824 + 2.0 * 5120;
  EXPECT_NEAR(peak - st.total(),
              8.0 * 65536 * 5 * 2 * 5120 + 65536.0 * (activation_bytes_per_token_layer(cm) + mlp_grads), 1);
  EXPECT_LT(peak, capacity_bytes(cm));  // it fits an 80 GB H100
  // On a rank of a CP group of 8, the ring attention's buffers (memory.h, TE's
  // AttnFuncWithCPAndKVP2P; MHA: q = kv = 5120, 40 heads) by hand, per local token:
  //   forward 8 x (2*2*5120 KV + 2*5120 out + 4*40 LSE) = 247,040, + the second Q, K, V set
  //   2*(5120 + 2*5120) = 30,720 + the corrected output 2*5120 = 10,240: 288,000; backward
  //   16*5120 + 2*5120 + 2*(5120 + 2*5120) = 122,880; the re-materialised layer up to the
  //   attention 2*(2*5120 + 5120 + 2*5120) + 4*40 = 51,360: 339,360 per token, above the whole
  //   layer's.
  EXPECT_DOUBLE_EQ(cp_attention_buffer_bytes_per_token(cm, 8), 288000);
  EXPECT_DOUBLE_EQ(cp_attention_buffer_bytes_per_token(cm, 1), 0);
  EXPECT_DOUBLE_EQ(layer_transient_bytes_per_token(cm, 8), 339360);
  // At 2 ranks the backward's buffers (122,880, not scaling with k) are the larger: a forward's
  // transient is the whole re-materialised layer (its buffers, 2 x 30,880 + 30,720 + 10,240 =
  // 102,720, + 51,360 are below it), a backward's the layer + the MLP's and the output's gradients
  // (above 51,360 + 122,880).
  EXPECT_DOUBLE_EQ(cp_attention_buffers_per_token(cm, 2).fwd, 102720);
  EXPECT_DOUBLE_EQ(cp_attention_buffers_per_token(cm, 2).bwd, 122880);
  EXPECT_DOUBLE_EQ(layer_transient_bytes_per_token(cm, 2), activation_bytes_per_token_layer(cm));
  EXPECT_DOUBLE_EQ(layer_backward_transient_bytes_per_token(cm, 2), activation_bytes_per_token_layer(cm) + mlp_grads);
  EXPECT_NEAR(uniform_peak_bytes(cm, 1, 8, 65536, 8) - peak,
              65536.0 * (339360 - activation_bytes_per_token_layer(cm) - mlp_grads), 1);
  EXPECT_DOUBLE_EQ(layer_backward_transient_bytes_per_token(cm, 8), 339360);  // the buffers cover it
  {
    auto ag = cm;  // all-gather CP: the gathered K, V and in the backward dK, dV: 8 * 4 * 2 * 5120
    ag.training.cp_comm = CpComm::all_gather;
    EXPECT_DOUBLE_EQ(cp_attention_buffer_bytes_per_token(ag, 8), 8 * 4 * 2 * 5120.0);
    // At 2 ranks its forward is the larger: 2 * 2 * 2 * 5120 + 30,720 + 8 * 5120 (out_f16, the
    // two steps' outputs and the final one) = 112,640 against 2 * 4 * 2 * 5120 = 81,920.
    EXPECT_DOUBLE_EQ(cp_attention_buffers_per_token(ag, 2).fwd, 112640);
    EXPECT_DOUBLE_EQ(cp_attention_buffer_bytes_per_token(ag, 2), 112640);
    ag.training.recompute_full = false;  // its final output is the stored attention output
    EXPECT_DOUBLE_EQ(cp_attention_buffers_per_token(ag, 2).fwd, 112640 - 2 * 5120);
    auto no_recompute = cm;  // the stored activations already hold the layer's: the buffers alone
    no_recompute.training.recompute_full = false;
    // (the final output is the stored attention output: 288,000 - 2 x 5120)
    EXPECT_DOUBLE_EQ(layer_transient_bytes_per_token(no_recompute, 8), 277760);
    EXPECT_DOUBLE_EQ(layer_transient_bytes_per_token(no_recompute, 1), 0);
    // Its backward: the output's gradient + max(the backward's buffers, the MLP's gradients
    // 4F = 55,296); the forward's second Q, K, V set and outputs are gone.
    EXPECT_DOUBLE_EQ(layer_backward_transient_bytes_per_token(no_recompute, 8), 10240 + 122880);
    EXPECT_DOUBLE_EQ(layer_backward_transient_bytes_per_token(no_recompute, 1), 10240 + 55296);
  }
  // The last stage (5 layers + the output layer of V x h) runs one micro-batch at a time: its
  // peak adds the larger of one re-materialised layer and the head's inputs (4h) + the logits,
  // never both; TE's cross-entropy (run_hybrid_cp.sh USE_TE_CE=1) keeps 2 bytes per logit.
  cm.training.cross_entropy_fusion = true;
  cm.training.cross_entropy_te = true;
  cm.model.vocab = 131200;  // the scenarios' padded vocabulary (llama13b-github.json)
  const double v = static_cast<double>(cm.model.vocab);
  ASSERT_GT(2 * v, activation_bytes_per_token_layer(cm));  // the logits are the larger here
  const auto last = static_memory(cm, 7);
  EXPECT_DOUBLE_EQ(stage_params(cm, 7), params + v * 5120 + 5120);  // untied: output weight + final norm
  EXPECT_NEAR(uniform_peak_bytes(cm, 7, 1, 65536) - last.total(),
              65536.0 * 5 * 2 * 5120 + 65536.0 * (4 * 5120 + 2 * v), 1);
}

TEST(Memory, TiedEmbeddingsKeepACopyOnTheLastStageWhenSplit) {
  auto cm = unit_model(2, 2);  // pp 2
  cm.model.tied_embeddings = true;
  const double vh = static_cast<double>(cm.model.vocab) * cm.model.hidden;
  const double norm = (cm.model.layernorm ? 2.0 : 1.0) * cm.model.hidden;
  const double layers1 = layers_of_virtual_stage(cm.model, cm.cluster, 1);
  EXPECT_DOUBLE_EQ(stage_params(cm, 1), layers1 * layer_params(cm.model) + norm + vh);
  EXPECT_DOUBLE_EQ(stage_params(cm, 0), layers_of_virtual_stage(cm.model, cm.cluster, 0) * layer_params(cm.model) +
                                            embedding_params(cm.model));
  auto one = unit_model(2, 1);  // pp 1: the embedding is the output weight, one copy
  one.model.tied_embeddings = true;
  EXPECT_DOUBLE_EQ(stage_params(one, 0),
                   one.model.layers * layer_params(one.model) + embedding_params(one.model) + norm);
  EXPECT_DOUBLE_EQ(stage_params(one, 0), total_params(one.model));
}

}  // namespace
}  // namespace dcp::cost
