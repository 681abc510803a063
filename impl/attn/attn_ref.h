// Float64 reference attention over packed THD sequences: the spec every other attention path
// (CP ring, CP all-gather, CUDA kernels) is checked against. Plain loops; their dot products
// over keys and their axpys run through attn/host_loops.h, which computes each element's sum in the textbook
// order (on finite inputs bit for bit the textbook loops' result, tests/test_host_loops.cpp),
// only with independent sums side by side.
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

// Rectangular forms: the query-side tensors (q, out, lse, dout, dq) laid out by `bq`, the key
// side (k, v, dk, dv) by `bk`, with the same number of sequences; mask keys_attended(s, i, len_q,
// len_k) (attn_shape.h). The square forms above are these with bq = bk. The ring's steps over
// halves (all of Q x the front half of KV, the back half of Q x all of KV) are such problems.
void attn_fwd_ref(const ThdBatch& bq, const ThdBatch& bk, const AttnShape& s, std::span<const double> q,
                  std::span<const double> k, std::span<const double> v, std::span<double> out,
                  std::span<double> lse);
void attn_bwd_ref(const ThdBatch& bq, const ThdBatch& bk, const AttnShape& s, std::span<const double> q,
                  std::span<const double> k, std::span<const double> v, std::span<const double> out,
                  std::span<const double> lse, std::span<const double> dout, std::span<double> dq,
                  std::span<double> dk, std::span<double> dv);

// Throws unless every tensor has the size the shapes above require: `tokens` rows on both sides,
// or q_tokens query rows (q, out, lse) and k_tokens key rows (k, v).
void check_sizes(const AttnShape& s, int64_t tokens, size_t q, size_t k, size_t v, size_t out,
                 size_t lse);
void check_sizes(const AttnShape& s, int64_t q_tokens, int64_t k_tokens, size_t q, size_t k, size_t v,
                 size_t out, size_t lse);

// A forward's preamble (shared by the reference and other host forwards): validates the shape,
// the layout(s), the same sequence count on both sides and the sizes, then sets out = 0 and
// lse = -inf (what padding rows keep).
void begin_fwd(const ThdBatch& b, const AttnShape& s, std::span<const double> q, std::span<const double> k,
               std::span<const double> v, std::span<double> out, std::span<double> lse);
void begin_fwd(const ThdBatch& bq, const ThdBatch& bk, const AttnShape& s, std::span<const double> q,
               std::span<const double> k, std::span<const double> v, std::span<double> out,
               std::span<double> lse);
// A backward's preamble: validates as begin_fwd, and the sizes of the gradients, then sets dq,
// dk, dv = 0 (they are accumulated).
void begin_bwd(const ThdBatch& b, const AttnShape& s, std::span<const double> q, std::span<const double> k,
               std::span<const double> v, std::span<const double> dout, std::span<double> dq, std::span<double> dk,
               std::span<double> dv);
void begin_bwd(const ThdBatch& bq, const ThdBatch& bk, const AttnShape& s, std::span<const double> q,
               std::span<const double> k, std::span<const double> v, std::span<const double> dout,
               std::span<double> dq, std::span<double> dk, std::span<double> dv);

}  // namespace dcp::attn
