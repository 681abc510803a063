// See bf16_rule.h. The naive algorithm is written per (sequence, query head) as the dense
// matmuls PyTorch would run, with fp32 accumulators (float) and a bf16 rounding after each op
// whose output PyTorch would store in bf16.
#include "attn/bf16_rule.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

#include "attn/attn_ref.h"
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

namespace {

float bf(float x) { return static_cast<float>(round_bf16(static_cast<double>(x))); }

// One (sequence, query head): the bf16 scaled keys of its kv head (reorder_ops=True scales k,
// after repeat_kv: scores = q (k / sqrt(d))^T), probabilities [len x len] with the masked entries
// 0, and each row's fp32 lse.
struct Probs {
  std::vector<float> ks;   // [len, d]
  std::vector<float> p;    // [len, len]
  std::vector<float> lse;  // [len]
};

Probs probs(const AttnShape& s, int32_t len, int64_t start, int h, std::span<const double> q,
            std::span<const double> k) {
  const int d = s.head_dim, g = h / s.group();
  const float scale = static_cast<float>(s.scale());
  Probs r;
  r.ks.resize(static_cast<size_t>(len) * d);
  r.p.assign(static_cast<size_t>(len) * len, 0.0f);
  r.lse.resize(len);
  for (int32_t p = 0; p < len; ++p)
    for (int e = 0; e < d; ++e)
      r.ks[p * d + e] = bf(static_cast<float>(k[((start + p) * s.kv_heads + g) * d + e]) * scale);
  std::vector<float> row;
  for (int32_t i = 0; i < len; ++i) {
    const int32_t nk = keys_attended(s, i, len);
    row.assign(nk, 0.0f);
    float m = -std::numeric_limits<float>::infinity();
    for (int32_t p = 0; p < nk; ++p) {
      float acc = 0;
      const double* qi = &q[((start + i) * s.heads + h) * d];
      for (int e = 0; e < d; ++e) acc += static_cast<float>(qi[e]) * r.ks[p * d + e];
      row[p] = bf(acc);
      m = std::max(m, row[p]);
    }
    float sum = 0;
    for (int32_t p = 0; p < nk; ++p) sum += std::exp(row[p] - m);
    r.lse[i] = m + std::log(sum);
    for (int32_t p = 0; p < nk; ++p) r.p[static_cast<size_t>(i) * len + p] = bf(std::exp(row[p] - m) / sum);
  }
  return r;
}

}  // namespace

void attn_fwd_naive_bf16(const ThdBatch& b, const AttnShape& s, std::span<const double> q,
                         std::span<const double> k, std::span<const double> v, std::span<double> out,
                         std::span<double> lse) {
  DCP_NVTX_RANGE();
  begin_fwd(b, s, q, k, v, out, lse);
  const int d = s.head_dim;
  for (int j = 0; j < b.batch(); ++j) {
    const int64_t start = b.cu_seqlens_padded[j];
    const int32_t len = b.seqlen(j);
    for (int h = 0; h < s.heads; ++h) {
      const int g = h / s.group();
      const Probs pr = probs(s, len, start, h, q, k);
      for (int32_t i = 0; i < len; ++i) {
        lse[(start + i) * s.heads + h] = pr.lse[i];
        for (int e = 0; e < d; ++e) {
          float acc = 0;
          for (int32_t p = 0; p < keys_attended(s, i, len); ++p)
            acc += pr.p[static_cast<size_t>(i) * len + p] * static_cast<float>(v[((start + p) * s.kv_heads + g) * d + e]);
          out[((start + i) * s.heads + h) * d + e] = bf(acc);
        }
      }
    }
  }
}

