// The model's GPU layer kernels on the device (layer_kernels.cu) with gpu_layers.h's contract:
// host tensors in, device copies, the kernel, host tensors out (outputs poisoned first). Only
// built with CUDA; throws dcp::Error on any CUDA error.
#pragma once

#include <cstdint>
#include <span>

#include "attn/bf16_rule.h"

namespace dcp::model {

void rmsnorm_fwd_cuda(attn::Half h, std::span<const uint16_t> x, std::span<const uint16_t> g, std::span<uint16_t> y,
                      std::span<float> rstd, int64_t n, int d, double eps);
void rmsnorm_bwd_cuda(attn::Half h, std::span<const uint16_t> x, std::span<const uint16_t> g,
                      std::span<const float> rstd, std::span<const uint16_t> dy, std::span<uint16_t> dx,
                      std::span<float> dg, int64_t n, int d);
void swiglu_fwd_cuda(attn::Half h, std::span<const uint16_t> gate_up, std::span<uint16_t> out, int64_t n, int f);
void swiglu_bwd_cuda(attn::Half h, std::span<const uint16_t> gate_up, std::span<const uint16_t> dout,
                     std::span<uint16_t> dgate_up, int64_t n, int f);
void rope_cuda(attn::Half h, std::span<uint16_t> x, std::span<const int32_t> pos, int64_t n, int heads, int head_dim,
               double theta, bool inverse);

void add_cuda(attn::Half h, std::span<const uint16_t> a, std::span<const uint16_t> b, std::span<uint16_t> y);
double cross_entropy_cuda(attn::Half h, std::span<const uint16_t> logits, std::span<const int32_t> labels,
                          std::span<const uint8_t> mask, double scale, std::span<uint16_t> dlogits, int64_t n, int vocab);

}  // namespace dcp::model
