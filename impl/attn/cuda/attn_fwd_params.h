// Parameters of the CUDA varlen attention forward (one small struct across the host/device
// boundary, as FA3's Flash_fwd_params but kept minimal). C++17 and CUDA-only types, so .cu files
// (compiled as C++17) can include it. All pointers are device memory.
//   q, out : [total_tokens, heads, head_dim] float32, row-major
//   k, v   : [total_tokens, kv_heads, head_dim] float32
//   lse    : [total_tokens, heads] float32 (natural log; -inf on padding rows)
//   cu_seqlens, cu_seqlens_padded : [batch + 1] int32 (impl/attn/thd.h layout)
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace dcp::attn::cuda {

struct AttnFwdParams {
  const float* q;
  const float* k;
  const float* v;
  float* out;
  float* lse;
  const int32_t* cu_seqlens;
  const int32_t* cu_seqlens_padded;
  int batch;
  int64_t total_tokens;
  int heads;
  int kv_heads;
  int head_dim;  // <= 256
  float scale;
  bool causal;
};

// Host launcher of attn_fwd_varlen_kernel on `stream`; returns the launch status
// (cudaErrorInvalidValue for head_dim > 256).
cudaError_t attn_fwd_varlen(const AttnFwdParams& p, cudaStream_t stream);

}  // namespace dcp::attn::cuda
