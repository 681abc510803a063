// The tensor-core attention kernels (flash/flash_fwd_block.h) run on the host: every CTA's 128
// threads are cooperative fibers (cta_emu.h, cta_fiber.h), __syncthreads a barrier of the block, a warp shuffle and the warp's
// mma.sync m16n8k16 collectives over the warp's 32 threads (the MMA computed from the fragment
// layout of the PTX ISA, flash/flash_common.h, in double and rounded to float). Same source as
// the CUDA kernel, so the CPU tests (test_flash_emu.cpp) check its tiling, masking, fragment
// indexing, online softmax and padding against the float64 reference without a GPU. Slow (about
// a thousand barriers per key block): for test-sized problems only.
//
// Tensors are 16-bit bit patterns (Half::bf16 or Half::fp16, flash/flash_common.h), laid out as
// flash/flash_params.h says; q/out/lse by `bq`, k/v by `bk` (the same sequence count; bq = bk for
// the square problem). head_dim 64 or 128.
#pragma once

#include <cstdint>
#include <span>

#include "attn/attn_shape.h"
#include "attn/bf16_rule.h"
#include "attn/flash/flash_bwd_block.h"
#include "attn/flash/flash_params.h"
#include "attn/thd.h"

namespace dcp::attn {

// tiles_m: m16 tiles per warp of the forward's CTA (flash_common.h: kFwdTilesM = 2 is the
// kernel's; 1 is the variant bench_attn_cuda times beside it).
void flash_fwd_emulated(Half half, const ThdBatch& bq, const ThdBatch& bk, const AttnShape& s,
                        std::span<const uint16_t> q, std::span<const uint16_t> k,
                        std::span<const uint16_t> v, std::span<uint16_t> out, std::span<float> lse,
                        int tiles_m = flash::kFwdTilesM);

// The backward (flash/flash_bwd_block.h): dq, dk, dv of sum(dout * out) given the forward's out
// (16-bit) and lse (fp32, natural log), all in the layouts above. Padding rows get 0.
void flash_bwd_emulated(Half half, const ThdBatch& bq, const ThdBatch& bk, const AttnShape& s,
                        std::span<const uint16_t> q, std::span<const uint16_t> k, std::span<const uint16_t> v,
                        std::span<const uint16_t> out, std::span<const float> lse, std::span<const uint16_t> dout,
                        std::span<uint16_t> dq, std::span<uint16_t> dk, std::span<uint16_t> dv);

// Shared by the emulator and the CUDA launcher (cuda/flash_cuda.cpp): checks the shape (head_dim
// 64 or 128), the layouts, the sequence counts and the tensor sizes (InputError / Error), and
// returns the kernel parameters with null pointers (bind_fwd / bind_bwd point them at the
// caller's memory).
flash::FwdParams flash_fwd_params(const ThdBatch& bq, const ThdBatch& bk, const AttnShape& s, size_t q,
                                  size_t k, size_t v, size_t out, size_t lse);

// The same for the backward (sizes of q, k, v, out, lse, dout, dq, dk, dv checked); the
// workspace pointers (delta, dq_accum) are null as well.
flash::BwdParams flash_bwd_params(const ThdBatch& bq, const ThdBatch& bk, const AttnShape& s, size_t q, size_t k,
                                  size_t v, size_t out, size_t lse, size_t dout, size_t dq, size_t dk, size_t dv);

// Points a kernel's parameters at tensors and at the THD arrays of its two batches (host memory
// for the emulator, device memory for the kernels): the one place that wires them.
struct FlashBatchArrays {
  const int32_t* cu_seqlens_q;
  const int32_t* cu_seqlens_k;
  const int32_t* seqstart_q;
  const int32_t* seqstart_k;
};
void bind_fwd(flash::FwdParams& p, const FlashBatchArrays& a, const uint16_t* q, const uint16_t* k, const uint16_t* v,
              uint16_t* out, float* lse);
void bind_bwd(flash::BwdParams& p, const FlashBatchArrays& a, const uint16_t* q, const uint16_t* k, const uint16_t* v,
              const uint16_t* out, const float* lse, const uint16_t* dout, float* delta, float* dq_accum, uint16_t* dq,
              uint16_t* dk, uint16_t* dv);

// Key blocks of the backward's grid: the most kBlockN-row blocks any sequence's padded key
// extent needs.
int flash_bwd_n_blocks(const ThdBatch& bk);

// The forward's grid for tiles_m m16 tiles per warp: as many (16 * tiles_m * kWarps)-row query
// blocks (kFwdBlockM by default) as any sequence's padded extent needs.
flash::FwdGrid flash_fwd_grid(const ThdBatch& bq, int tiles_m = flash::kFwdTilesM);

}  // namespace dcp::attn
