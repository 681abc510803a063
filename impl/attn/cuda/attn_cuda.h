// Host entry to the CUDA varlen attention forward (attn_fwd.cu), with the same contract as
// attn_fwd_ref (attn_ref.h) in float32: host tensors in, host tensors out; the device copies are
// made here. Shapes: q, out [T, heads, d]; k, v [T, kv_heads, d]; lse [T, heads]; d <= 256.
// Only built with CUDA (DCP_HAVE_CUDA); throws dcp::Error on any CUDA error.
#pragma once

#include <span>

#include "attn/attn_shape.h"
#include "attn/thd.h"

namespace dcp::attn {

void attn_fwd_cuda(const ThdBatch& b, const AttnShape& s, std::span<const float> q,
                   std::span<const float> k, std::span<const float> v, std::span<float> out,
                   std::span<float> lse);

}  // namespace dcp::attn
