// The float64 reference attention checked against facts that do not depend on it: closed forms
// for tiny sequences, finite differences for the backward, GQA = MHA with repeated KV heads,
// and padding content that must never matter. Bad inputs give clear errors.
#include <gtest/gtest.h>

#include <cmath>

#include "attn_test_util.h"

namespace dcp::attn {
namespace {

using namespace dcp::attn::testing;

AttnShape shape(int heads, int kv_heads, int d, bool causal = true) {
  AttnShape s;
  s.heads = heads;
  s.kv_heads = kv_heads;
  s.head_dim = d;
  s.causal = causal;
  return s;
}

TEST(AttnRef, LengthOneAttendsOnlyItself) {
  const int32_t len[] = {1};
  const ThdBatch b = make_thd_batch(len, 2);  // 1 real row + 3 padding rows
  const AttnShape s = shape(2, 1, 4);
  const auto r = reference<double>(b, s, 11);
  for (int h = 0; h < 2; ++h) {
    double qk = 0;
    for (int e = 0; e < 4; ++e) qk += r.q[h * 4 + e] * r.k[e];
    EXPECT_NEAR(r.lse[h], qk * s.scale(), 1e-15);
    for (int e = 0; e < 4; ++e) EXPECT_EQ(r.out[h * 4 + e], r.v[e]);
  }
  EXPECT_EQ(r.lse[2], -INFINITY);  // padding row
}

TEST(AttnRef, TwoTokensMatchClosedForm) {
  const int32_t len[] = {2};
  const ThdBatch b = make_thd_batch(len, 1);
  const AttnShape s = shape(1, 1, 3);
  const auto r = reference<double>(b, s, 5);
  auto dot = [&](int i, int p) {
    double x = 0;
    for (int e = 0; e < 3; ++e) x += r.q[i * 3 + e] * r.k[p * 3 + e];
    return x * s.scale();
  };
  const double s0 = dot(1, 0), s1 = dot(1, 1);
  const double l = std::log(std::exp(s0) + std::exp(s1));
  EXPECT_NEAR(r.lse[1], l, 1e-14);
  for (int e = 0; e < 3; ++e)
    EXPECT_NEAR(r.out[3 + e], std::exp(s0 - l) * r.v[e] + std::exp(s1 - l) * r.v[3 + e], 1e-14);
}

// L = sum(dout * out); central differences on a sample of q, k, v entries.
TEST(AttnRef, BackwardMatchesFiniteDifferences) {
  const int32_t len[] = {5, 3};
  const ThdBatch b = make_thd_batch(len, 1);
  for (bool causal : {true, false}) {
    const AttnShape s = shape(4, 2, 6, causal);
    auto r = reference<double>(b, s, 9);
    auto loss = [&](const std::vector<double>& q, const std::vector<double>& k,
                    const std::vector<double>& v) {
      std::vector<double> out(r.out.size()), lse(r.lse.size());
      attn_fwd_ref(b, s, q, k, v, out, lse);
      double acc = 0;
      for (size_t i = 0; i < out.size(); ++i) acc += out[i] * r.dout[i];
      return acc;
    };
    const double h = 1e-6;
    auto check = [&](std::vector<double>& x, const std::vector<double>& grad, const char* name) {
      for (size_t i = 0; i < x.size(); i += 7) {
        const double x0 = x[i];
        x[i] = x0 + h;
        const double lp = loss(r.q, r.k, r.v);
        x[i] = x0 - h;
        const double lm = loss(r.q, r.k, r.v);
        x[i] = x0;
        EXPECT_NEAR(grad[i], (lp - lm) / (2 * h), 1e-7) << name << "[" << i << "] causal=" << causal;
      }
    };
    check(r.q, r.dq, "dq");
    check(r.k, r.dk, "dk");
    check(r.v, r.dv, "dv");
  }
}

TEST(AttnRef, GqaEqualsMhaWithRepeatedKvHeads) {
  const int32_t len[] = {6, 9};
  const ThdBatch b = make_thd_batch(len, 1);
  const AttnShape gqa = shape(4, 2, 5), mha = shape(4, 4, 5);
  const auto r = reference<double>(b, gqa, 21);
  const int64_t t = b.total_tokens();
  std::vector<double> k4(t * 4 * 5), v4(t * 4 * 5);
  for (int64_t row = 0; row < t; ++row)
    for (int h = 0; h < 4; ++h)
      for (int e = 0; e < 5; ++e) {
        k4[(row * 4 + h) * 5 + e] = r.k[(row * 2 + h / 2) * 5 + e];
        v4[(row * 4 + h) * 5 + e] = r.v[(row * 2 + h / 2) * 5 + e];
      }
  std::vector<double> out(r.out.size()), lse(r.lse.size()), dq(out.size()), dk4(k4.size()),
      dv4(v4.size());
  attn_fwd_ref(b, mha, r.q, k4, v4, out, lse);
  attn_bwd_ref(b, mha, r.q, k4, v4, out, lse, r.dout, dq, dk4, dv4);
  for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], r.out[i], 1e-14);
  for (size_t i = 0; i < dq.size(); ++i) ASSERT_NEAR(dq[i], r.dq[i], 1e-14);
  // GQA's dK of kv head g = sum of MHA's dK over the query heads that share it.
  for (int64_t row = 0; row < t; ++row)
    for (int g = 0; g < 2; ++g)
      for (int e = 0; e < 5; ++e) {
        const double sum = dk4[(row * 4 + 2 * g) * 5 + e] + dk4[(row * 4 + 2 * g + 1) * 5 + e];
        ASSERT_NEAR(r.dk[(row * 2 + g) * 5 + e], sum, 1e-14);
      }
}