void attn_bwd_naive_bf16(const ThdBatch& b, const AttnShape& s, std::span<const double> q,
                         std::span<const double> k, std::span<const double> v,
                         std::span<const double> dout, std::span<double> dq, std::span<double> dk,
                         std::span<double> dv) {
  DCP_NVTX_RANGE();
  begin_bwd(b, s, q, k, v, dout, dq, dk, dv);
  const int d = s.head_dim;
  const float scale = static_cast<float>(s.scale());
  for (int j = 0; j < b.batch(); ++j) {
    const int64_t start = b.cu_seqlens_padded[j];
    const int32_t len = b.seqlen(j);
    if (len == 0) continue;
    for (int g = 0; g < s.kv_heads; ++g) {
      // The kv group's dk/dv: per query head a bf16 matmul output, summed in fp32, rounded once.
      std::vector<float> dk_sum(static_cast<size_t>(len) * d, 0.0f), dv_sum(dk_sum.size(), 0.0f);
      for (int h = g * s.group(); h < (g + 1) * s.group(); ++h) {
        const Probs pr = probs(s, len, start, h, q, k);
        const auto at = [&](int32_t i) { return ((start + i) * s.heads + h) * d; };
        const auto kv_at = [&](int32_t p) { return ((start + p) * s.kv_heads + g) * d; };
        // dP = bf16(dO V^T); dS = bf16(P (dP - rowsum(dP P))) (softmax backward in fp32).
        std::vector<float> ds(static_cast<size_t>(len) * len, 0.0f);
        for (int32_t i = 0; i < len; ++i) {
          const int32_t nk = keys_attended(s, i, len);
          std::vector<float> dp(nk);
          float rowsum = 0;
          for (int32_t p = 0; p < nk; ++p) {
            float acc = 0;
            for (int e = 0; e < d; ++e) acc += static_cast<float>(dout[at(i) + e]) * static_cast<float>(v[kv_at(p) + e]);
            dp[p] = bf(acc);
            rowsum += dp[p] * pr.p[static_cast<size_t>(i) * len + p];
          }
          for (int32_t p = 0; p < nk; ++p) {
            const float prob = pr.p[static_cast<size_t>(i) * len + p];
            ds[static_cast<size_t>(i) * len + p] = bf(prob * (dp[p] - rowsum));
          }
        }
        // dQ = bf16(dS Ks); this head's dK = bf16(bf16(dS^T Q) * scale) (the backward of
        // k / sqrt(d)), dV = bf16(P^T dO).
        for (int32_t i = 0; i < len; ++i)
          for (int e = 0; e < d; ++e) {
            float acc = 0;
            for (int32_t p = 0; p < keys_attended(s, i, len); ++p)
              acc += ds[static_cast<size_t>(i) * len + p] * pr.ks[p * d + e];
            dq[at(i) + e] = bf(acc);
          }
        for (int32_t p = 0; p < len; ++p)
          for (int e = 0; e < d; ++e) {
            float acc_k = 0, acc_v = 0;
            for (int32_t i = s.causal ? p : 0; i < len; ++i) {
              acc_k += ds[static_cast<size_t>(i) * len + p] * static_cast<float>(q[at(i) + e]);
              acc_v += pr.p[static_cast<size_t>(i) * len + p] * static_cast<float>(dout[at(i) + e]);
            }
            dk_sum[p * d + e] += bf(bf(acc_k) * scale);
            dv_sum[p * d + e] += bf(acc_v);
          }
      }
      for (int32_t p = 0; p < len; ++p)
        for (int e = 0; e < d; ++e) {
          dk[((start + p) * s.kv_heads + g) * d + e] = bf(dk_sum[p * d + e]);
          dv[((start + p) * s.kv_heads + g) * d + e] = bf(dv_sum[p * d + e]);
        }
    }
  }
}

Bf16Rule bf16_rule(std::span<const double> ref, std::span<const double> naive, OutType out) {
  DCP_CHECK(ref.size() == naive.size(), "bf16_rule: reference has ", ref.size(), " elements, naive ", naive.size());
  const auto o = [out](double x) {
    return out == OutType::bf16 ? round_bf16(x) : static_cast<double>(static_cast<float>(x));
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
  std::snprintf(buf, sizeof buf, "%s: max_abs=%.3g %s tol=%.3g (2 x naive bf16 %.3g + floor %.3g): %s", name.c_str(),
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
