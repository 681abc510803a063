// Test helpers: the verifiable inputs of attn/inputs.h, the float64 reference of a whole batch,
// and the varlen case table shared by the thread and MPI tests.
#pragma once

#include <string>
#include <vector>

#include "attn/attn_ref.h"
#include "attn/inputs.h"
#include "attn/thd.h"
#include "core/rng.h"

namespace dcp::attn::testing {

using attn::global_tensor;
using attn::input_value;
using attn::local_tensor;
using Tensor = attn::InputTensor;

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
