// See bf16_rule.h. The naive algorithm is written per (sequence, query head) as the dense
// matmuls PyTorch would run, with fp32 accumulators (float) and a bf16 rounding after each op
// whose output PyTorch would store in bf16. Each matmul element is one fp32 sum in the
// textbook order (attn/host_loops.h runs independent sums side by side: on finite inputs the
// textbook loops' results bit for bit, tests/test_host_loops.cpp).
#include "attn/bf16_rule.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <vector>

#include "attn/attn_ref.h"
#include "attn/host_loops.h"
#include "core/nvtx.h"

namespace dcp::attn {

double round_bf16(double x) {
  if (!std::isfinite(x) || x == 0) return x;
  int e = 0;
  const double m = std::frexp(x, &e);                // |m| in [0.5, 1)
  const double r = std::nearbyint(std::ldexp(m, 8));  // 8 significand bits, ties to even
  const double y = std::ldexp(r, e - 8);
  constexpr double kMaxBf16 = 3.3895313892515355e38;  // (2 - 2^-7) * 2^127
  if (std::fabs(y) > kMaxBf16) return std::copysign(std::numeric_limits<double>::infinity(), x);
  return y;
}

void round_bf16(std::span<double> x) {
  for (double& v : x) v = round_bf16(v);
}

double round_fp16(double x) {
  if (!std::isfinite(x) || x == 0) return x;
  constexpr double kMinNormal = 6.103515625e-05;  // 2^-14
  double y;
  if (std::fabs(x) < kMinNormal) {
    y = std::ldexp(std::nearbyint(std::ldexp(x, 24)), -24);  // subnormals: multiples of 2^-24
  } else {
    int e = 0;
    const double m = std::frexp(x, &e);
    y = std::ldexp(std::nearbyint(std::ldexp(m, 11)), e - 11);  // 11 significand bits
  }
  if (std::fabs(y) > 65504.0) return std::copysign(std::numeric_limits<double>::infinity(), x);
  return y;
}

double round_half(double x, Half h) { return h == Half::bf16 ? round_bf16(x) : round_fp16(x); }

float round_half(float x, Half h) {
  if (h == Half::bf16) {
    const auto u = std::bit_cast<uint32_t>(x);
    const uint32_t exponent = (u >> 23) & 0xffu;
    // A carry out of the kept bits raises the exponent (to inf's at the top: what round_bf16
    // returns beyond the largest bf16).
    if (exponent != 0 && exponent != 0xffu) return std::bit_cast<float>((u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u);
  }
  return static_cast<float>(round_half(static_cast<double>(x), h));
}

namespace {

using host::axpy;
using host::dots;
constexpr auto rows_as_float = host::head_rows<float>;  // one head's rows as dense fp32

// One (sequence, query head): the 16-bit scaled keys of its kv head (reorder_ops=True scales k,
// after repeat_kv: scores = q (k / sqrt(d))^T), probabilities [len_q x len_k] with the masked
// entries 0, and each row's fp32 lse (-inf for a row that attends nothing).
struct Probs {
  std::vector<float> ks;   // [len_k, d]
  std::vector<float> p;    // [len_q, len_k]
  std::vector<float> lse;  // [len_q]
  std::vector<float> qf;   // [len_q, d]: the head's queries in fp32 (the backward's Q too)
  std::vector<float> kst;  // [d, len_k]: ks transposed (workspace)
  std::vector<float> row;  // one row's scores (workspace)
};

struct Seq {
  int64_t start_q, start_k;
  int32_t len_q, len_k;
};

// r's buffers are the caller's, reused from one head to the next.
void probs(const AttnShape& s, const Seq& sq, int h, std::span<const double> q, std::span<const double> k,
           Half half, Probs& r) {
  const auto rd = [half](float x) { return round_half(x, half); };
  const int d = s.head_dim, g = h / s.group();
  const float scale = static_cast<float>(s.scale());
  r.ks.resize(static_cast<size_t>(sq.len_k) * d);
  r.p.assign(static_cast<size_t>(sq.len_q) * sq.len_k, 0.0f);
  r.lse.assign(sq.len_q, -std::numeric_limits<float>::infinity());
  for (int32_t p = 0; p < sq.len_k; ++p)
    for (int e = 0; e < d; ++e)
      r.ks[p * d + e] = rd(static_cast<float>(k[((sq.start_k + p) * s.kv_heads + g) * d + e]) * scale);
  rows_as_float(q, sq.start_q, sq.len_q, s.heads, h, d, r.qf);
  host::transpose(r.ks.data(), sq.len_k, d, r.kst);
  std::vector<float>& row = r.row;
  for (int32_t i = 0; i < sq.len_q; ++i) {
    const int32_t nk = keys_attended(s, i, sq.len_q, sq.len_k);
    if (nk == 0) continue;
    row.resize(nk);
    dots(&r.qf[static_cast<size_t>(i) * d], r.kst.data(), sq.len_k, nk, d, row.data());
    float m = -std::numeric_limits<float>::infinity();
    for (int32_t p = 0; p < nk; ++p) {
      row[p] = rd(row[p]);
      m = std::max(m, row[p]);
    }
    float sum = 0;
    for (int32_t p = 0; p < nk; ++p) sum += std::exp(row[p] - m);
    r.lse[i] = m + std::log(sum);
    for (int32_t p = 0; p < nk; ++p) r.p[static_cast<size_t>(i) * sq.len_k + p] = rd(std::exp(row[p] - m) / sum);
  }
}

Seq seq(const ThdBatch& bq, const ThdBatch& bk, int j) {
  return {bq.cu_seqlens_padded[j], bk.cu_seqlens_padded[j], bq.seqlen(j), bk.seqlen(j)};
}

}  // namespace

void attn_fwd_naive(const ThdBatch& bq, const ThdBatch& bk, const AttnShape& s, Half half,
                    std::span<const double> q, std::span<const double> k, std::span<const double> v,
                    std::span<double> out, std::span<double> lse) {
  DCP_NVTX_RANGE();
  begin_fwd(bq, bk, s, q, k, v, out, lse);
  const auto rd = [half](float x) { return round_half(x, half); };
  const int d = s.head_dim;
  std::vector<float> vf, acc(d);
  Probs pr;
  for (int j = 0; j < bq.batch(); ++j) {
    const Seq sq = seq(bq, bk, j);
    for (int h = 0; h < s.heads; ++h) {
      const int g = h / s.group();
      probs(s, sq, h, q, k, half, pr);
      if (h % s.group() == 0) rows_as_float(v, sq.start_k, sq.len_k, s.kv_heads, g, d, vf);  // once per kv head
      for (int32_t i = 0; i < sq.len_q; ++i) {
        const int32_t nk = keys_attended(s, i, sq.len_q, sq.len_k);
        if (nk == 0) continue;
        lse[(sq.start_q + i) * s.heads + h] = pr.lse[i];
        // out_e = sum over p (ascending) of P_ip v_pe in fp32, all e at once (host_loops.h).
        std::fill(acc.begin(), acc.end(), 0.0f);
        const float* pi = &pr.p[static_cast<size_t>(i) * sq.len_k];
        for (int32_t p = 0; p < nk; ++p) axpy(pi[p], &vf[static_cast<size_t>(p) * d], acc.data(), d);
        for (int e = 0; e < d; ++e) out[((sq.start_q + i) * s.heads + h) * d + e] = rd(acc[e]);
      }
    }
  }
}

void attn_fwd_naive_bf16(const ThdBatch& b, const AttnShape& s, std::span<const double> q,
                         std::span<const double> k, std::span<const double> v, std::span<double> out,
                         std::span<double> lse) {
  attn_fwd_naive(b, b, s, Half::bf16, q, k, v, out, lse);
}

void attn_bwd_naive(const ThdBatch& bq, const ThdBatch& bk, const AttnShape& s, Half half,
                    std::span<const double> q, std::span<const double> k, std::span<const double> v,
                    std::span<const double> dout, std::span<double> dq, std::span<double> dk,
                    std::span<double> dv) {
  DCP_NVTX_RANGE();
  begin_bwd(bq, bk, s, q, k, v, dout, dq, dk, dv);
  const auto rd = [half](float x) { return round_half(x, half); };
  const int d = s.head_dim;
  const float scale = static_cast<float>(s.scale());
  std::vector<float> vf, vt, of, acc(d), acc_k(d), acc_v(d), ds, dp;
  std::vector<int32_t> nks;
  Probs pr;
  for (int j = 0; j < bq.batch(); ++j) {
    const Seq sq = seq(bq, bk, j);
    const int32_t lq = sq.len_q, lk = sq.len_k;
    if (lq == 0 || lk == 0) continue;
    const auto lkz = static_cast<size_t>(lk);
    nks.resize(lq);
    for (int32_t i = 0; i < lq; ++i) nks[i] = keys_attended(s, i, lq, lk);
    for (int g = 0; g < s.kv_heads; ++g) {
      // The kv group's dk/dv: per query head a 16-bit matmul output, summed in fp32, rounded once.
      std::vector<float> dk_sum(lkz * d, 0.0f), dv_sum(dk_sum.size(), 0.0f);
      rows_as_float(v, sq.start_k, lk, s.kv_heads, g, d, vf);
      host::transpose(vf.data(), lk, d, vt);
      for (int h = g * s.group(); h < (g + 1) * s.group(); ++h) {
        probs(s, sq, h, q, k, half, pr);  // pr.qf: this head's Q in fp32
        rows_as_float(dout, sq.start_q, lq, s.heads, h, d, of);
        const auto at = [&](int32_t i) { return ((sq.start_q + i) * s.heads + h) * d; };
        // dP = rd(dO V^T); dS = rd(P (dP - rowsum(dP P))) (softmax backward in fp32).
        ds.assign(static_cast<size_t>(lq) * lk, 0.0f);
        for (int32_t i = 0; i < lq; ++i) {
          const int32_t nk = nks[i];
          dp.resize(nk);
          dots(&of[static_cast<size_t>(i) * d], vt.data(), lk, nk, d, dp.data());
          float rowsum = 0;
          for (int32_t p = 0; p < nk; ++p) {
            dp[p] = rd(dp[p]);
            rowsum += dp[p] * pr.p[i * lkz + p];
          }
          for (int32_t p = 0; p < nk; ++p) {
            const float prob = pr.p[i * lkz + p];
            ds[i * lkz + p] = rd(prob * (dp[p] - rowsum));
          }
        }
        // dQ = rd(dS Ks); this head's dK = rd(rd(dS^T Q) * scale) (the backward of
        // k / sqrt(d)), dV = rd(P^T dO). Masked entries of P and dS are 0: dK and dV skip them,
        // which leaves every sum as it was for q and dO finite in fp32 (0 * x adds a signed zero,
        // and an fp32 sum that starts at +0 never holds -0 under round-to-nearest).
        for (int32_t i = 0; i < lq; ++i) {
          std::fill(acc.begin(), acc.end(), 0.0f);
          for (int32_t p = 0; p < nks[i]; ++p)
            axpy(ds[i * lkz + p], &pr.ks[static_cast<size_t>(p) * d], acc.data(), d);
          for (int e = 0; e < d; ++e) dq[at(i) + e] = rd(acc[e]);
        }
        for (int32_t p = 0; p < lk; ++p) {
          std::fill(acc_k.begin(), acc_k.end(), 0.0f);
          std::fill(acc_v.begin(), acc_v.end(), 0.0f);
          for (int32_t i = 0; i < lq; ++i) {
            if (p >= nks[i]) continue;
            axpy(ds[i * lkz + p], &pr.qf[static_cast<size_t>(i) * d], acc_k.data(), d);
            axpy(pr.p[i * lkz + p], &of[static_cast<size_t>(i) * d], acc_v.data(), d);
          }
          for (int e = 0; e < d; ++e) {
            dk_sum[p * d + e] += rd(rd(acc_k[e]) * scale);
            dv_sum[p * d + e] += rd(acc_v[e]);
          }
        }
      }
      for (int32_t p = 0; p < lk; ++p)
        for (int e = 0; e < d; ++e) {
          dk[((sq.start_k + p) * s.kv_heads + g) * d + e] = rd(dk_sum[p * d + e]);
          dv[((sq.start_k + p) * s.kv_heads + g) * d + e] = rd(dv_sum[p * d + e]);
        }
    }
  }
}

void attn_bwd_naive_bf16(const ThdBatch& b, const AttnShape& s, std::span<const double> q,
                         std::span<const double> k, std::span<const double> v,
                         std::span<const double> dout, std::span<double> dq, std::span<double> dk,
                         std::span<double> dv) {
  attn_bwd_naive(b, b, s, Half::bf16, q, k, v, dout, dq, dk, dv);
}

Bf16Rule bf16_rule(std::span<const double> ref, std::span<const double> naive, OutType out) {
  DCP_CHECK(ref.size() == naive.size(), "bf16_rule: reference has ", ref.size(), " elements, naive ", naive.size());
  const auto o = [out](double x) {
    switch (out) {
      case OutType::bf16: return round_bf16(x);
      case OutType::fp16: return round_fp16(x);
      case OutType::fp32: break;
    }
    return static_cast<double>(static_cast<float>(x));
  };
  Bf16Rule r;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(ref[i])) continue;  // -inf lse of padding rows: compare.h checks equality
    DCP_CHECK(std::isfinite(naive[i]), "bf16_rule: the naive result is ", naive[i], " at ", i, " where the reference is ",
              ref[i]);
    r.naive_err = std::max(r.naive_err, std::fabs(naive[i] - ref[i]));
    r.floor = std::max(r.floor, std::fabs(o(o(ref[i] + 0.3) - 0.3) - ref[i]));
  }
  r.floor *= 2.0;
  return r;
}

std::string Bf16Check::report(const std::string& name) const {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s: max_abs=%.3g %s tol=%.3g (2 x naive 16-bit %.3g + floor %.3g): %s", name.c_str(),
                got.max_abs_err, pass() ? "<=" : ">", rule.tol(), rule.naive_err, rule.floor, pass() ? "pass" : "FAIL");
  return std::string(buf) + (pass() ? "" : "; " + got.report(name));
}

template <typename T>
Bf16Check check_bf16_rule(std::span<const double> ref, std::span<const double> naive, std::span<const T> got,
                          OutType out) {
  Bf16Check c;
  c.rule = bf16_rule(ref, naive, out);
  c.got = compare_to_ref<T>(ref, got);
  return c;
}

template Bf16Check check_bf16_rule<double>(std::span<const double>, std::span<const double>, std::span<const double>,
                                          OutType);
template Bf16Check check_bf16_rule<float>(std::span<const double>, std::span<const double>, std::span<const float>,
                                         OutType);

}  // namespace dcp::attn
