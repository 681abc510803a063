// Test inputs generated from (seed, tensor, global element index) so every CP rank builds its own
// shard and the full-batch reference without gathering (nccl-tests' verifiable idea), and the
// varlen case table shared by the thread and MPI tests.
#pragma once

#include <string>
#include <vector>

#include "attn/attn_ref.h"
#include "attn/thd.h"
#include "core/rng.h"

namespace dcp::attn::testing {

enum Tensor : uint64_t { kQ = 1, kK = 2, kV = 3, kDout = 4 };

// Uniform in [-1, 1) from (seed, tensor, global element index): random, non-zero, seeded.
inline double input_value(uint64_t seed, uint64_t tensor, int64_t index) {
  return 2.0 * hash_uniform(hash_u64(seed, tensor), static_cast<uint64_t>(index)) - 1.0;
}

// Whole tensor [rows, row_elems] in sequence order, rounded through T (so the float64 reference
// sees exactly the values a float32 run gets).
template <typename T>
std::vector<double> global_tensor(uint64_t seed, uint64_t tensor, int64_t rows, int64_t row_elems) {
  std::vector<double> out(rows * row_elems);
  for (int64_t i = 0; i < rows * row_elems; ++i)
    out[i] = static_cast<double>(static_cast<T>(input_value(seed, tensor, i)));
  return out;
}

// This rank's zigzag shard [Tl, row_elems], generated directly from global indices.
template <typename T>
std::vector<T> local_tensor(uint64_t seed, uint64_t tensor, const ThdBatch& b, int cp, int rank,
                            int64_t row_elems) {
  const auto rows = zigzag_rows(b, cp, rank);
  std::vector<T> out(rows.size() * row_elems);
  for (size_t t = 0; t < rows.size(); ++t)
    for (int64_t e = 0; e < row_elems; ++e)
      out[t * row_elems + e] = static_cast<T>(input_value(seed, tensor, rows[t] * row_elems + e));
  return out;
}

struct RefResult {
  std::vector<double> q, k, v, dout, out, lse, dq, dk, dv;
};

template <typename T>
RefResult reference(const ThdBatch& b, const AttnShape& s, uint64_t seed) {
  RefResult r;
  const int64_t t = b.total_tokens();
  r.q = global_tensor<T>(seed, kQ, t, s.q_row());
  r.k = global_tensor<T>(seed, kK, t, s.kv_row());
  r.v = global_tensor<T>(seed, kV, t, s.kv_row());
  r.dout = global_tensor<T>(seed, kDout, t, s.q_row());
  r.out.resize(r.q.size());
  r.lse.resize(t * s.heads);
  r.dq.resize(r.q.size());
  r.dk.resize(r.k.size());
  r.dv.resize(r.v.size());
  attn_fwd_ref(b, s, r.q, r.k, r.v, r.out, r.lse);
  attn_bwd_ref(b, s, r.q, r.k, r.v, r.out, r.lse, r.dout, r.dq, r.dk, r.dv);
  return r;
}

// Varlen cases for a given cp (block = 2*cp): column order = name, real lengths, extra padding
// (in units of 2*cp rows, 0 = none), heads, kv_heads, head_dim, causal.
struct VarlenCase {
  std::string what;
  std::vector<int32_t> lengths;
  std::vector<int32_t> extra_blocks;
  int heads, kv_heads, head_dim;
  bool causal;
};

inline std::vector<VarlenCase> varlen_cases(int cp) {
  const int32_t blk = 2 * cp;
  return {
      {"length 1", {1}, {}, 2, 1, 16, true},
      {"block-1, block, block+1", {blk - 1, blk, blk + 1}, {}, 4, 2, 16, true},
      {"one long + one short, d=64", {7 * blk + 3, 2}, {}, 2, 1, 64, true},
      {"many short", {1, 3, 2, 5, 1, 4, 2, 1, 3, 6, 1, 2}, {}, 2, 2, 8, true},
      {"padding between and after", {3, blk + 1, 5}, {1, 0, 2}, 4, 2, 16, true},
      {"zero-length sequences", {0, 5, 0, 9}, {1, 0, 0, 0}, 2, 1, 16, true},
      {"GQA d=128", {2 * blk + 1, blk - 1}, {}, 4, 2, 128, true},
      {"non-causal", {blk + 3, 5}, {0, 1}, 2, 2, 16, false},
  };
}

inline ThdBatch case_batch(const VarlenCase& c, int cp) {
  std::vector<int32_t> extra;
  for (int32_t e : c.extra_blocks) extra.push_back(e * 2 * cp);
  return make_thd_batch(c.lengths, cp, extra);
}

inline AttnShape case_shape(const VarlenCase& c) {
  AttnShape s;
  s.heads = c.heads;
  s.kv_heads = c.kv_heads;
  s.head_dim = c.head_dim;
  s.causal = c.causal;
  return s;
}

}  // namespace dcp::attn::testing
