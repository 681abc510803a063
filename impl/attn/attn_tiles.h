// Building blocks shared by the CP variants (cp_ring.cpp, cp_allgather.cpp): attention over
// "tiles" (a block of query rows of one sequence against a block of key rows of the same
// sequence) and the log-sum-exp merge of partial results. Templated on the scalar type
// (float, double), which is also the accumulation type.
//
// Invariant: the mask is decided from the positions of the rows inside their sequence
// (q_pos, k_pos) and the real length, never from row indices, so a tile may hold any subset of
// zigzag chunks and still attends exactly what the reference attends (attn_shape.h).
//
// LSE merge (reference/megatron-dynamic-cp.md §4.2, worked example in docs/cp-ring.md). Two
// partial results over disjoint key sets A and B, each normalized within its set:
//   lse = log(e^lse_A + e^lse_B) = max + log1p(exp(min - max))
//   out = exp(lse_A - lse) * out_A + exp(lse_B - lse) * out_B
// A row whose partial lse is -inf (it attended nothing in that step) contributes nothing.
// Applied step by step this is TE's final correction O = sum_i exp(lse_i - lse) O_i.
#pragma once

#include <cstdint>
#include <span>

#include "attn/attn_shape.h"

namespace dcp::attn {

struct Tile {
  int64_t q_begin, q_end;  // query rows [q_begin, q_end) of the q array
  int64_t k_begin, k_end;  // key rows [k_begin, k_end) of the k/v arrays
  int32_t seqlen;          // real length of the sequence both blocks belong to
};

// Forward over tiles. q: [*, heads, d]; k, v: [*, kv_heads, d]; q_pos/k_pos: positions of the
// q/k rows inside their sequence. Writes, for every query row of every tile, out: [*, heads, d]
// normalized over the tile's keys and lse: [*, heads] (-inf and 0 when no key is allowed).
// Rows outside every tile are left untouched.
template <typename T>
void tiles_fwd(const AttnShape& s, std::span<const Tile> tiles, const int32_t* q_pos,
               const int32_t* k_pos, const T* q, const T* k, const T* v, T* out, T* lse);

// Backward over tiles, accumulating (+=) into dq: [*, heads, d] and dk, dv: [*, kv_heads, d].
// lse: [*, heads] the final (merged) lse of the query rows; delta: [*, heads] = <dout, out>.
template <typename T>
void tiles_bwd(const AttnShape& s, std::span<const Tile> tiles, const int32_t* q_pos,
               const int32_t* k_pos, const T* q, const T* k, const T* v, const T* lse,
               const T* delta, const T* dout, T* dq, T* dk, T* dv);

// Merges a step's partial (out_step, lse_step) into the running (out_acc, lse_acc), row by row:
// out_*: [rows, heads, d]; lse_*: [rows, heads].
template <typename T>
void lse_merge(const AttnShape& s, int64_t rows, const T* out_step, const T* lse_step, T* out_acc,
               T* lse_acc);

// delta[t, h] = <dout[t, h, :], out[t, h, :]>: [rows, heads].
template <typename T>
void row_delta(const AttnShape& s, int64_t rows, const T* out, const T* dout, T* delta);

}  // namespace dcp::attn
