// Launchers of the CUDA tensor-core varlen attention forward (flash_fwd.cu) and backward
// (flash_bwd.cu). C++17, CUDA runtime
// types only, so both .cu and host .cpp files include it. `p` holds device pointers
// (flash/flash_params.h); grid = flash_fwd_grid(bq[, tiles_m]) (flash_emu.h). Returns the launch
// status: cudaErrorInvalidValue for a head_dim other than 64 or 128, tiles_m other than 1 or 2
// (m16 tiles per warp, flash_common.h), or more than 65535 sequences or heads (grid limits). Asynchronous on `stream`.
#pragma once

#include <cuda_runtime.h>

#include "attn/flash/flash_bwd_block.h"
#include "attn/flash/flash_params.h"

namespace dcp::attn::flash {

cudaError_t flash_fwd(const FwdParams& p, bool bf16, FwdGrid grid, cudaStream_t stream);

// The backward's three passes on `stream` (flash/flash_bwd_block.h): zeroes p.dq_accum, writes
// p.delta, then dq, dk, dv. n_blocks = flash_bwd_n_blocks(bk) (flash_emu.h).
cudaError_t flash_bwd(const BwdParams& p, bool bf16, int n_blocks, cudaStream_t stream);

}  // namespace dcp::attn::flash
