// Model configurations and useful training FLOPs (Megatron's formula).
//
// Formula: Megatron-LM megatron/training/training.py num_floating_point_operations, as written
// down in shared/reference/megatron-dynamic-cp.md §6, for a dense GPT/Llama (no MoE, no MTP):
//   h = hidden, n_l = layers, a = heads, d = head_dim, g = kv_heads, q = a*d, kv = g*d, V = vocab
//   F = S * [ 6*n_l*h*(m*F_ffn)               m = 3 with SwiGLU, 2 without
//           + 6*n_l*(h*(q + 2*kv) + q*h)       QKV projection + output projection
//           + 6*h*V ]                          logits
//     + Q * 6*n_l*q                            causal core attention (2 GEMMs x 1/2 causal)
//   with S = sum of sample lengths and Q = sum of squared sample lengths (tokens, tokens^2).
// "6" = 3 passes (fwd, dgrad, wgrad) x 2 (multiply-add). These are *useful* FLOPs: recompute is
// never counted, and every strategy is charged the same F for the same batch, so TFLOPS/GPU
// ratios between strategies are speed ratios (DESIGN.md "Useful FLOPs").
//
// The forward-only pieces (fwd_* below) are what the time model charges per pass; they satisfy
// train_flops = 3 * (fwd GEMM flops + fwd attention flops) exactly.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace dcp::cost {

struct ModelConfig {
  std::string name;       // preset name or "custom"
  int layers = 0;         // n_l
  int64_t hidden = 0;     // h
  int64_t ffn = 0;        // F_ffn (intermediate size of the MLP)
  int heads = 0;          // a (query heads)
  int kv_heads = 0;       // g (query groups; == heads for MHA)
  int head_dim = 0;       // d; 0 means hidden / heads
  int64_t vocab = 0;      // V (padded vocabulary)
  bool swiglu = true;     // gated MLP (3 weight matrices) vs plain (2)
  // Parameter-count details (memory and gradient sync; the useful-FLOPs formula ignores them, as
  // Megatron's does; position_embeddings also sets the embedding's TP collective, time_model.h). Defaults are a Llama: untied, RoPE, no biases, RMSNorm.
  bool tied_embeddings = false;      // output layer shares the embedding (Megatron's default
                                     // unless --untie-embeddings-and-output-weights)
  int64_t position_embeddings = 0;   // rows of a learned absolute position table (Megatron's
                                     // default --position-embedding-type learned_absolute); 0: RoPE
  bool linear_bias = false;          // biases in every linear layer (Megatron's default
                                     // add_bias_linear = True; --disable-bias-linear turns it off)
  bool layernorm = false;            // LayerNorm (weight + bias; Megatron's default) vs RMSNorm

  int64_t head_dim_or_default() const { return head_dim > 0 ? head_dim : hidden / heads; }
  int64_t q_dim() const { return heads * head_dim_or_default(); }    // q = a*d
  int64_t kv_dim() const { return kv_heads * head_dim_or_default(); }  // kv = g*d
};

// Throws InputError if a field is out of range (layers, hidden, heads >= 1; heads % kv_heads == 0...).
void validate_model(const ModelConfig& model);

// Presets:
//   "llama-13b"          40 layers, h 5120, FFN 13824, 40 heads, 40 KV heads, V 32000, SwiGLU
//   "llama3-8b"          32 layers, h 4096, FFN 14336, 32 heads, 8 KV heads,  V 128256, SwiGLU
//   "llama3-70b"         80 layers, h 8192, FFN 28672, 64 heads, 8 KV heads,  V 128256, SwiGLU
//   (V as the model cards give it, a multiple of 128; Megatron pads it to a multiple of
//   128 x tp, --make-vocab-size-divisible-by, which harness::cost_model_of does for a preset)
//   "megatron-dcp-bench" Megatron-LM dev examples/dynamic_context_parallel/benchmark_dcp.sh:
//                        12 layers, h 2048, FFN 8192, 16 heads (MHA), V 131072, and what the
//                        script leaves at Megatron's defaults: GeLU MLP, LayerNorm, biases,
//                        tied embeddings, learned absolute positions (8192 rows); see flops.cpp
//   "tiny"               2 layers, h 64, FFN 128, 4 heads, 2 KV heads, V 256 (tests)
// Throws InputError naming the unknown name and listing the known ones.
ModelConfig model_preset(const std::string& name);
std::vector<std::string> model_preset_names();

// F = per_token * S + per_token_sq * Q (training, fwd + bwd, useful).
struct FlopsCoefficients {
  double per_token = 0;     // flops per token (linear part, incl. logits)
  double per_token_sq = 0;  // flops per token^2 (causal core attention)
};
FlopsCoefficients train_flops_coefficients(const ModelConfig& model);

// Useful training FLOPs of a batch from S = sum L and Q = sum L^2.
double train_flops(const ModelConfig& model, double sum_tokens, double sum_sq_tokens);
// Same, from the lengths themselves (real, unpadded lengths per DESIGN.md).
double train_flops_of_lengths(const ModelConfig& model, std::span<const int64_t> lengths_tokens);

// Forward-pass pieces (per transformer layer unless stated), used by the time model:
//   fwd_layer_gemm_flops_per_token  = 2*(h*(q+2kv) + q*h + m*h*F_ffn)
//   fwd_layer_attn_flops_per_token_sq = 2*q   (causal: 4*q*L^2 / 2 for one sequence of length L)
//   fwd_logits_flops_per_token       = 2*h*V  (once per model, on the last pipeline stage)
double fwd_layer_gemm_flops_per_token(const ModelConfig& model);
double fwd_layer_attn_flops_per_token_sq(const ModelConfig& model);
double fwd_logits_flops_per_token(const ModelConfig& model);

// Parameter counts:
//   per layer: h*(q+2kv) + q*h + m*h*F_ffn + norms (2h, 4h with LayerNorm)
//              + biases when linear_bias: (q+2kv) + h + (m-1)*F_ffn + h
//   embedding V*h (+ position_embeddings*h); output V*h unless tied; final norm h (2h LayerNorm).
// embedding_params / output_params: what pipeline stage 0 / the last stage hold besides layers.
double layer_params(const ModelConfig& model);
// MLP weight matrices of h x F per layer: 3 with SwiGLU (gate, up, down), else 2.
double mlp_mult(const ModelConfig& model);
// Parameter tensors of one transformer layer: the four linear weights (QKV, projection, fc1 with
// the gate fused in, fc2), their biases with linear_bias, and the two norms' weights (+ biases
// with LayerNorm; in TE's LayerNormLinear modules they are parameters of the linear module).
int layer_param_tensors(const ModelConfig& model);
// The part of layer_params / layer_param_tensors that is not a GEMM weight: the norms' weights
// (+ biases) and the linear layers' biases.
double layer_nongemm_params(const ModelConfig& model);
int layer_nongemm_param_tensors(const ModelConfig& model);
double embedding_params(const ModelConfig& model);  // word (+ position) embeddings
double output_params(const ModelConfig& model);     // output layer (0 if tied) + final norm
double total_params(const ModelConfig& model);

}  // namespace dcp::cost