// TE #3331 in reference form: whatever sits in padding rows (between sequences and at the tail)
// changes no real output, and padding rows get nothing.
TEST(AttnRef, PaddingContentNeverMatters) {
  const int32_t len[] = {3, 6, 2};
  const int32_t extra[] = {4, 0, 8};
  const ThdBatch b = make_thd_batch(len, 2, extra);
  const AttnShape s = shape(2, 1, 4);
  auto a = reference<double>(b, s, 1);
  auto z = a;
  const auto real = real_token_mask(b);
  for (int64_t t = 0; t < b.total_tokens(); ++t) {
    if (real[t]) continue;
    for (int e = 0; e < 4; ++e) {
      z.k[t * 4 + e] = 1e3;
      z.v[t * 4 + e] = -1e3;
    }
  }
  attn_fwd_ref(b, s, z.q, z.k, z.v, z.out, z.lse);
  attn_bwd_ref(b, s, z.q, z.k, z.v, z.out, z.lse, z.dout, z.dq, z.dk, z.dv);
  EXPECT_EQ(a.out, z.out);
  EXPECT_EQ(a.dq, z.dq);
  for (int64_t t = 0; t < b.total_tokens(); ++t)
    for (int e = 0; e < 4; ++e) {
      if (real[t]) {  // real keys' gradients do not see the padding either
        ASSERT_EQ(z.dk[t * 4 + e], a.dk[t * 4 + e]) << "row " << t;
        ASSERT_EQ(z.dv[t * 4 + e], a.dv[t * 4 + e]) << "row " << t;
      } else {
        ASSERT_EQ(z.dk[t * 4 + e], 0.0) << "row " << t;
        ASSERT_EQ(z.dv[t * 4 + e], 0.0) << "row " << t;
      }
    }
}

