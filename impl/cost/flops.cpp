// Useful training FLOPs (Megatron training.py num_floating_point_operations, reference §6) and
// model presets. See flops.h for the formula; this file keeps each term next to its comment.
#include "cost/flops.h"

#include "core/error.h"

#include <sstream>

namespace dcp::cost {
double mlp_mult(const ModelConfig& m) { return m.swiglu ? 3.0 : 2.0; }

namespace {

struct Preset {
  const char* name;
  ModelConfig config;
};

// Sources: Llama-2-13B, Llama-3-8B and Llama-3-70B model cards (config.json; 70B: 80 layers,
// hidden 8192, intermediate 28672, 64 heads, 8 KV heads, vocab 128256, untied). megatron-dcp-bench: Megatron-LM
// dev (d48bd6b) examples/dynamic_context_parallel/benchmark_dcp.sh lines 22-25 (12 layers, 2048,
// 8192, 16 heads), 27 (max position embeddings = seq 8192), 40 (vocab 131072, already a multiple
// of make-vocab-size-divisible-by 128); not set there, so Megatron's defaults
// (megatron/core/transformer/transformer_config.py: gated_linear_unit False and F.gelu (208-211),
// add_bias_linear True (199), normalization "LayerNorm" (243), num_query_groups only with
// --group-query-attention; megatron/training/arguments.py: --position-embedding-type
// learned_absolute (2865-2868), embeddings tied unless --untie-embeddings-and-output-weights (3006)).
const Preset kPresets[] = {
    {"llama-13b", {"llama-13b", 40, 5120, 13824, 40, 40, 0, 32000, true}},
    {"llama3-8b", {"llama3-8b", 32, 4096, 14336, 32, 8, 0, 128256, true}},
    {"llama3-70b", {"llama3-70b", 80, 8192, 28672, 64, 8, 0, 128256, true}},
    {"megatron-dcp-bench",
     {"megatron-dcp-bench", 12, 2048, 8192, 16, 16, 0, 131072, false, true, 8192, true, true}},
    {"tiny", {"tiny", 2, 64, 128, 4, 2, 0, 256, true}},
};

}  // namespace

void validate_model(const ModelConfig& m) {
  DCP_REQUIRE(m.layers >= 1, "model '", m.name, "': \"layers\"=", m.layers, " must be >= 1");
  DCP_REQUIRE(m.hidden >= 1, "model '", m.name, "': \"hidden\"=", m.hidden, " must be >= 1");
  DCP_REQUIRE(m.ffn >= 1, "model '", m.name, "': \"ffn\"=", m.ffn, " must be >= 1");
  DCP_REQUIRE(m.heads >= 1, "model '", m.name, "': \"heads\"=", m.heads, " must be >= 1");
  DCP_REQUIRE(m.kv_heads >= 1 && m.heads % m.kv_heads == 0, "model '", m.name, "': \"kv_heads\"=",
              m.kv_heads, " must be >= 1 and divide heads=", m.heads);
  DCP_REQUIRE(m.head_dim > 0 || m.hidden % m.heads == 0, "model '", m.name, "': \"hidden\"=",
              m.hidden, " is not a multiple of heads=", m.heads, " and no head_dim is given");
  DCP_REQUIRE(m.head_dim >= 0, "model '", m.name, "': \"head_dim\"=", m.head_dim, " must be >= 0");
  DCP_REQUIRE(m.vocab >= 1, "model '", m.name, "': \"vocab\"=", m.vocab, " must be >= 1");
}

ModelConfig model_preset(const std::string& name) {
  for (const auto& p : kPresets)
    if (name == p.name) return p.config;
  std::ostringstream known;
  for (const auto& p : kPresets) known << (known.tellp() > 0 ? ", " : "") << p.name;
  throw InputError("unknown model preset \"" + name + "\" (known: " + known.str() + ")");
}

std::vector<std::string> model_preset_names() {
  std::vector<std::string> names;
  for (const auto& p : kPresets) names.emplace_back(p.name);
  return names;
}

double fwd_layer_gemm_flops_per_token(const ModelConfig& m) {
  const double h = static_cast<double>(m.hidden);
  const double q = static_cast<double>(m.q_dim());
  const double kv = static_cast<double>(m.kv_dim());
  const double qkv_proj = h * (q + 2.0 * kv);  // fused QKV projection
  const double out_proj = q * h;               // attention output projection
  const double mlp = mlp_mult(m) * h * static_cast<double>(m.ffn);
  return 2.0 * (qkv_proj + out_proj + mlp);  // x2: multiply-add
}

double fwd_layer_attn_flops_per_token_sq(const ModelConfig& m) {
  // QK^T and PV: 2 GEMMs x 2 (FMA) x q x L^2, halved by the causal mask -> 2*q*L^2.
  return 2.0 * static_cast<double>(m.q_dim());
}

double fwd_logits_flops_per_token(const ModelConfig& m) {
  return 2.0 * static_cast<double>(m.hidden) * static_cast<double>(m.vocab);
}

FlopsCoefficients train_flops_coefficients(const ModelConfig& m) {
  // Training = 3 x forward (fwd, dgrad, wgrad), reference §6 "6 = 3 x 2".
  FlopsCoefficients c;
  c.per_token = 3.0 * (m.layers * fwd_layer_gemm_flops_per_token(m) + fwd_logits_flops_per_token(m));
  c.per_token_sq = 3.0 * m.layers * fwd_layer_attn_flops_per_token_sq(m);
  return c;
}

double train_flops(const ModelConfig& m, double sum_tokens, double sum_sq_tokens) {
  const auto c = train_flops_coefficients(m);
  return c.per_token * sum_tokens + c.per_token_sq * sum_sq_tokens;
}

double train_flops_of_lengths(const ModelConfig& m, std::span<const int64_t> lengths) {
  double s = 0, q = 0;
  for (int64_t l : lengths) {
    const double x = static_cast<double>(l);
    s += x;
    q += x * x;
  }
  return train_flops(m, s, q);
}

double layer_params(const ModelConfig& m) {
  const double h = static_cast<double>(m.hidden);
  const double q = static_cast<double>(m.q_dim());
  const double kv = static_cast<double>(m.kv_dim());
  const double f = static_cast<double>(m.ffn);
  // GEMM weights (QKV, projection, MLP), then the norms and biases.
  return h * (q + 2.0 * kv) + q * h + mlp_mult(m) * h * f + layer_nongemm_params(m);
}

int layer_param_tensors(const ModelConfig& m) { return 4 + layer_nongemm_param_tensors(m); }

int layer_nongemm_param_tensors(const ModelConfig& m) { return (m.linear_bias ? 4 : 0) + (m.layernorm ? 4 : 2); }

double layer_nongemm_params(const ModelConfig& m) {
  const double h = static_cast<double>(m.hidden);
  const double q = static_cast<double>(m.q_dim());
  const double kv = static_cast<double>(m.kv_dim());
  const double f = static_cast<double>(m.ffn);
  double p = (m.layernorm ? 4.0 : 2.0) * h;
  if (m.linear_bias) p += (q + 2.0 * kv) + h + (mlp_mult(m) - 1.0) * f + h;
  return p;
}

double embedding_params(const ModelConfig& m) {
  return (static_cast<double>(m.vocab) + static_cast<double>(m.position_embeddings)) * static_cast<double>(m.hidden);
}

double output_params(const ModelConfig& m) {
  const double h = static_cast<double>(m.hidden);
  return (m.tied_embeddings ? 0.0 : static_cast<double>(m.vocab) * h) + (m.layernorm ? 2.0 : 1.0) * h;
}

double total_params(const ModelConfig& m) {
  return m.layers * layer_params(m) + embedding_params(m) + output_params(m);
}

}  // namespace dcp::cost
