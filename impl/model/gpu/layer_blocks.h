// The model's element-wise and row-wise layer kernels for a GPU backend in 16-bit storage with
// fp32 math (issue 10): RMSNorm forward and backward, SwiGLU forward and backward, THD RoPE. One
// source for the CUDA kernels (model/cuda/layer_kernels.cu) and the host (model/gpu_layers.h: the
// RMSNorm CTAs through the CTA emulator, attn/cta_emu.h; the element-wise ones as plain loops),
// with the formulas of the CPU kernels (model/cpu_kernels.cpp), which are the reference the tests
// compare against in float64.
//   RMSNorm: one warp per row (kWarps rows per CTA), sums by warp shuffles in fp32;
//     fwd: r = 1 / sqrt(mean x^2 + eps) (stored fp32), y = x r g;
//     bwd: dx = r g dy - r^3 x / d * sum(g dy x); dg += dy r x (fp32 atomics: rows of all CTAs add
//     into the same dg).
//   SwiGLU (gate_up [n, 2f], gate first): out = silu(gate) up; the backward as the CPU kernel.
//   RoPE (GPT-NeoX / Megatron non-interleaved halves, in place on [n, heads, head_dim]): angle
//     pos theta^(-2i/head_dim) in double, its cos and sin rounded to float (as the CPU kernel).
//   add (residuals) element-wise; cross-entropy one warp per row (max, sum of exp, loss and
//     dlogits in one kernel, as the CPU kernel's fused loss).
#pragma once

#include <cmath>
#include <cstdint>

#include "attn/flash/flash_common.h"

