// Attention problem shape shared by the reference, the CP variants and the kernels.
//
// Tensor layouts (row-major, one row per packed THD token, see thd.h):
//   q, out, dout, dq : [tokens, heads, head_dim]
//   k, v, dk, dv     : [tokens, kv_heads, head_dim]
//   lse              : [tokens, heads], natural-log sum of exp of the scaled scores of the keys
//                      a query attends; -inf for rows that attend nothing (padding rows).
// GQA: query head h reads kv head h / (heads / kv_heads) (kv_heads divides heads).
// Mask: query at position i of sequence j attends key position p of the same sequence iff
// i < len_j and p <= i (causal) or p < len_j (non-causal). Padding rows never attend and are
// never attended; their out/lse/gradients are 0/-inf/0.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/error.h"

namespace dcp::attn {

struct AttnShape {
  int heads = 1;
  int kv_heads = 1;
  int head_dim = 64;
  bool causal = true;
  double softmax_scale = 0;  // 0 means 1/sqrt(head_dim)

  double scale() const { return softmax_scale > 0 ? softmax_scale : 1.0 / std::sqrt(head_dim); }
  int group() const { return heads / kv_heads; }  // query heads per kv head
  int64_t q_row() const { return static_cast<int64_t>(heads) * head_dim; }
  int64_t kv_row() const { return static_cast<int64_t>(kv_heads) * head_dim; }
};

// The mask above for a real query row: query position i of a sequence of real length len
// attends the key positions [0, keys_attended(s, i, len)).
inline int32_t keys_attended(const AttnShape& s, int32_t i, int32_t len) { return s.causal ? i + 1 : len; }

// Rectangular problems (queries and keys from different batches with the same sequence count:
// the ring's steps over halves, attn_ref.h): query i of len_q attends key positions
// [0, keys_attended(s, i, len_q, len_k)); causal is aligned bottom-right (FlashAttention >= 2.1):
// key j is allowed iff j <= i + len_k - len_q, which is the mask above when len_q = len_k.
inline int32_t keys_attended(const AttnShape& s, int32_t i, int32_t len_q, int32_t len_k) {
  if (!s.causal) return len_k;
  const int64_t n = static_cast<int64_t>(i) + 1 + len_k - len_q;
  return static_cast<int32_t>(n < 0 ? 0 : (n > len_k ? len_k : n));
}

// Throws InputError for heads/kv_heads/head_dim that cannot describe an attention problem.
inline void validate(const AttnShape& s) {
  DCP_REQUIRE(s.heads >= 1 && s.kv_heads >= 1 && s.head_dim >= 1, "attention shape: heads=",
              s.heads, ", kv_heads=", s.kv_heads, ", head_dim=", s.head_dim,
              " must all be >= 1");
  DCP_REQUIRE(s.heads % s.kv_heads == 0, "attention shape: heads=", s.heads,
              " is not divisible by kv_heads=", s.kv_heads);
  DCP_REQUIRE(s.softmax_scale >= 0, "attention shape: softmax_scale=", s.softmax_scale,
              " must be >= 0 (0 = 1/sqrt(head_dim))");
}

}  // namespace dcp::attn
