// CUDA tensor-core varlen attention forward: the CTA body of flash/flash_fwd_block.h (the same
// source the host emulator runs, flash_emu.cpp) with the device's intrinsics: __syncthreads,
// __shfl_xor_sync and mma.sync.aligned.m16n8k16 (bf16 or fp16 inputs, fp32 accumulators; sm_80
// and later, so sm_90a runs it as well). Grid: (query blocks of 16 * tiles_m * kWarps rows, heads,
// sequences), kThreads threads, dynamic shared memory for the Q, K and V tiles.
#include "attn/cuda/flash_device.cuh"
#include "attn/cuda/flash_launch.h"
#include "attn/flash/flash_fwd_block.h"

namespace dcp::attn::flash {

namespace {

template <class E, int D, int MT>
__global__ void __launch_bounds__(kThreads) flash_fwd_kernel(FwdParams p) {
  extern __shared__ uint4 smem_raw[];  // 16-byte aligned
  DeviceCtx c;
  // Query blocks in reverse: CTAs start in blockIdx order (x fastest), so within each (head,
  // sequence) row of the grid the blocks with the most key blocks under a causal mask (the last
  // rows) start first, and the grid's last CTAs are the light first blocks of the last row
  // instead of its heaviest. (Across sequences the order stays by blockIdx.z.)
  const int m_block = static_cast<int>(gridDim.x - 1 - blockIdx.x);
  flash_fwd_block<DeviceCtx, E, D, MT>(c, p, m_block, static_cast<int>(blockIdx.y), static_cast<int>(blockIdx.z),
                                       reinterpret_cast<uint16_t*>(smem_raw));
}

template <class E, int D, int MT>
cudaError_t launch(const FwdParams& p, int m_blocks, cudaStream_t stream) {
  const size_t smem = static_cast<size_t>(fwd_smem_elems(D, MT)) * sizeof(uint16_t);
  // Once per kernel (and process: one GPU per process), not inside every timed launch.
  static const cudaError_t attr = cudaFuncSetAttribute(flash_fwd_kernel<E, D, MT>,
                                                       cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (attr != cudaSuccess) return attr;
  const dim3 grid(static_cast<unsigned>(m_blocks), static_cast<unsigned>(p.heads), static_cast<unsigned>(p.batch));
  flash_fwd_kernel<E, D, MT><<<grid, kThreads, smem, stream>>>(p);
  return cudaGetLastError();
}

template <int MT>
cudaError_t launch_tiles(const FwdParams& p, bool bf16, int m_blocks, cudaStream_t stream) {
  if (p.head_dim == 64) return bf16 ? launch<Bf16, 64, MT>(p, m_blocks, stream) : launch<Fp16, 64, MT>(p, m_blocks, stream);
  if (p.head_dim == 128) return bf16 ? launch<Bf16, 128, MT>(p, m_blocks, stream) : launch<Fp16, 128, MT>(p, m_blocks, stream);
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t flash_fwd(const FwdParams& p, bool bf16, FwdGrid grid, cudaStream_t stream) {
  if (grid.m_blocks <= 0 || p.batch <= 0) return cudaSuccess;
  if (p.batch > 65535 || p.heads > 65535) return cudaErrorInvalidValue;  // grid y, z limits
  if (grid.tiles_m == 2) return launch_tiles<2>(p, bf16, grid.m_blocks, stream);
  if (grid.tiles_m == 1) return launch_tiles<1>(p, bf16, grid.m_blocks, stream);
  return cudaErrorInvalidValue;
}

}  // namespace dcp::attn::flash
