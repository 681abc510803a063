// The host references' loops (attn/host_loops.h) and the fp32 rounding of the naive algorithm
// (round_half on a float) give, bit for bit, what the textbook element-at-a-time loops and the
// float64 rounding give: the references' speed-ups must not move a single result. Seeded random
// values over many exponents with signed zeros among them, lengths around the eight-wide blocks
// (tails, empty inputs), the rounding's edge cases (ties, subnormals, the largest bf16,
// overflow, inf, NaN), and the four references whole against their textbook loops.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <vector>

#include "attn/attn_ref.h"
#include "attn/bf16_rule.h"
#include "attn/host_loops.h"
#include "flash_cases.h"

namespace dcp::attn {
namespace {

// Random values over 25 binades, one in eight of them +0 or -0.
template <class T>
std::vector<T> random_values(size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> mant(-1.0, 1.0);
  std::uniform_int_distribution<int> expo(-12, 12), pick(0, 15);
  std::vector<T> x(n);
  for (auto& v : x) {
    const int z = pick(rng);
    v = z == 0 ? T(0) : z == 1 ? -T(0) : static_cast<T>(std::ldexp(mant(rng), expo(rng)));
  }
  return x;
}

// Bitwise equality that also holds for NaN and tells -0 from +0.
template <class T>
bool same_bits(T a, T b) {
  if constexpr (sizeof(T) == 4) return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
  else return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b);
}

template <class T>
void check_loops(uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (int d : {1, 3, 7, 8, 9, 24, 64, 127, 128}) {
    for (int64_t rows : {0, 1, 5, 8, 17, 40}) {
      const auto x = random_values<T>(static_cast<size_t>(rows) * d, rng);
      const auto a = random_values<T>(static_cast<size_t>(d), rng);
      std::vector<T> xt;
      host::transpose(x.data(), rows, d, xt);
      for (int64_t r = 0; r < rows; ++r)
        for (int e = 0; e < d; ++e) ASSERT_TRUE(same_bits(xt[e * rows + r], x[r * d + e]));
      // dots over a prefix of the rows, as the causal rows use them.
      for (int64_t n : {rows, rows / 2}) {
        std::vector<T> got(static_cast<size_t>(n) + 1, T(-7));
        host::dots(a.data(), xt.data(), rows, n, d, got.data());
        for (int64_t p = 0; p < n; ++p) {
          T want = 0;
          for (int e = 0; e < d; ++e) want += a[e] * x[p * d + e];
          ASSERT_TRUE(same_bits(got[p], want)) << "d " << d << " rows " << rows << " p " << p;
        }
        EXPECT_EQ(got[n], T(-7)) << "dots wrote past n";
      }
      // A chain of axpys in a fixed order: acc_e = ((0 + w0 x0e) + w1 x1e) + ...
      const auto w = random_values<T>(static_cast<size_t>(rows), rng);
      std::vector<T> acc(static_cast<size_t>(d) + 1, T(0)), want(static_cast<size_t>(d), T(0));
      acc[d] = T(-7);
      for (int64_t r = 0; r < rows; ++r) {
        host::axpy(w[r], &x[r * d], acc.data(), d);
        for (int e = 0; e < d; ++e) want[e] += w[r] * x[r * d + e];
      }
      for (int e = 0; e < d; ++e) ASSERT_TRUE(same_bits(acc[e], want[e])) << "d " << d << " e " << e;
      EXPECT_EQ(acc[d], T(-7)) << "axpy wrote past d";
    }
  }
}

TEST(HostLoops, FloatChainsAreTheTextbookLoopsBitForBit) { check_loops<float>(3); }
TEST(HostLoops, DoubleChainsAreTheTextbookLoopsBitForBit) { check_loops<double>(4); }

TEST(HostLoops, HeadRowsGathersOneHead) {
  const int heads = 3, d = 5;
  const int64_t tokens = 6;
  std::vector<double> x(static_cast<size_t>(tokens * heads * d));
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.1 * static_cast<double>(i) + 1.0 / 3.0;
  std::vector<float> rows;
  host::head_rows(x, 2, 3, heads, 1, d, rows);
  ASSERT_EQ(rows.size(), 15u);
  for (int r = 0; r < 3; ++r)
    for (int e = 0; e < d; ++e) EXPECT_EQ(rows[r * d + e], static_cast<float>(x[((2 + r) * heads + 1) * d + e]));
}

// round_half(float) against round_half(double) of the same value, to bf16 (fp16 takes the
// double path by construction): every exponent, random significands, the bit patterns next to
// every rounding tie, and the special values.
TEST(HostLoops, FloatRoundingIsTheDoubleRoundingBitForBit) {
  std::mt19937_64 rng(5);
  std::vector<uint32_t> bits;
  for (uint32_t sign : {0u, 0x80000000u})
    for (uint32_t e = 0; e <= 0xffu; ++e) {
      const uint32_t base = sign | (e << 23);
      for (uint32_t m : {0u, 1u, 0x7fffu, 0x8000u, 0x8001u, 0x17fffu, 0x18000u, 0x18001u, 0x7f8000u, 0x7fffffu,
                         0x400000u, 0x3f8000u})
        bits.push_back(base | m);
      for (int i = 0; i < 64; ++i) bits.push_back(base | static_cast<uint32_t>(rng() & 0x7fffffu));
    }
  for (uint32_t b : bits) {
    const float x = std::bit_cast<float>(b);
    const float want = static_cast<float>(round_half(static_cast<double>(x), Half::bf16));
    const float got = round_half(x, Half::bf16);
    ASSERT_TRUE(same_bits(got, want) || (std::isnan(got) && std::isnan(want)))
        << std::hex << "bits 0x" << b << ": " << got << " vs " << want;
  }
  // The largest finite bf16 stays; the next tie above it rounds to inf, as round_bf16 does.
  const float max_bf16 = std::bit_cast<float>(0x7f7f0000u);
  EXPECT_EQ(round_half(max_bf16, Half::bf16), max_bf16);
  EXPECT_EQ(round_half(std::bit_cast<float>(0x7f7f8000u), Half::bf16), std::numeric_limits<float>::infinity());
}

// --- the four references against their textbook loops (the code before host_loops.h) ---

using Spans = std::span<const double>;

void textbook_fwd_ref(const ThdBatch& bq, const ThdBatch& bk, const AttnShape& s, Spans q, Spans k, Spans v,
                      std::span<double> out, std::span<double> lse) {
  begin_fwd(bq, bk, s, q, k, v, out, lse);
  const int d = s.head_dim;
  for (int j = 0; j < bq.batch(); ++j) {
    const int64_t sq = bq.cu_seqlens_padded[j], sk = bk.cu_seqlens_padded[j];
    const int32_t lq = bq.seqlen(j), lk = bk.seqlen(j);
    for (int32_t i = 0; i < lq; ++i) {
      const int32_t nk = keys_attended(s, i, lq, lk);
      if (nk == 0) continue;
      for (int h = 0; h < s.heads; ++h) {
        const int g = h / s.group();
        std::vector<double> sc(nk);
        double m = -std::numeric_limits<double>::infinity();
        for (int32_t p = 0; p < nk; ++p) {
          double acc = 0;
          for (int e = 0; e < d; ++e) acc += q[((sq + i) * s.heads + h) * d + e] * k[((sk + p) * s.kv_heads + g) * d + e];
          sc[p] = s.scale() * acc;
          m = std::max(m, sc[p]);
        }
        double sum = 0;
        for (int32_t p = 0; p < nk; ++p) sum += std::exp(sc[p] - m);
        const double l = m + std::log(sum);
        lse[(sq + i) * s.heads + h] = l;
        for (int32_t p = 0; p < nk; ++p)
          for (int e = 0; e < d; ++e)
            out[((sq + i) * s.heads + h) * d + e] += std::exp(sc[p] - l) * v[((sk + p) * s.kv_heads + g) * d + e];
      }
    }
  }
}

void textbook_bwd_ref(const ThdBatch& bq, const ThdBatch& bk, const AttnShape& s, Spans q, Spans k, Spans v,
                      Spans out, Spans lse, Spans dout, std::span<double> dq, std::span<double> dk,
                      std::span<double> dv) {
  begin_bwd(bq, bk, s, q, k, v, dout, dq, dk, dv);
  const int d = s.head_dim;
  const double scale = s.scale();
  for (int j = 0; j < bq.batch(); ++j) {
    const int64_t sq = bq.cu_seqlens_padded[j], sk = bk.cu_seqlens_padded[j];
    const int32_t lq = bq.seqlen(j), lk = bk.seqlen(j);
    for (int32_t i = 0; i < lq; ++i)
      for (int h = 0; h < s.heads; ++h) {
        const int g = h / s.group();
        const int64_t qr = ((sq + i) * s.heads + h) * d;
        double delta = 0;
        for (int e = 0; e < d; ++e) delta += dout[qr + e] * out[qr + e];
        for (int32_t p = 0; p < keys_attended(s, i, lq, lk); ++p) {
          const int64_t kr = ((sk + p) * s.kv_heads + g) * d;
          double qk = 0, dp = 0;
          for (int e = 0; e < d; ++e) qk += q[qr + e] * k[kr + e];
          for (int e = 0; e < d; ++e) dp += dout[qr + e] * v[kr + e];
          const double prob = std::exp(scale * qk - lse[(sq + i) * s.heads + h]);
          const double ds = prob * (dp - delta);
          for (int e = 0; e < d; ++e) {
            dq[qr + e] += scale * ds * k[kr + e];
            dk[kr + e] += scale * ds * q[qr + e];
            dv[kr + e] += prob * dout[qr + e];
          }
        }
      }
  }
}

// The naive 16-bit algorithm's probabilities of one (sequence, query head): scaled keys, P
// [lq x lk] (masked entries 0) and the fp32 lse.
struct TextbookProbs {
  std::vector<float> ks, p, lse;
};

TextbookProbs textbook_probs(const AttnShape& s, int64_t sq, int64_t sk, int32_t lq, int32_t lk, int h, Spans q,
                             Spans k, Half half) {
  const auto rd = [half](float x) { return static_cast<float>(round_half(static_cast<double>(x), half)); };
  const int d = s.head_dim, g = h / s.group();
  const float scale = static_cast<float>(s.scale());
  TextbookProbs r;
  r.ks.resize(static_cast<size_t>(lk) * d);
  r.p.assign(static_cast<size_t>(lq) * lk, 0.0f);
  r.lse.assign(lq, -std::numeric_limits<float>::infinity());
  for (int32_t p = 0; p < lk; ++p)
    for (int e = 0; e < d; ++e) r.ks[p * d + e] = rd(static_cast<float>(k[((sk + p) * s.kv_heads + g) * d + e]) * scale);
  for (int32_t i = 0; i < lq; ++i) {
    const int32_t nk = keys_attended(s, i, lq, lk);
    if (nk == 0) continue;
    std::vector<float> row(nk);
    float m = -std::numeric_limits<float>::infinity();
    for (int32_t p = 0; p < nk; ++p) {
      float acc = 0;
      for (int e = 0; e < d; ++e) acc += static_cast<float>(q[((sq + i) * s.heads + h) * d + e]) * r.ks[p * d + e];
      row[p] = rd(acc);
      m = std::max(m, row[p]);
    }
    float sum = 0;
    for (int32_t p = 0; p < nk; ++p) sum += std::exp(row[p] - m);
    r.lse[i] = m + std::log(sum);
    for (int32_t p = 0; p < nk; ++p) r.p[static_cast<size_t>(i) * lk + p] = rd(std::exp(row[p] - m) / sum);
  }
  return r;
}

void textbook_fwd_naive(const ThdBatch& bq, const ThdBatch& bk, const AttnShape& s, Half half, Spans q, Spans k,
                        Spans v, std::span<double> out, std::span<double> lse) {
  begin_fwd(bq, bk, s, q, k, v, out, lse);
  const auto rd = [half](float x) { return static_cast<float>(round_half(static_cast<double>(x), half)); };
  const int d = s.head_dim;
  for (int j = 0; j < bq.batch(); ++j) {
    const int64_t sq = bq.cu_seqlens_padded[j], sk = bk.cu_seqlens_padded[j];
    const int32_t lq = bq.seqlen(j), lk = bk.seqlen(j);
    for (int h = 0; h < s.heads; ++h) {
      const int g = h / s.group();
      const TextbookProbs pr = textbook_probs(s, sq, sk, lq, lk, h, q, k, half);
      for (int32_t i = 0; i < lq; ++i) {
        const int32_t nk = keys_attended(s, i, lq, lk);
        if (nk == 0) continue;
        lse[(sq + i) * s.heads + h] = pr.lse[i];
        for (int e = 0; e < d; ++e) {
          float acc = 0;
          for (int32_t p = 0; p < nk; ++p)
            acc += pr.p[static_cast<size_t>(i) * lk + p] * static_cast<float>(v[((sk + p) * s.kv_heads + g) * d + e]);
          out[((sq + i) * s.heads + h) * d + e] = rd(acc);
        }
      }
    }
  }
}

void textbook_bwd_naive(const ThdBatch& bq, const ThdBatch& bk, const AttnShape& s, Half half, Spans q, Spans k,
                        Spans v, Spans dout, std::span<double> dq, std::span<double> dk, std::span<double> dv) {
  begin_bwd(bq, bk, s, q, k, v, dout, dq, dk, dv);
  const auto rd = [half](float x) { return static_cast<float>(round_half(static_cast<double>(x), half)); };
  const int d = s.head_dim;
  const float scale = static_cast<float>(s.scale());
  for (int j = 0; j < bq.batch(); ++j) {
    const int64_t sq = bq.cu_seqlens_padded[j], sk = bk.cu_seqlens_padded[j];
    const int32_t lq = bq.seqlen(j), lk = bk.seqlen(j);
    if (lq == 0 || lk == 0) continue;
    for (int g = 0; g < s.kv_heads; ++g) {
      std::vector<float> dk_sum(static_cast<size_t>(lk) * d, 0.0f), dv_sum(dk_sum.size(), 0.0f);
      for (int h = g * s.group(); h < (g + 1) * s.group(); ++h) {
        const TextbookProbs pr = textbook_probs(s, sq, sk, lq, lk, h, q, k, half);
        const auto at = [&](int32_t i) { return ((sq + i) * s.heads + h) * d; };
        const auto kv_at = [&](int32_t p) { return ((sk + p) * s.kv_heads + g) * d; };
        std::vector<float> ds(static_cast<size_t>(lq) * lk, 0.0f);
        for (int32_t i = 0; i < lq; ++i) {
          const int32_t nk = keys_attended(s, i, lq, lk);
          std::vector<float> dp(nk);
          float rowsum = 0;
          for (int32_t p = 0; p < nk; ++p) {
            float acc = 0;
            for (int e = 0; e < d; ++e) acc += static_cast<float>(dout[at(i) + e]) * static_cast<float>(v[kv_at(p) + e]);
            dp[p] = rd(acc);
            rowsum += dp[p] * pr.p[static_cast<size_t>(i) * lk + p];
          }
          for (int32_t p = 0; p < nk; ++p)
            ds[static_cast<size_t>(i) * lk + p] = rd(pr.p[static_cast<size_t>(i) * lk + p] * (dp[p] - rowsum));
        }
        for (int32_t i = 0; i < lq; ++i)
          for (int e = 0; e < d; ++e) {
            float acc = 0;
            for (int32_t p = 0; p < keys_attended(s, i, lq, lk); ++p) acc += ds[static_cast<size_t>(i) * lk + p] * pr.ks[p * d + e];
            dq[at(i) + e] = rd(acc);
          }
        // Every query row, the masked ones included (their P and dS are 0).
        for (int32_t p = 0; p < lk; ++p)
          for (int e = 0; e < d; ++e) {
            float acc_k = 0, acc_v = 0;
            for (int32_t i = 0; i < lq; ++i) {
              acc_k += ds[static_cast<size_t>(i) * lk + p] * static_cast<float>(q[at(i) + e]);
              acc_v += pr.p[static_cast<size_t>(i) * lk + p] * static_cast<float>(dout[at(i) + e]);
            }
            dk_sum[p * d + e] += rd(rd(acc_k) * scale);
            dv_sum[p * d + e] += rd(acc_v);
          }
      }
      for (int32_t p = 0; p < lk; ++p)
        for (int e = 0; e < d; ++e) {
          dk[((sk + p) * s.kv_heads + g) * d + e] = rd(dk_sum[p * d + e]);
          dv[((sk + p) * s.kv_heads + g) * d + e] = rd(dv_sum[p * d + e]);
        }
    }
  }
}

void expect_same_bits(const std::vector<double>& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) ASSERT_TRUE(same_bits(got[i], want[i])) << what << "[" << i << "]: " << got[i] << " vs " << want[i];
}

