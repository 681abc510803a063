// CUDA varlen attention forward over packed THD sequences (float32 in, fp32 accumulation).
// One warp per (query row, head): lanes split the head dimension, the score is a warp-shuffle
// reduction, and the softmax is online (running max m and sum l, FlashAttention's rescaling:
// l <- l*exp(m_old - m_new) + exp(s - m_new)). Same mask as attn_ref.cpp: keys of the same
// sequence at positions <= i (causal) or < len, never padding; padding rows get out = 0 and
// lse = -inf. This is the straightforward kernel, checked against the float64 reference
// (tests/test_attn_cuda.cpp); not tuned.
#include "attn/cuda/attn_fwd_params.h"

#include <math_constants.h>

namespace dcp::attn::cuda {

namespace {

constexpr int kWarp = 32;
constexpr int kWarpsPerBlock = 4;

__device__ float warp_sum(float x) {
  for (int off = kWarp / 2; off > 0; off /= 2) x += __shfl_xor_sync(0xffffffffu, x, off);
  return x;
}

// Sequence that contains packed row `row`: the last j in [0, batch) with pad[j] <= row
// (empty sequences share their boundary with the next one and are skipped that way).
__device__ int seq_of_row(const int32_t* pad, int batch, int64_t row) {
  int lo = 0, hi = batch - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (pad[mid] <= row) lo = mid; else hi = mid - 1;
  }
  return lo;
}

template <int kPerLane>  // ceil(head_dim / 32)
__global__ void attn_fwd_varlen_kernel(AttnFwdParams p) {
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (warp >= p.total_tokens * p.heads) return;
  const int64_t row = warp / p.heads;
  const int h = static_cast<int>(warp % p.heads);
  const int d = p.head_dim;
  const int j = seq_of_row(p.cu_seqlens_padded, p.batch, row);
  const int64_t start = p.cu_seqlens_padded[j];
  const int len = p.cu_seqlens[j + 1] - p.cu_seqlens[j];
  const int i = static_cast<int>(row - start);
  float* out = p.out + (row * p.heads + h) * d;
  if (i >= len) {  // padding row
    for (int e = lane; e < d; e += kWarp) out[e] = 0.f;
    if (lane == 0) p.lse[row * p.heads + h] = -CUDART_INF_F;
    return;
  }
  const int g = h / (p.heads / p.kv_heads);
  const int nk = p.causal ? i + 1 : len;
  float qr[kPerLane], acc[kPerLane];
  const float* q = p.q + (row * p.heads + h) * d;
#pragma unroll
  for (int x = 0; x < kPerLane; ++x) {
    const int e = lane + x * kWarp;
    qr[x] = e < d ? q[e] : 0.f;
    acc[x] = 0.f;
  }
  float m = -CUDART_INF_F, l = 0.f;
  for (int key = 0; key < nk; ++key) {
    const int64_t krow = ((start + key) * p.kv_heads + g) * d;
    float part = 0.f;
#pragma unroll
    for (int x = 0; x < kPerLane; ++x) {
      const int e = lane + x * kWarp;
      if (e < d) part += qr[x] * p.k[krow + e];
    }
    const float s = warp_sum(part) * p.scale;
    const float m_new = fmaxf(m, s);
    const float corr = expf(m - m_new);  // exp(-inf) = 0 on the first key
    const float pe = expf(s - m_new);
    l = l * corr + pe;
#pragma unroll
    for (int x = 0; x < kPerLane; ++x) {
      const int e = lane + x * kWarp;
      if (e < d) acc[x] = acc[x] * corr + pe * p.v[krow + e];
    }
    m = m_new;
  }
#pragma unroll
  for (int x = 0; x < kPerLane; ++x) {
    const int e = lane + x * kWarp;
    if (e < d) out[e] = acc[x] / l;
  }
  if (lane == 0) p.lse[row * p.heads + h] = m + logf(l);
}

template <int kPerLane>
cudaError_t launch(const AttnFwdParams& p, cudaStream_t stream) {
  const int64_t warps = p.total_tokens * p.heads;
  if (warps == 0) return cudaSuccess;
  const int64_t blocks = (warps + kWarpsPerBlock - 1) / kWarpsPerBlock;
  attn_fwd_varlen_kernel<kPerLane>
      <<<static_cast<unsigned>(blocks), kWarpsPerBlock * kWarp, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace

cudaError_t attn_fwd_varlen(const AttnFwdParams& p, cudaStream_t stream) {
  if (p.head_dim <= 32) return launch<1>(p, stream);
  if (p.head_dim <= 64) return launch<2>(p, stream);
  if (p.head_dim <= 128) return launch<4>(p, stream);
  if (p.head_dim <= 256) return launch<8>(p, stream);
  return cudaErrorInvalidValue;
}

}  // namespace dcp::attn::cuda