namespace dcp::model::gpu {

using attn::flash::kThreads;
using attn::flash::kWarps;

struct RmsNormFwdArgs {
  const uint16_t* x;  // [n, d]
  const uint16_t* g;  // [d]
  uint16_t* y;        // [n, d]
  float* rstd;        // [n]
  int64_t n;
  int d;
  float eps;
};

struct RmsNormBwdArgs {
  const uint16_t* x;
  const uint16_t* g;
  const float* rstd;
  const uint16_t* dy;
  uint16_t* dx;
  float* dg;  // [d], accumulated (+=)
  int64_t n;
  int d;
};

// CTAs of a row-wise kernel over n rows.
DCP_HD constexpr int64_t row_blocks(int64_t n) { return (n + kWarps - 1) / kWarps; }

template <class Ctx>
DCP_HD float warp_sum(Ctx& c, float v) {
  for (int off = 16; off > 0; off /= 2) v += c.shfl_xor(v, off);
  return v;
}

template <class Ctx, class E>
DCP_HD void rmsnorm_fwd_block(Ctx& c, const RmsNormFwdArgs& a, int64_t block) {
  const int warp = c.tid() / 32, lane = c.tid() % 32;
  const int64_t row = block * kWarps + warp;
  if (row >= a.n) return;  // uniform over the warp
  const uint16_t* x = a.x + row * a.d;
  float ss = 0.f;
  for (int j = lane; j < a.d; j += 32) {
    const float v = E::to_float(x[j]);
    ss += v * v;
  }
  ss = warp_sum(c, ss);
  const float r = 1.f / std::sqrt(ss / static_cast<float>(a.d) + a.eps);
  if (lane == 0) a.rstd[row] = r;
  for (int j = lane; j < a.d; j += 32) a.y[row * a.d + j] = E::from_float(E::to_float(x[j]) * r * E::to_float(a.g[j]));
}

template <class Ctx, class E>
DCP_HD void rmsnorm_bwd_block(Ctx& c, const RmsNormBwdArgs& a, int64_t block) {
  const int warp = c.tid() / 32, lane = c.tid() % 32;
  const int64_t row = block * kWarps + warp;
  if (row >= a.n) return;
  const uint16_t* x = a.x + row * a.d;
  const uint16_t* dy = a.dy + row * a.d;
  const float r = a.rstd[row];
  float dot = 0.f;
  for (int j = lane; j < a.d; j += 32) dot += E::to_float(a.g[j]) * E::to_float(dy[j]) * E::to_float(x[j]);
  dot = warp_sum(c, dot);
  const float k = r * r * r * dot / static_cast<float>(a.d);
  for (int j = lane; j < a.d; j += 32) {
    const float xv = E::to_float(x[j]), dyv = E::to_float(dy[j]);
    a.dx[row * a.d + j] = E::from_float(r * E::to_float(a.g[j]) * dyv - k * xv);
    c.atomic_add(a.dg + j, dyv * r * xv);
  }
}

struct SwigluArgs {
  const uint16_t* gate_up;  // [n, 2f]
  const uint16_t* dout;     // [n, f] (backward)
  uint16_t* out;            // [n, f] (forward)
  uint16_t* dgate_up;       // [n, 2f] (backward)
  int64_t n;
  int f;
};

// Element i of [n, f].
template <class E>
DCP_HD void swiglu_fwd_elem(const SwigluArgs& a, int64_t i) {
  if (i >= a.n * a.f) return;
  const int64_t row = i / a.f, j = i % a.f;
  const float gt = E::to_float(a.gate_up[row * 2 * a.f + j]), up = E::to_float(a.gate_up[row * 2 * a.f + a.f + j]);
  a.out[i] = E::from_float(gt / (1.f + std::exp(-gt)) * up);
}

template <class E>
DCP_HD void swiglu_bwd_elem(const SwigluArgs& a, int64_t i) {
  if (i >= a.n * a.f) return;
  const int64_t row = i / a.f, j = i % a.f;
  const float gt = E::to_float(a.gate_up[row * 2 * a.f + j]), up = E::to_float(a.gate_up[row * 2 * a.f + a.f + j]);
  const float sg = 1.f / (1.f + std::exp(-gt)), d = E::to_float(a.dout[i]);
  a.dgate_up[row * 2 * a.f + j] = E::from_float(d * up * sg * (1.f + gt * (1.f - sg)));
  a.dgate_up[row * 2 * a.f + a.f + j] = E::from_float(d * gt * sg);
}

struct RopeArgs {
  uint16_t* x;           // [n, heads, head_dim], rotated in place
  const int32_t* pos;    // [n]
  int64_t n;
  int heads;
  int head_dim;
  double theta;
  bool inverse;          // rotate by the negative angle (the backward)
};

// Element i of [n, heads, head_dim / 2]: the pair (i, i + head_dim / 2) of one head.
template <class E>
DCP_HD void rope_elem(const RopeArgs& a, int64_t i) {
  const int half = a.head_dim / 2;
  if (i >= a.n * a.heads * half) return;
  const int64_t t = i / (static_cast<int64_t>(a.heads) * half);
  const int h = static_cast<int>(i / half % a.heads), k = static_cast<int>(i % half);
  const double ang = static_cast<double>(a.pos[t]) * std::pow(a.theta, -2.0 * k / a.head_dim);
  const float cs = static_cast<float>(std::cos(ang));
  const float sn = static_cast<float>(a.inverse ? -std::sin(ang) : std::sin(ang));
  uint16_t* xh = a.x + (t * a.heads + h) * a.head_dim;
  const float u = E::to_float(xh[k]), w = E::to_float(xh[k + half]);
  xh[k] = E::from_float(u * cs - w * sn);
  xh[k + half] = E::from_float(u * sn + w * cs);
}

struct AddArgs {
  const uint16_t* a;
  const uint16_t* b;
  uint16_t* y;  // y = a + b (may alias a)
  int64_t n;
};

template <class E>
DCP_HD void add_elem(const AddArgs& a, int64_t i) {
  if (i < a.n) a.y[i] = E::from_float(E::to_float(a.a[i]) + E::to_float(a.b[i]));
}

// Cross-entropy of rows of logits [n, vocab] (16-bit) against labels, one warp per row, as the CPU
// kernel: rows with mask 0 get dlogits 0 and no loss; loss_rows[row] = lse - logit[label] (fp32,
// 0 for masked rows; the caller sums); dlogits = scale (softmax - onehot(label)).
struct CrossEntropyArgs {
  const uint16_t* logits;
  const int32_t* labels;
  const uint8_t* mask;
  float scale;
  uint16_t* dlogits;
  float* loss_rows;  // [n]
  int64_t n;
  int vocab;
};

template <class Ctx>
DCP_HD float warp_max(Ctx& c, float v) {
  for (int off = 16; off > 0; off /= 2) {
    const float o = c.shfl_xor(v, off);
    v = o > v ? o : v;
  }
  return v;
}

template <class Ctx, class E>
DCP_HD void cross_entropy_block(Ctx& c, const CrossEntropyArgs& a, int64_t block) {
  const int warp = c.tid() / 32, lane = c.tid() % 32;
  const int64_t row = block * kWarps + warp;
  if (row >= a.n) return;  // uniform over the warp
  const uint16_t* l = a.logits + row * a.vocab;
  uint16_t* d = a.dlogits + row * a.vocab;
  if (!a.mask[row]) {
    for (int v = lane; v < a.vocab; v += 32) d[v] = 0;
    if (lane == 0) a.loss_rows[row] = 0.f;
    return;
  }
  float m = -INFINITY;
  for (int v = lane; v < a.vocab; v += 32) {
    const float x = E::to_float(l[v]);
    m = x > m ? x : m;
  }
  m = warp_max(c, m);
  float sum = 0.f;
  for (int v = lane; v < a.vocab; v += 32) sum += std::exp(E::to_float(l[v]) - m);
  sum = warp_sum(c, sum);
  const int label = a.labels[row];
  const float k = a.scale / sum;
  for (int v = lane; v < a.vocab; v += 32)
    d[v] = E::from_float(std::exp(E::to_float(l[v]) - m) * k - (v == label ? a.scale : 0.f));
  if (lane == 0) a.loss_rows[row] = m + std::log(sum) - E::to_float(l[label]);
}

}  // namespace dcp::model::gpu
