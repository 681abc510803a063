// See thd_kernels.h. One thread per element (grid-stride), the row found per thread: the local
// row -> sequence lookup is a binary search over cu_seqlens_padded / cp (as TE's
// thd_partition_src_index does per token). Straightforward kernels: correctness first, memory
// bound by design; checked against the host functions in tests/test_thd_cuda.cpp.
#include "attn/cuda/thd_kernels.h"

#include <math_constants.h>

#include "attn/flash/flash_common.h"

namespace dcp::attn::cuda {

namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65535 * 8 ? b : 65535 * 8);  // grid-stride covers the rest
}

// Global row of local row u on z.rank (thd.h, TE's formula): cs = cu_padded / cp,
// lp = cs[j+1] - cs[j], src = u - cs[j] + cs[j] * cp + (lp / 2) * (front ? rank : 2cp-2-rank).
__device__ int64_t global_row(const ZigzagLayout& z, int64_t u) {
  int lo = 0, hi = z.batch - 1;  // last j with cs[j] <= u (empty sequences are skipped that way)
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (z.cu_seqlens_padded[mid] / z.cp <= u) lo = mid; else hi = mid - 1;
  }
  const int64_t cs = z.cu_seqlens_padded[lo] / z.cp;
  const int64_t lp = z.cu_seqlens_padded[lo + 1] / z.cp - cs;
  const int64_t off = u - cs;
  return off + cs * z.cp + (lp / 2) * (off < lp / 2 ? z.rank : 2 * z.cp - 2 - z.rank);
}

template <typename T, bool kScatter>
__global__ void partition_kernel(const T* src, T* dst, int64_t row_elems, ZigzagLayout z) {
  const int64_t n = z.total_tokens / z.cp * row_elems;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t u = i / row_elems, e = i % row_elems;
    const int64_t g = global_row(z, u) * row_elems + e;
    if (kScatter) dst[g] = src[i]; else dst[i] = src[g];
  }
}

template <typename T>
__global__ void gather_kernel(const T* src, T* dst, const int64_t* rows, int64_t n_rows, int64_t row_elems) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n_rows * row_elems;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dst[i] = src[rows[i / row_elems] * row_elems + i % row_elems];
}

// One thread per (row, head): the same arithmetic as the host lse_merge.
__global__ void lse_merge_kernel(const float* out_step, const float* lse_step, float* out_acc, float* lse_acc,
                                 const int64_t* rows, int64_t n_rows, int heads, int d) {
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; r < n_rows * heads;
       r += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float b = lse_step[r];
    if (b == -CUDART_INF_F) continue;  // the step did not touch this row
    const int64_t acc_row = rows ? rows[r / heads] * heads + r % heads : r;
    const float a = lse_acc[acc_row];
    float* o = out_acc + acc_row * d;
    const float* ob = out_step + r * d;
    if (a == -CUDART_INF_F) {
      lse_acc[acc_row] = b;
      for (int e = 0; e < d; ++e) o[e] = ob[e];
      continue;
    }
    const float hi = fmaxf(a, b), lo = fminf(a, b);
    const float l = hi + log1pf(expf(lo - hi));
    const float wa = expf(a - l), wb = expf(b - l);
    for (int e = 0; e < d; ++e) o[e] = wa * o[e] + wb * ob[e];
    lse_acc[acc_row] = l;
  }
}

__global__ void add_rows_kernel(const float* step, float* acc, const int64_t* rows, int64_t n_rows, int64_t row_elems) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n_rows * row_elems;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t dst = rows ? rows[i / row_elems] * row_elems + i % row_elems : i;
    acc[dst] += step[i];
  }
}

template <bool kScatter>
cudaError_t partition(const void* src, void* dst, int elem_bytes, int64_t row_elems, const ZigzagLayout& z,
                      cudaStream_t stream) {
  if (z.cp < 1 || z.rank < 0 || z.rank >= z.cp || z.batch < 0 || row_elems < 0) return cudaErrorInvalidValue;
  const int64_t n = z.total_tokens / z.cp * row_elems;
  if (n == 0 || z.batch == 0) return cudaSuccess;
  if (elem_bytes == 2)
    partition_kernel<uint16_t, kScatter><<<blocks_for(n), kThreads, 0, stream>>>(
        static_cast<const uint16_t*>(src), static_cast<uint16_t*>(dst), row_elems, z);
  else if (elem_bytes == 4)
    partition_kernel<uint32_t, kScatter><<<blocks_for(n), kThreads, 0, stream>>>(
        static_cast<const uint32_t*>(src), static_cast<uint32_t*>(dst), row_elems, z);
  else
    return cudaErrorInvalidValue;
  return cudaGetLastError();
}

}  // namespace

