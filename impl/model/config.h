// The tiny Llama-style model that every strategy trains (issue: model + convergence).
//
//   tokens --embedding--> x [T, hidden]
//   for each block b:  x += Mixer_b(RMSNorm(x))    Mixer = attention (GQA, THD RoPE, CP ring or
//                      x += SwiGLU(RMSNorm(x))             all-gather) or Mamba-2-style scan
//   main:  logits = RMSNorm_f(x) · W_out^T          loss = CE(next token), per-token normalised
//   MTP (depth 1, DeepSeek-V3 §2.2 / Megatron MultiTokenPredictionLayer):
//          h' = W_eh · [RMSNorm_e(Emb(token t+1)) ; RMSNorm_h(x)]   (embedding shared)
//          h' = Block(h')  (attention + SwiGLU) ;  logits' = RMSNorm_m(h') · W_out^T (head shared)
//          loss' = CE(token t+2), weighted by mtp_loss_weight
// Every size is small enough that a 50-step run of 8 ranks fits in minutes on 2 CPU cores;
// nothing here is tuned to a result.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attn/cp_attn.h"

namespace dcp::model {

enum class MixerKind { attention, mamba };
const char* mixer_name(MixerKind k);

struct ModelConfig {
  int vocab = 256;      // byte-level tokens
  int hidden = 32;
  int ffn = 64;         // SwiGLU inner width
  int heads = 4;        // attention query heads
  int kv_heads = 2;     // GQA
  int head_dim = 8;
  std::vector<MixerKind> mixers{MixerKind::attention, MixerKind::mamba};
  int mamba_heads = 8;      // SSM heads (CP sizes used must divide this, §7r)
  int mamba_head_dim = 4;   // channels per SSM head (d_inner = mamba_heads * mamba_head_dim)
  int mamba_state = 8;      // N, state size per head
  bool mtp = true;          // one MTP depth predicting token t+2
  // Megatron's --mtp-loss-scaling-factor default is 0.1 (arguments.py); we use it as is.
  double mtp_loss_weight = 0.1;
  double rope_theta = 10000.0;  // Llama / Megatron --rotary-base default
  double norm_eps = 1e-5;       // Megatron --norm-epsilon default
  double init_std = 0.02;       // Megatron --init-method-std default
  attn::CpAlgo attn_algo = attn::CpAlgo::ring;
  uint64_t seed = 1;            // parameter initialisation

  int q_width() const { return heads * head_dim; }
  int kv_width() const { return kv_heads * head_dim; }
  int mamba_inner() const { return mamba_heads * mamba_head_dim; }
};

// Throws InputError naming the bad field (sizes >= 1, heads % kv_heads, even head_dim for RoPE,
// at least one block, positive weights).
void validate(const ModelConfig& c);

}  // namespace dcp::model
