// Cases and checks shared by the tensor-core attention tests: the host emulator's (cpu,
// test_flash_emu.cpp) and the CUDA kernel's (gpu, test_flash_cuda.cpp), so both run the same
// problems under the same acceptance rule.
//
// Inputs: the verifiable uniform [-1, 1) values of attn/inputs.h (seeded, non-zero), rounded to
// the 16-bit type; reference: attn_fwd_ref (float64) on exactly those values; acceptance: the
// FlashAttention rule of bf16_rule.h in the case's 16-bit type (out against 2 x the naive 16-bit
// algorithm's error + the type's floor; lse, written in fp32, likewise with the fp32 floor).
// Outputs are poisoned (NaN) before the kernel runs, so a row it never writes fails.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "attn/attn_ref.h"
#include "attn/flash_ring.h"
#include "attn/bf16_rule.h"
#include "attn/flash/flash_common.h"
#include "attn/inputs.h"
#include "attn/tolerances.h"
#include "attn/thd.h"
#include "core/sanitizer.h"

namespace dcp::attn::testing {

// Under AddressSanitizer the emulated kernels (a barrier per warp collective) run several times
// slower; the sanitizer build then runs a third of the cases (every one with index % 3 == 0, and
// the first ring case), which still exercises every code path of the emulator and the kernel
// bodies for memory errors. The normal build runs them all.
inline bool sanitized_subset_skips(int index) { return kAddressSanitizer && index % 3 != 0; }

struct FlashCase {
  std::string what;
  std::vector<int32_t> len_q;    // real lengths of the query side
  std::vector<int32_t> len_k;    // of the key side; empty = the same batch as the queries
  std::vector<int32_t> extra_q;  // padding rows after each query sequence (empty = none)
  int heads, kv_heads, head_dim;
  bool causal;
  Half half = Half::bf16;
};

// Lengths around the kernels' blocks (kBlockM = kBlockN = 64, the forward's kFwdBlockM = 128),
// padding, empty sequences, GQA, both head dims, the ring's rectangular steps, bottom-right causal
// on both sides, and key blocks every row of a forward CTA sees whole (the unmasked path).
inline std::vector<FlashCase> flash_fwd_cases() {
  return {
      {"length 1", {1}, {}, {}, 2, 1, 64, true},
      {"block-1, block, block+1", {63, 64, 65}, {}, {}, 4, 2, 64, true},
      {"one long (3 blocks + 1) + one short, GQA d=128", {193, 2}, {}, {}, 4, 2, 128, true},
      {"many short", {1, 3, 2, 5, 1, 4, 2, 1, 3, 6, 1, 2}, {}, {}, 2, 2, 64, true},
      {"padding between and after", {3, 65, 5}, {}, {2, 0, 70}, 2, 1, 64, true},
      {"zero-length sequences", {0, 70, 0, 9}, {}, {2, 0, 0, 0}, 2, 1, 128, true},
      {"non-causal, d=128", {67, 5}, {}, {0, 2}, 2, 2, 128, false},
      {"ring lower step: all of Q x front half of KV", {130, 66}, {65, 33}, {}, 2, 1, 64, false},
      {"ring upper step: back half of Q x all of KV", {65, 33}, {130, 66}, {}, 2, 1, 128, false},
      {"causal bottom-right, len_q < len_k", {40, 100}, {100, 130}, {}, 2, 2, 64, true},
      {"causal bottom-right, len_q > len_k (rows with no key)", {100, 7}, {30, 0}, {}, 2, 1, 64, true},
      {"fp16, block+1, GQA", {65, 130}, {}, {}, 4, 2, 64, true, Half::fp16},
      {"fp16, non-causal d=128", {70, 3}, {}, {2, 0}, 2, 1, 128, false, Half::fp16},
      {"forward CTA rows-1, rows, rows+1", {127, 128, 129}, {}, {}, 2, 1, 64, true},
      {"causal bottom-right, len_q < len_k: whole key blocks unmasked", {70, 70, 130}, {130, 200, 260}, {}, 2, 1, 128, true},
  };
}

inline ThdBatch flash_batch(const std::vector<int32_t>& len, const std::vector<int32_t>& extra) {
  return make_thd_batch(len, 1, extra);
}

struct FlashInputs {
  ThdBatch bq, bk;
  AttnShape s;
  std::vector<double> q, k, v;          // 16-bit values as doubles
  std::vector<uint16_t> qh, kh, vh;     // the same as bit patterns
};

inline uint16_t to_bits(double x, Half h) {
  return h == Half::bf16 ? flash::Bf16::from_float(static_cast<float>(x)) : flash::Fp16::from_float(static_cast<float>(x));
}
inline double from_bits(uint16_t b, Half h) {
  return h == Half::bf16 ? flash::Bf16::to_float(b) : flash::Fp16::to_float(b);
}

inline FlashInputs flash_inputs(const FlashCase& c, uint64_t seed) {
  FlashInputs in;
  in.bq = flash_batch(c.len_q, c.extra_q);
  in.bk = c.len_k.empty() ? in.bq : flash_batch(c.len_k, {});
  in.s.heads = c.heads;
  in.s.kv_heads = c.kv_heads;
  in.s.head_dim = c.head_dim;
  in.s.causal = c.causal;
  const auto make = [&](uint64_t tensor, int64_t rows, int64_t row, std::vector<double>& x, std::vector<uint16_t>& bits) {
    x = global_tensor<double>(seed, tensor, rows, row);
    bits.resize(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      x[i] = round_half(x[i], c.half);
      bits[i] = to_bits(x[i], c.half);
    }
  };
  make(kQ, in.bq.total_tokens(), in.s.q_row(), in.q, in.qh);
  make(kK, in.bk.total_tokens(), in.s.kv_row(), in.k, in.kh);
  make(kV, in.bk.total_tokens(), in.s.kv_row(), in.v, in.vh);
  return in;
}

using FlashFwd = std::function<void(Half, const ThdBatch&, const ThdBatch&, const AttnShape&, std::span<const uint16_t>,
                                    std::span<const uint16_t>, std::span<const uint16_t>, std::span<uint16_t>,
                                    std::span<float>)>;

// A forward with the emulator's or the CUDA launcher's signature (flash_fwd_emulated,
// flash_fwd_cuda: the FlashFwd arguments, then the m16 tiles per warp) as a FlashFwd.
template <class F>
FlashFwd fwd_with_tiles(F fwd, int tiles_m) {
  return [fwd, tiles_m](Half h, const ThdBatch& bq, const ThdBatch& bk, const AttnShape& s, std::span<const uint16_t> q,
                        std::span<const uint16_t> k, std::span<const uint16_t> v, std::span<uint16_t> out,
                        std::span<float> lse) { fwd(h, bq, bk, s, q, k, v, out, lse, tiles_m); };
}

struct FlashFwdChecks {
  Bf16Check out, lse;
};

// Runs `fwd` on the case (outputs poisoned with NaN first) and applies the rule; `shape` may
// alter the shape the kernel gets (a negative control).
inline FlashFwdChecks check_flash_fwd(const FlashCase& c, const FlashFwd& fwd, uint64_t seed = 7,
                                      const std::function<void(AttnShape&)>& alter = {}) {
  const FlashInputs in = flash_inputs(c, seed);
  const size_t nq = in.q.size(), nl = static_cast<size_t>(in.bq.total_tokens() * in.s.heads);
  std::vector<double> ref(nq), ref_lse(nl), naive(nq), naive_lse(nl);
  attn_fwd_ref(in.bq, in.bk, in.s, in.q, in.k, in.v, ref, ref_lse);
  attn_fwd_naive(in.bq, in.bk, in.s, c.half, in.q, in.k, in.v, naive, naive_lse);
  std::vector<uint16_t> out(nq, 0x7fff);  // NaN in both types
  std::vector<float> lse(nl, std::numeric_limits<float>::quiet_NaN());
  AttnShape s = in.s;
  if (alter) alter(s);
  fwd(c.half, in.bq, in.bk, s, in.qh, in.kh, in.vh, out, lse);
  std::vector<double> got(nq);
  for (size_t i = 0; i < nq; ++i) got[i] = from_bits(out[i], c.half);
  FlashFwdChecks r;
  r.out = check_bf16_rule<double>(ref, naive, got, c.half == Half::bf16 ? OutType::bf16 : OutType::fp16);
  r.lse = check_bf16_rule<float>(ref_lse, naive_lse, lse, OutType::fp32);
  return r;
}

using FlashBwd = std::function<void(Half, const ThdBatch&, const ThdBatch&, const AttnShape&, std::span<const uint16_t>,
                                    std::span<const uint16_t>, std::span<const uint16_t>, std::span<const uint16_t>,
                                    std::span<const float>, std::span<const uint16_t>, std::span<uint16_t>,
                                    std::span<uint16_t>, std::span<uint16_t>)>;

struct FlashBwdChecks {
  Bf16Check dq, dk, dv;
};

// The backward on the case: the kernel gets the float64 forward's out rounded to the 16-bit
// type and its lse in fp32 (as a kernel gets its own forward's), dout = the verifiable kDout
// values rounded; the reference is attn_bwd_ref in float64, the naive one attn_bwd_naive.
inline FlashBwdChecks check_flash_bwd(const FlashCase& c, const FlashBwd& bwd, uint64_t seed = 7,
                                      const std::function<void(AttnShape&)>& alter = {}) {
  const FlashInputs in = flash_inputs(c, seed);
  const size_t nq = in.q.size(), nk = in.k.size(), nl = static_cast<size_t>(in.bq.total_tokens() * in.s.heads);
  std::vector<double> out(nq), lse(nl);
  attn_fwd_ref(in.bq, in.bk, in.s, in.q, in.k, in.v, out, lse);
  std::vector<double> dout = global_tensor<double>(seed, kDout, in.bq.total_tokens(), in.s.q_row());
  std::vector<uint16_t> outh(nq), douth(nq);
  std::vector<float> lsef(nl);
  for (size_t i = 0; i < nq; ++i) {
    dout[i] = round_half(dout[i], c.half);
    douth[i] = to_bits(dout[i], c.half);
    outh[i] = to_bits(out[i], c.half);
  }
  for (size_t i = 0; i < nl; ++i) lsef[i] = static_cast<float>(lse[i]);
  std::vector<double> rdq(nq), rdk(nk), rdv(nk), ndq(nq), ndk(nk), ndv(nk);
  attn_bwd_ref(in.bq, in.bk, in.s, in.q, in.k, in.v, out, lse, dout, rdq, rdk, rdv);
  attn_bwd_naive(in.bq, in.bk, in.s, c.half, in.q, in.k, in.v, dout, ndq, ndk, ndv);
  std::vector<uint16_t> dq(nq, 0x7fff), dk(nk, 0x7fff), dv(nk, 0x7fff);  // NaN poison
  AttnShape s = in.s;
  if (alter) alter(s);
  bwd(c.half, in.bq, in.bk, s, in.qh, in.kh, in.vh, outh, lsef, douth, dq, dk, dv);
  const auto as_double = [&](const std::vector<uint16_t>& x) {
    std::vector<double> d(x.size());
    for (size_t i = 0; i < x.size(); ++i) d[i] = from_bits(x[i], c.half);
    return d;
  };
  const OutType ot = c.half == Half::bf16 ? OutType::bf16 : OutType::fp16;
  FlashBwdChecks r;
  r.dq = check_bf16_rule<double>(rdq, ndq, as_double(dq), ot);
  r.dk = check_bf16_rule<double>(rdk, ndk, as_double(dk), ot);
  r.dv = check_bf16_rule<double>(rdv, ndv, as_double(dv), ot);
  return r;
}

// --- ring CP over the kernels, the ranks of a group as virtual ranks (flash_ring.h) ---

struct FlashRingCase {
  std::string what;
  std::vector<int32_t> lengths;
  int cp, heads, kv_heads, head_dim;
  bool causal;
  Half half = Half::bf16;
};

inline std::vector<FlashRingCase> flash_ring_cases() {
  return {
      {"cp=2: long, block-sized, short, length 1, empty", {200, 64, 33, 1, 0}, 2, 4, 2, 64, true},
      {"cp=4, d=128", {130, 9}, 4, 2, 1, 128, true},
      {"cp=2 non-causal", {150, 33}, 2, 2, 2, 64, false},
      {"cp=4 fp16 GQA", {48, 17}, 4, 4, 2, 64, true, Half::fp16},
  };
}

struct FlashRingChecks {
  Bf16Check out, lse, dq, dk, dv;
};

// The whole batch through the ring on `be`: each rank's zigzag shard in, every rank's result
// un-sharded, checked against the float64 reference of the whole batch under the rule.
template <class Backend>
FlashRingChecks check_flash_ring(Backend& be, const FlashRingCase& c, uint64_t seed = 5) {
  be.half = c.half;
  const ThdBatch b = make_thd_batch(c.lengths, c.cp);
  AttnShape s;
  s.heads = c.heads;
  s.kv_heads = c.kv_heads;
  s.head_dim = c.head_dim;
  s.causal = c.causal;
  const int64_t t = b.total_tokens();
  const auto rounded = [&](uint64_t tensor, int64_t row) {
    auto x = global_tensor<double>(seed, tensor, t, row);
    for (double& e : x) e = round_half(e, c.half);
    return x;
  };
  const auto q = rounded(kQ, s.q_row()), k = rounded(kK, s.kv_row()), v = rounded(kV, s.kv_row()),
             dout = rounded(kDout, s.q_row());
  const size_t nl = static_cast<size_t>(t * s.heads);
  std::vector<double> out(q.size()), lse(nl), dq(q.size()), dk(k.size()), dv(v.size());
  std::vector<double> n_out(q.size()), n_lse(nl), n_dq(q.size()), n_dk(k.size()), n_dv(v.size());
  attn_fwd_ref(b, s, q, k, v, out, lse);
  attn_bwd_ref(b, s, q, k, v, out, lse, dout, dq, dk, dv);
  attn_fwd_naive(b, b, s, c.half, q, k, v, n_out, n_lse);
  attn_bwd_naive(b, b, s, c.half, q, k, v, dout, n_dq, n_dk, n_dv);

  using B16 = typename Backend::B16;
  using B32 = typename Backend::B32;
  const auto shards = [&](const std::vector<double>& x, int64_t row) {
    std::vector<uint16_t> bits(x.size());
    for (size_t i = 0; i < x.size(); ++i) bits[i] = to_bits(x[i], c.half);
    std::vector<B16> r;
    for (int p = 0; p < c.cp; ++p) r.push_back(be.upload(shard_rows<uint16_t>(bits, row, b, c.cp, p)));
    return r;
  };
  const std::vector<B16> qs = shards(q, s.q_row()), ks = shards(k, s.kv_row()), vs = shards(v, s.kv_row()),
                         gs = shards(dout, s.q_row());
  std::vector<B16> outs, dqs, dks, dvs;
  std::vector<B32> lses;
  flash_ring_fwd(be, b, c.cp, s, qs, ks, vs, outs, lses);
  flash_ring_bwd(be, b, c.cp, s, qs, ks, vs, outs, lses, gs, dqs, dks, dvs);
  const auto whole16 = [&](const std::vector<B16>& parts, int64_t row) {
    std::vector<uint16_t> cat;
    for (const auto& p : parts) {
      const auto h = be.download(p);
      cat.insert(cat.end(), h.begin(), h.end());
    }
    const auto g = unshard_rows<uint16_t>(cat, row, b, c.cp);
    std::vector<double> d(g.size());
    for (size_t i = 0; i < g.size(); ++i) d[i] = from_bits(g[i], c.half);
    return d;
  };
  std::vector<float> lcat;
  for (const auto& p : lses) {
    const auto h = be.download(p);
    lcat.insert(lcat.end(), h.begin(), h.end());
  }
  const auto lse_got = unshard_rows<float>(lcat, s.heads, b, c.cp);
  const OutType ot = c.half == Half::bf16 ? OutType::bf16 : OutType::fp16;
  FlashRingChecks r;
  r.out = check_bf16_rule<double>(out, n_out, whole16(outs, s.q_row()), ot);
  r.lse = check_bf16_rule<float>(lse, n_lse, lse_got, OutType::fp32);
  r.dq = check_bf16_rule<double>(dq, n_dq, whole16(dqs, s.q_row()), ot);
  r.dk = check_bf16_rule<double>(dk, n_dk, whole16(dks, s.kv_row()), ot);
  r.dv = check_bf16_rule<double>(dv, n_dv, whole16(dvs, s.kv_row()), ot);
  return r;
}

// The expectations every test of these checks makes (emulated and on the device alike); the
// lse is also held to fp32 accuracy (the kernels compute it in fp32 from exact inputs).
inline void expect_pass(const FlashFwdChecks& r, const std::string& what) {
  EXPECT_TRUE(r.out.pass()) << what << ": " << r.out.report("out");
  EXPECT_TRUE(r.lse.pass()) << what << ": " << r.lse.report("lse");
  EXPECT_TRUE(r.lse.got.within(kTolF32.rel_to_max)) << what << ": " << r.lse.got.report("lse");
}
inline void expect_pass(const FlashBwdChecks& r, const std::string& what) {
  EXPECT_TRUE(r.dq.pass()) << what << ": " << r.dq.report("dq");
  EXPECT_TRUE(r.dk.pass()) << what << ": " << r.dk.report("dk");
  EXPECT_TRUE(r.dv.pass()) << what << ": " << r.dv.report("dv");
}
inline void expect_pass(const FlashRingChecks& r, const std::string& what) {
  expect_pass(FlashFwdChecks{r.out, r.lse}, what);
  expect_pass(FlashBwdChecks{r.dq, r.dk, r.dv}, what);
}

}  // namespace dcp::attn::testing
