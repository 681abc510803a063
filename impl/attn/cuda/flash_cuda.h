// Host entries to the CUDA tensor-core varlen attention forward and backward with the emulator's contract
// (flash_emu.h: 16-bit tensors as bit patterns, queries laid out by bq, keys by bk, head_dim 64
// or 128): host tensors in, device copies, kernel, host tensors out. Only built with CUDA;
// throws dcp::Error on any CUDA error, InputError on bad shapes.
#pragma once

#include <cstdint>
#include <span>

#include "attn/attn_shape.h"
#include "attn/bf16_rule.h"
#include "attn/flash/flash_common.h"
#include "attn/thd.h"

namespace dcp::attn {

// tiles_m: the forward's m16 tiles per warp (flash_common.h; 1 = the variant benchmarked beside it).
void flash_fwd_cuda(Half half, const ThdBatch& bq, const ThdBatch& bk, const AttnShape& s,
                    std::span<const uint16_t> q, std::span<const uint16_t> k, std::span<const uint16_t> v,
                    std::span<uint16_t> out, std::span<float> lse, int tiles_m = flash::kFwdTilesM);

// The backward with flash_bwd_emulated's contract (flash_emu.h).
void flash_bwd_cuda(Half half, const ThdBatch& bq, const ThdBatch& bk, const AttnShape& s,
                    std::span<const uint16_t> q, std::span<const uint16_t> k, std::span<const uint16_t> v,
                    std::span<const uint16_t> out, std::span<const float> lse, std::span<const uint16_t> dout,
                    std::span<uint16_t> dq, std::span<uint16_t> dk, std::span<uint16_t> dv);

}  // namespace dcp::attn
