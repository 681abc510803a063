// The model's GPU layer kernels (gpu/layer_blocks.h) on the host: the same bodies the CUDA
// kernels run (model/cuda/layer_cuda.h), RMSNorm's warps through the CTA emulator
// (attn/cta_emu.h), the element-wise kernels as loops over their index. 16-bit tensors as bit
// patterns (attn::Half: bf16 or fp16); rstd and dg in fp32. For the CPU tests of the kernels
// against the float64 CPU kernels (model/cpu_kernels.cpp).
#pragma once

#include <cstdint>
#include <span>

#include "attn/bf16_rule.h"

namespace dcp::model {

void rmsnorm_fwd_emulated(attn::Half h, std::span<const uint16_t> x, std::span<const uint16_t> g,
                          std::span<uint16_t> y, std::span<float> rstd, int64_t n, int d, double eps);
// dg accumulates (+=).
void rmsnorm_bwd_emulated(attn::Half h, std::span<const uint16_t> x, std::span<const uint16_t> g,
                          std::span<const float> rstd, std::span<const uint16_t> dy, std::span<uint16_t> dx,
                          std::span<float> dg, int64_t n, int d);
void swiglu_fwd_emulated(attn::Half h, std::span<const uint16_t> gate_up, std::span<uint16_t> out, int64_t n, int f);
void swiglu_bwd_emulated(attn::Half h, std::span<const uint16_t> gate_up, std::span<const uint16_t> dout,
                         std::span<uint16_t> dgate_up, int64_t n, int f);
void rope_emulated(attn::Half h, std::span<uint16_t> x, std::span<const int32_t> pos, int64_t n, int heads,
                   int head_dim, double theta, bool inverse);

void add_emulated(attn::Half h, std::span<const uint16_t> a, std::span<const uint16_t> b, std::span<uint16_t> y);
// Returns the sum of the rows' losses (labels must lie in [0, vocab) on rows with mask 1).
double cross_entropy_emulated(attn::Half h, std::span<const uint16_t> logits, std::span<const int32_t> labels,
                              std::span<const uint8_t> mask, double scale, std::span<uint16_t> dlogits, int64_t n,
                              int vocab);

}  // namespace dcp::model