cudaError_t thd_partition(const void* global, void* local, int elem_bytes, int64_t row_elems,
                          const ZigzagLayout& z, cudaStream_t stream) {
  return partition<false>(global, local, elem_bytes, row_elems, z, stream);
}

cudaError_t thd_unpartition(const void* local, void* global, int elem_bytes, int64_t row_elems,
                            const ZigzagLayout& z, cudaStream_t stream) {
  return partition<true>(local, global, elem_bytes, row_elems, z, stream);
}

cudaError_t thd_gather_rows(const void* src, void* dst, const int64_t* rows, int64_t n_rows,
                            int elem_bytes, int64_t row_elems, cudaStream_t stream) {
  if (n_rows < 0 || row_elems < 0) return cudaErrorInvalidValue;
  const int64_t n = n_rows * row_elems;
  if (n == 0) return cudaSuccess;
  if (elem_bytes == 2)
    gather_kernel<uint16_t><<<blocks_for(n), kThreads, 0, stream>>>(
        static_cast<const uint16_t*>(src), static_cast<uint16_t*>(dst), rows, n_rows, row_elems);
  else if (elem_bytes == 4)
    gather_kernel<uint32_t><<<blocks_for(n), kThreads, 0, stream>>>(
        static_cast<const uint32_t*>(src), static_cast<uint32_t*>(dst), rows, n_rows, row_elems);
  else
    return cudaErrorInvalidValue;
  return cudaGetLastError();
}

cudaError_t thd_lse_merge(const float* out_step, const float* lse_step, float* out_acc, float* lse_acc,
                          const int64_t* rows, int64_t n_rows, int heads, int head_dim, cudaStream_t stream) {
  if (n_rows < 0 || heads < 1 || head_dim < 1) return cudaErrorInvalidValue;
  if (n_rows == 0) return cudaSuccess;
  lse_merge_kernel<<<blocks_for(n_rows * heads), kThreads, 0, stream>>>(out_step, lse_step, out_acc, lse_acc, rows,
                                                                         n_rows, heads, head_dim);
  return cudaGetLastError();
}

cudaError_t thd_add_rows(const float* step, float* acc, const int64_t* rows, int64_t n_rows, int64_t row_elems,
                         cudaStream_t stream) {
  if (n_rows < 0 || row_elems < 0) return cudaErrorInvalidValue;
  if (n_rows * row_elems == 0) return cudaSuccess;
  add_rows_kernel<<<blocks_for(n_rows * row_elems), kThreads, 0, stream>>>(step, acc, rows, n_rows, row_elems);
  return cudaGetLastError();
}

namespace {

template <class E>
__global__ void to_f32_kernel(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dst[i] = E::to_float(src[i]);
}

template <class E>
__global__ void from_f32_kernel(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dst[i] = E::from_float(src[i]);
}

}  // namespace

cudaError_t convert_to_f32(const uint16_t* src, float* dst, int64_t n, bool bf16, cudaStream_t stream) {
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  if (bf16) to_f32_kernel<flash::Bf16><<<blocks_for(n), kThreads, 0, stream>>>(src, dst, n);
  else to_f32_kernel<flash::Fp16><<<blocks_for(n), kThreads, 0, stream>>>(src, dst, n);
  return cudaGetLastError();
}

cudaError_t convert_from_f32(const float* src, uint16_t* dst, int64_t n, bool bf16, cudaStream_t stream) {
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  if (bf16) from_f32_kernel<flash::Bf16><<<blocks_for(n), kThreads, 0, stream>>>(src, dst, n);
  else from_f32_kernel<flash::Fp16><<<blocks_for(n), kThreads, 0, stream>>>(src, dst, n);
  return cudaGetLastError();
}

}  // namespace dcp::attn::cuda