// Causal and not, GQA, rectangular both ways (rows with no key; a sequence with no keys at all,
// after one with keys and first), empty and padded sequences, head dims on the eight-wide blocks
// and off them (9, 17), both 16-bit types; signed zeros among the (16-bit) inputs.
TEST(HostLoops, TheReferencesAreTheirTextbookLoopsBitForBit) {
  using testing::FlashCase;
  const std::vector<FlashCase> cases = {
      {"causal GQA, d=24", {37, 0, 70}, {}, {2, 0, 0}, 6, 3, 24, true},
      {"non-causal, d=9", {9, 20}, {}, {}, 2, 1, 9, false},
      {"causal len_q > len_k, no keys in one", {30, 12, 5}, {6, 0, 5}, {}, 4, 2, 16, true},
      {"causal len_q < len_k, fp16", {8, 33}, {40, 50}, {}, 2, 2, 17, true, Half::fp16},
      {"non-causal rectangular GQA", {12, 3}, {7, 21}, {}, 4, 1, 32, false},
      {"causal, the first sequence without keys", {6, 10}, {0, 12}, {}, 2, 1, 8, true},
  };
  for (const FlashCase& c : cases) {
    testing::FlashInputs in = testing::flash_inputs(c, 9);
    std::mt19937_64 rng(11);
    for (auto* x : {&in.q, &in.k, &in.v})
      for (double& e : *x)
        if (rng() % 11 == 0) e = rng() % 2 ? 0.0 : -0.0;
    std::vector<double> dout = global_tensor<double>(9, kDout, in.bq.total_tokens(), in.s.q_row());
    for (double& e : dout) e = rng() % 11 == 0 ? -0.0 : round_half(e, c.half);
    const size_t nq = in.q.size(), nk = in.k.size(), nl = static_cast<size_t>(in.bq.total_tokens() * in.s.heads);
    std::vector<double> o(nq), l(nl), o2(nq), l2(nl);
    attn_fwd_ref(in.bq, in.bk, in.s, in.q, in.k, in.v, o, l);
    textbook_fwd_ref(in.bq, in.bk, in.s, in.q, in.k, in.v, o2, l2);
    expect_same_bits(o, o2, c.what + ": ref out");
    expect_same_bits(l, l2, c.what + ": ref lse");
    std::vector<double> dq(nq), dk(nk), dv(nk), dq2(nq), dk2(nk), dv2(nk);
    attn_bwd_ref(in.bq, in.bk, in.s, in.q, in.k, in.v, o, l, dout, dq, dk, dv);
    textbook_bwd_ref(in.bq, in.bk, in.s, in.q, in.k, in.v, o, l, dout, dq2, dk2, dv2);
    expect_same_bits(dq, dq2, c.what + ": ref dq");
    expect_same_bits(dk, dk2, c.what + ": ref dk");
    expect_same_bits(dv, dv2, c.what + ": ref dv");
    attn_fwd_naive(in.bq, in.bk, in.s, c.half, in.q, in.k, in.v, o, l);
    textbook_fwd_naive(in.bq, in.bk, in.s, c.half, in.q, in.k, in.v, o2, l2);
    expect_same_bits(o, o2, c.what + ": naive out");
    expect_same_bits(l, l2, c.what + ": naive lse");
    attn_bwd_naive(in.bq, in.bk, in.s, c.half, in.q, in.k, in.v, dout, dq, dk, dv);
    textbook_bwd_naive(in.bq, in.bk, in.s, c.half, in.q, in.k, in.v, dout, dq2, dk2, dv2);
    expect_same_bits(dq, dq2, c.what + ": naive dq");
    expect_same_bits(dk, dk2, c.what + ": naive dk");
    expect_same_bits(dv, dv2, c.what + ": naive dv");
  }
}

}  // namespace
}  // namespace dcp::attn
