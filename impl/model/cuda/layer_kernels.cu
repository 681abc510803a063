// CUDA kernels of the model's layers over gpu/layer_blocks.h (the bodies the host runs in
// model/gpu_layers.cpp): RMSNorm one warp per row (kThreads per CTA), the element-wise kernels
// one thread per element (grid-stride).
#include "attn/cuda/flash_device.cuh"
#include "model/cuda/layer_launch.h"

namespace dcp::model::gpu {

namespace {

using attn::flash::Bf16;
using attn::flash::DeviceCtx;
using attn::flash::Fp16;

constexpr int kEltThreads = 256;

unsigned elt_blocks(int64_t n) {
  const int64_t b = (n + kEltThreads - 1) / kEltThreads;
  return static_cast<unsigned>(b < 65535 * 16 ? b : 65535 * 16);  // grid-stride covers the rest
}

template <class E>
__global__ void __launch_bounds__(kThreads) rmsnorm_fwd_kernel(RmsNormFwdArgs a) {
  DeviceCtx c;
  for (int64_t b = blockIdx.x; b < row_blocks(a.n); b += gridDim.x) rmsnorm_fwd_block<DeviceCtx, E>(c, a, b);
}

template <class E>
__global__ void __launch_bounds__(kThreads) rmsnorm_bwd_kernel(RmsNormBwdArgs a) {
  DeviceCtx c;
  for (int64_t b = blockIdx.x; b < row_blocks(a.n); b += gridDim.x) rmsnorm_bwd_block<DeviceCtx, E>(c, a, b);
}

template <class E>
__global__ void swiglu_fwd_kernel(SwigluArgs a) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < a.n * a.f;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    swiglu_fwd_elem<E>(a, i);
}

template <class E>
__global__ void swiglu_bwd_kernel(SwigluArgs a) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < a.n * a.f;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    swiglu_bwd_elem<E>(a, i);
}

template <class E>
__global__ void rope_kernel(RopeArgs a) {
  const int64_t n = a.n * a.heads * (a.head_dim / 2);
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    rope_elem<E>(a, i);
}

template <class E>
__global__ void add_kernel(AddArgs a) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < a.n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    add_elem<E>(a, i);
}

template <class E>
__global__ void __launch_bounds__(kThreads) cross_entropy_kernel(CrossEntropyArgs a) {
  DeviceCtx c;
  for (int64_t b = blockIdx.x; b < row_blocks(a.n); b += gridDim.x) cross_entropy_block<DeviceCtx, E>(c, a, b);
}

unsigned row_grid(int64_t n) {
  const int64_t b = row_blocks(n);
  return static_cast<unsigned>(b < 65535 * 16 ? b : 65535 * 16);
}

}  // namespace

cudaError_t rmsnorm_fwd(const RmsNormFwdArgs& a, bool bf16, cudaStream_t stream) {
  if (a.n < 0 || a.d < 1) return cudaErrorInvalidValue;
  if (a.n == 0) return cudaSuccess;
  if (bf16) rmsnorm_fwd_kernel<Bf16><<<row_grid(a.n), kThreads, 0, stream>>>(a);
  else rmsnorm_fwd_kernel<Fp16><<<row_grid(a.n), kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t rmsnorm_bwd(const RmsNormBwdArgs& a, bool bf16, cudaStream_t stream) {
  if (a.n < 0 || a.d < 1) return cudaErrorInvalidValue;
  if (a.n == 0) return cudaSuccess;
  if (bf16) rmsnorm_bwd_kernel<Bf16><<<row_grid(a.n), kThreads, 0, stream>>>(a);
  else rmsnorm_bwd_kernel<Fp16><<<row_grid(a.n), kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t swiglu_fwd(const SwigluArgs& a, bool bf16, cudaStream_t stream) {
  if (a.n < 0 || a.f < 1) return cudaErrorInvalidValue;
  if (a.n == 0) return cudaSuccess;
  if (bf16) swiglu_fwd_kernel<Bf16><<<elt_blocks(a.n * a.f), kEltThreads, 0, stream>>>(a);
  else swiglu_fwd_kernel<Fp16><<<elt_blocks(a.n * a.f), kEltThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t swiglu_bwd(const SwigluArgs& a, bool bf16, cudaStream_t stream) {
  if (a.n < 0 || a.f < 1) return cudaErrorInvalidValue;
  if (a.n == 0) return cudaSuccess;
  if (bf16) swiglu_bwd_kernel<Bf16><<<elt_blocks(a.n * a.f), kEltThreads, 0, stream>>>(a);
  else swiglu_bwd_kernel<Fp16><<<elt_blocks(a.n * a.f), kEltThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t rope(const RopeArgs& a, bool bf16, cudaStream_t stream) {
  if (a.n < 0 || a.heads < 1 || a.head_dim < 2 || a.head_dim % 2) return cudaErrorInvalidValue;
  const int64_t n = a.n * a.heads * (a.head_dim / 2);
  if (n == 0) return cudaSuccess;
  if (bf16) rope_kernel<Bf16><<<elt_blocks(n), kEltThreads, 0, stream>>>(a);
  else rope_kernel<Fp16><<<elt_blocks(n), kEltThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t add(const AddArgs& a, bool bf16, cudaStream_t stream) {
  if (a.n < 0) return cudaErrorInvalidValue;
  if (a.n == 0) return cudaSuccess;
  if (bf16) add_kernel<Bf16><<<elt_blocks(a.n), kEltThreads, 0, stream>>>(a);
  else add_kernel<Fp16><<<elt_blocks(a.n), kEltThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t cross_entropy(const CrossEntropyArgs& a, bool bf16, cudaStream_t stream) {
  if (a.n < 0 || a.vocab < 1) return cudaErrorInvalidValue;
  if (a.n == 0) return cudaSuccess;
  if (bf16) cross_entropy_kernel<Bf16><<<row_grid(a.n), kThreads, 0, stream>>>(a);
  else cross_entropy_kernel<Fp16><<<row_grid(a.n), kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace dcp::model::gpu
