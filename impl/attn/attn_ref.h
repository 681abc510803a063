// Float64 reference attention over packed THD sequences: the spec every other attention path
// (CP ring, CP all-gather, CUDA kernels) is checked against. Plain loops, no tricks.
// Shapes and mask: attn_shape.h. Batch layout: thd.h.
#pragma once

#include <span>

#include "attn/attn_shape.h"
#include "attn/thd.h"

namespace dcp::attn {

// q: [T, heads, d]; k, v: [T, kv_heads, d]; out: [T, heads, d]; lse: [T, heads]
// with T = b.total_tokens().
void attn_fwd_ref(const ThdBatch& b, const AttnShape& s, std::span<const double> q,
                  std::span<const double> k, std::span<const double> v, std::span<double> out,
                  std::span<double> lse);

// Gradients of sum(dout * out) given the forward's out and lse.
// out, dout, dq: [T, heads, d]; lse: [T, heads]; dk, dv: [T, kv_heads, d] (overwritten).
void attn_bwd_ref(const ThdBatch& b, const AttnShape& s, std::span<const double> q,
                  std::span<const double> k, std::span<const double> v,
                  std::span<const double> out, std::span<const double> lse,
                  std::span<const double> dout, std::span<double> dq, std::span<double> dk,
                  std::span<double> dv);

// Throws unless every tensor has the size the shapes above require for `tokens` rows.
void check_sizes(const AttnShape& s, int64_t tokens, size_t q, size_t k, size_t v, size_t out,
                 size_t lse);

// A forward's preamble (shared by the reference and other host forwards): validates the shape,
// the layout and the sizes, then sets out = 0 and lse = -inf (what padding rows keep).
void begin_fwd(const ThdBatch& b, const AttnShape& s, std::span<const double> q, std::span<const double> k,
               std::span<const double> v, std::span<double> out, std::span<double> lse);
// A backward's preamble: validates the shape, the layout and the sizes of the inputs and of the
// gradients, then sets dq, dk, dv = 0 (they are accumulated).
void begin_bwd(const ThdBatch& b, const AttnShape& s, std::span<const double> q, std::span<const double> k,
               std::span<const double> v, std::span<const double> dout, std::span<double> dq, std::span<double> dk,
               std::span<double> dv);

}  // namespace dcp::attn