// Rectangular problems (queries and keys from different batches) against the square reference:
// with bottom-right alignment, query i of len_q is query i + len_k - len_q of a square problem
// over the keys, so the rectangular forward and backward equal the square ones restricted to
// those rows (queries placed there, dout zero on the others); with len_q > len_k the first
// len_q - len_k queries attend nothing and the rest are the square problem's rows.
TEST(AttnRef, RectangularEqualsTheSquareProblemsRows) {
  for (const bool causal : {true, false}) {
    for (const auto& [lq, lk] : std::vector<std::pair<int32_t, int32_t>>{{5, 12}, {12, 12}, {12, 5}, {3, 0}}) {
      if (!causal && lq > lk) continue;  // non-causal: every query attends all keys, no square form
      const AttnShape s = shape(4, 2, 8, causal);
      const int32_t len_q[] = {lq}, len_k[] = {lk};
      const ThdBatch bq = make_thd_batch(len_q, 1), bk = make_thd_batch(len_k, 1);
      const int64_t tq = bq.total_tokens(), tk = bk.total_tokens();
      const auto q = global_tensor<double>(3, kQ, tq, s.q_row());
      const auto k = global_tensor<double>(3, kK, tk, s.kv_row());
      const auto v = global_tensor<double>(3, kV, tk, s.kv_row());
      const auto dout = global_tensor<double>(3, kDout, tq, s.q_row());
      std::vector<double> out(q.size()), lse(tq * s.heads), dq(q.size()), dk(k.size()), dv(v.size());
      attn_fwd_ref(bq, bk, s, q, k, v, out, lse);
      attn_bwd_ref(bq, bk, s, q, k, v, out, lse, dout, dq, dk, dv);
      // The square problem over the keys: its row r = i + lk - lq holds query i (for r >= 0).
      const int64_t shift = static_cast<int64_t>(lk) - lq;
      std::vector<double> sq(tk * s.q_row(), 0.0), sdout(sq.size(), 0.0);
      for (int32_t i = 0; i < lq; ++i)
        if (i + shift >= 0 && i + shift < lk)
          for (int64_t e = 0; e < s.q_row(); ++e) {
            sq[(i + shift) * s.q_row() + e] = q[i * s.q_row() + e];
            sdout[(i + shift) * s.q_row() + e] = dout[i * s.q_row() + e];
          }
      std::vector<double> so(sq.size()), sl(tk * s.heads), sdq(sq.size()), sdk(k.size()), sdv(v.size());
      if (lk > 0) {
        attn_fwd_ref(bk, s, sq, k, v, so, sl);
        attn_bwd_ref(bk, s, sq, k, v, so, sl, sdout, sdq, sdk, sdv);
      }
      for (int32_t i = 0; i < lq; ++i)
        for (int h = 0; h < s.heads; ++h) {
          const int64_t r = i + shift;
          if (r < 0) {  // attends nothing
            EXPECT_EQ(lse[i * s.heads + h], -INFINITY) << lq << "x" << lk << " row " << i;
            for (int e = 0; e < s.head_dim; ++e) EXPECT_EQ(out[(i * s.heads + h) * s.head_dim + e], 0.0);
            continue;
          }
          EXPECT_NEAR(lse[i * s.heads + h], sl[r * s.heads + h], 1e-13);
          for (int e = 0; e < s.head_dim; ++e) {
            EXPECT_NEAR(out[(i * s.heads + h) * s.head_dim + e], so[(r * s.heads + h) * s.head_dim + e], 1e-13);
            EXPECT_NEAR(dq[(i * s.heads + h) * s.head_dim + e], sdq[(r * s.heads + h) * s.head_dim + e], 1e-13);
          }
        }
      for (size_t x = 0; x < dk.size(); ++x) {
        EXPECT_NEAR(dk[x], sdk[x], 1e-13) << (causal ? "causal " : "") << lq << "x" << lk;
        EXPECT_NEAR(dv[x], sdv[x], 1e-13);
      }
    }
  }
}

TEST(AttnRef, RectangularNeedsTheSameSequenceCount) {
  const int32_t a[] = {4, 4}, b1[] = {4};
  const ThdBatch bq = make_thd_batch(a, 1), bk = make_thd_batch(b1, 1);
  const AttnShape s = shape(1, 1, 4);
  std::vector<double> q(bq.total_tokens() * 4), k(bk.total_tokens() * 4), out(q.size()), lse(bq.total_tokens());
  EXPECT_THROW(attn_fwd_ref(bq, bk, s, q, k, k, out, lse), Error);
}

TEST(AttnRef, BadInputsThrowClearErrors) {
  const int32_t len[] = {4};
  ThdBatch b = make_thd_batch(len, 1);
  std::vector<double> q(4 * 3 * 2), k(4 * 2 * 2), out(q.size()), lse(4 * 3);
  try {
    attn_fwd_ref(b, shape(3, 2, 2), q, k, k, out, lse);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("heads=3 is not divisible by kv_heads=2"),
              std::string::npos)
        << e.what();
  }
  ThdBatch bad = b;
  bad.cu_seqlens = {0, 5};  // 5 real tokens in 4 padded rows
  EXPECT_THROW(attn_fwd_ref(bad, shape(2, 2, 2), q, k, k, out, lse), InputError);
  std::vector<double> q2(4 * 2 * 2), out2(q2.size()), lse2(4 * 2), kshort(3);
  EXPECT_THROW(attn_fwd_ref(b, shape(2, 2, 2), q2, kshort, k, out2, lse2), Error);
}

}  // namespace
}  // namespace dcp::attn
