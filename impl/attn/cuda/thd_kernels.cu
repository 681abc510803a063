// See thd_kernels.h. One thread per element (grid-stride), the row found per thread: the local
// row -> sequence lookup is a binary search over cu_seqlens_padded / cp (as TE's
// thd_partition_src_index does per token). Straightforward kernels: correctness first, memory
// bound by design; checked against the host functions in tests/test_thd_cuda.cpp (on a GPU) and,
// through the host emulator of the same bodies, in tests/test_thd_emu.cpp.
#include "attn/cuda/thd_kernels.h"

#include "attn/flash/flash_common.h"
#include "attn/flash/thd_elems.h"

namespace dcp::attn::cuda {

namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65535 * 8 ? b : 65535 * 8);  // grid-stride covers the rest
}

// The bodies are flash/thd_elems.h's, which the host emulator (attn/thd_emu.h) runs too.
template <typename T, bool kScatter>
__global__ void partition_kernel(const T* src, T* dst, int64_t row_elems, ZigzagLayout z) {
  const int64_t n = flash::partition_elems(z, row_elems);
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    flash::partition_elem<T, kScatter>(src, dst, row_elems, z, i);
}

template <typename T>
__global__ void gather_kernel(const T* src, T* dst, const int64_t* rows, int64_t n_rows, int64_t row_elems) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n_rows * row_elems;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    flash::gather_elem(src, dst, rows, row_elems, i);
}

// One thread per (row, head).
__global__ void lse_merge_kernel(const float* out_step, const float* lse_step, float* out_acc, float* lse_acc,
                                 const int64_t* rows, int64_t n_rows, int heads, int d) {
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; r < n_rows * heads;
       r += static_cast<int64_t>(gridDim.x) * blockDim.x)
    flash::lse_merge_row(out_step, lse_step, out_acc, lse_acc, rows, heads, d, r);
}

__global__ void add_rows_kernel(const float* step, float* acc, const int64_t* rows, int64_t n_rows, int64_t row_elems) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n_rows * row_elems;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    flash::add_rows_elem(step, acc, rows, row_elems, i);
}

template <bool kScatter>
cudaError_t partition(const void* src, void* dst, int elem_bytes, int64_t row_elems, const ZigzagLayout& z,
                      cudaStream_t stream) {
  if (z.cp < 1 || z.rank < 0 || z.rank >= z.cp || z.batch < 0 || row_elems < 0) return cudaErrorInvalidValue;
  const int64_t n = flash::partition_elems(z, row_elems);
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

template <class E>
__global__ void fill_uniform16_kernel(uint16_t* dst, int64_t n, uint64_t seed, float scale) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dst[i] = flash::uniform_elem<E>(seed, i, scale);
}

__global__ void fill_uniform32_kernel(float* dst, int64_t n, uint64_t seed, float scale) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dst[i] = flash::uniform_value(seed, i, scale);
}

__global__ void fill_value_kernel(float* dst, int64_t n, float value) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dst[i] = value;
}

// %globaltimer: the GPU's nanosecond clock (PTX ISA, special registers; sm_30+).
__global__ void busy_wait_kernel(uint64_t ns) {
  uint64_t t0 = 0, t = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  for (int i = 0; i < (1 << 24); ++i) {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (t - t0 >= ns) break;
  }
}

}  // namespace

cudaError_t fill_value(float* dst, int64_t n, float value, cudaStream_t stream) {
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  fill_value_kernel<<<blocks_for(n), kThreads, 0, stream>>>(dst, n, value);
  return cudaGetLastError();
}

cudaError_t busy_wait(int64_t ns, cudaStream_t stream) {
  if (ns <= 0) return cudaSuccess;
  busy_wait_kernel<<<1, 1, 0, stream>>>(static_cast<uint64_t>(ns));
  return cudaGetLastError();
}

cudaError_t fill_uniform(uint16_t* dst, int64_t n, uint64_t seed, float scale, bool bf16, cudaStream_t stream) {
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  if (bf16) fill_uniform16_kernel<flash::Bf16><<<blocks_for(n), kThreads, 0, stream>>>(dst, n, seed, scale);
  else fill_uniform16_kernel<flash::Fp16><<<blocks_for(n), kThreads, 0, stream>>>(dst, n, seed, scale);
  return cudaGetLastError();
}

cudaError_t fill_uniform(float* dst, int64_t n, uint64_t seed, float scale, cudaStream_t stream) {
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  fill_uniform32_kernel<<<blocks_for(n), kThreads, 0, stream>>>(dst, n, seed, scale);
  return cudaGetLastError();
}

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
