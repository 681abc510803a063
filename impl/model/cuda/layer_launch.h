// Launchers of the model's GPU layer kernels (layer_kernels.cu, bodies in gpu/layer_blocks.h):
// device pointers in the argument structs, asynchronous on `stream`, the launch status returned
// (cudaSuccess when there is nothing to do). bf16 when `bf16`, else fp16. C++17.
#pragma once

#include <cuda_runtime.h>

#include "model/gpu/layer_blocks.h"

namespace dcp::model::gpu {

cudaError_t rmsnorm_fwd(const RmsNormFwdArgs& a, bool bf16, cudaStream_t stream);
cudaError_t rmsnorm_bwd(const RmsNormBwdArgs& a, bool bf16, cudaStream_t stream);  // dg accumulates
cudaError_t swiglu_fwd(const SwigluArgs& a, bool bf16, cudaStream_t stream);
cudaError_t swiglu_bwd(const SwigluArgs& a, bool bf16, cudaStream_t stream);
cudaError_t rope(const RopeArgs& a, bool bf16, cudaStream_t stream);
cudaError_t add(const AddArgs& a, bool bf16, cudaStream_t stream);
cudaError_t cross_entropy(const CrossEntropyArgs& a, bool bf16, cudaStream_t stream);  // loss per row

}  // namespace dcp::model::gpu
