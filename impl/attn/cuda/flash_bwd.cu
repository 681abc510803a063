// CUDA tensor-core varlen attention backward: the three passes of flash/flash_bwd_block.h (the
// same source the host emulator runs) as kernels: delta = <dO, O> per row, the main pass per
// (key block, kv head, sequence) with dQ accumulated by fp32 atomics, and dq_accum -> dq.
#include "attn/cuda/flash_device.cuh"
#include "attn/cuda/flash_launch.h"
#include "attn/flash/flash_bwd_block.h"

namespace dcp::attn::flash {

namespace {

constexpr int kEltThreads = 256;

template <class E, int D>
__global__ void flash_bwd_prep_kernel(BwdParams p) {
  flash_bwd_prep<E, D>(p, static_cast<int64_t>(blockIdx.x) * kEltThreads + threadIdx.x);
}

template <class E>
__global__ void flash_bwd_dq_kernel(BwdParams p) {
  flash_bwd_dq<E>(p, static_cast<int64_t>(blockIdx.x) * kEltThreads + threadIdx.x);
}

template <class E, int D>
__global__ void __launch_bounds__(kThreads) flash_bwd_kernel(BwdParams p) {
  extern __shared__ uint4 smem_raw[];  // 16-byte aligned
  DeviceCtx c;
  flash_bwd_block<DeviceCtx, E, D>(c, p, static_cast<int>(blockIdx.x), static_cast<int>(blockIdx.y),
                                   static_cast<int>(blockIdx.z), reinterpret_cast<uint16_t*>(smem_raw));
}

unsigned elt_blocks(int64_t n) { return static_cast<unsigned>((n + kEltThreads - 1) / kEltThreads); }

template <class E, int D>
cudaError_t launch(const BwdParams& p, int n_blocks, cudaStream_t stream) {
  const int64_t pairs = p.rows_q * p.heads;
  cudaError_t e = cudaMemsetAsync(p.dq_accum, 0, static_cast<size_t>(pairs) * D * sizeof(float), stream);
  if (e != cudaSuccess) return e;
  if (pairs > 0) {
    flash_bwd_prep_kernel<E, D><<<elt_blocks(pairs), kEltThreads, 0, stream>>>(p);
    if ((e = cudaGetLastError()) != cudaSuccess) return e;
  }
  if (n_blocks > 0) {
    const size_t smem = static_cast<size_t>(bwd_smem_elems(D)) * sizeof(uint16_t);
    // Once per kernel (and process: one GPU per process), not inside every timed launch.
    static const cudaError_t attr = cudaFuncSetAttribute(flash_bwd_kernel<E, D>,
                                                         cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    if (attr != cudaSuccess) return attr;
    const dim3 grid(static_cast<unsigned>(n_blocks), static_cast<unsigned>(p.kv_heads), static_cast<unsigned>(p.batch));
    flash_bwd_kernel<E, D><<<grid, kThreads, smem, stream>>>(p);
    if ((e = cudaGetLastError()) != cudaSuccess) return e;
  }
  if (pairs > 0) {
    flash_bwd_dq_kernel<E><<<elt_blocks(pairs * D), kEltThreads, 0, stream>>>(p);
    if ((e = cudaGetLastError()) != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace

cudaError_t flash_bwd(const BwdParams& p, bool bf16, int n_blocks, cudaStream_t stream) {
  if (p.batch <= 0) return cudaSuccess;
  if (p.batch > 65535 || p.kv_heads > 65535) return cudaErrorInvalidValue;  // grid y, z limits
  if (p.head_dim == 64) return bf16 ? launch<Bf16, 64>(p, n_blocks, stream) : launch<Fp16, 64>(p, n_blocks, stream);
  if (p.head_dim == 128) return bf16 ? launch<Bf16, 128>(p, n_blocks, stream) : launch<Fp16, 128>(p, n_blocks, stream);
  return cudaErrorInvalidValue;
}

}  // namespace dcp::attn::flash
