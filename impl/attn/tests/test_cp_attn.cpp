// Context-parallel attention on the thread backend equals the single-rank float64 reference:
// output, LSE, dQ, dK, dV for CP in {1, 2, 4, 8}, ring and all-gather, float64 and float32,
// on the varlen case table (attn_test_util.h). Also: the ring step types of §4.2 skip only
// blocks with no allowed (query, key) pair, runs are bitwise repeatable, and bad inputs throw.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "attn/compare.h"
#include "attn/cp_attn.h"
#include "attn/tolerances.h"
#include "attn_test_util.h"
#include "comm/thread_comm.h"

namespace dcp::attn {
namespace {

using namespace dcp::attn::testing;

constexpr uint64_t kSeed = 20260522;

// Global results of a CP run, assembled from every rank's shard (each rank writes its own rows).
struct CpResult {
  std::vector<double> out, lse, dq, dk, dv;
};

template <typename T>
void scatter_rows(const std::vector<T>& local, const std::vector<int64_t>& rows, int64_t row,
                  std::vector<double>& global) {
  for (size_t t = 0; t < rows.size(); ++t)
    for (int64_t e = 0; e < row; ++e) global[rows[t] * row + e] = local[t * row + e];
}

template <typename T>
CpResult run_cp(CpAlgo algo, const ThdBatch& b, const AttnShape& s, int cp, uint64_t seed) {
  const int64_t t = b.total_tokens();
  CpResult res{std::vector<double>(t * s.q_row()), std::vector<double>(t * s.heads),
               std::vector<double>(t * s.q_row()), std::vector<double>(t * s.kv_row()),
               std::vector<double>(t * s.kv_row())};
  comm::CommOptions opt;
  opt.deadline = std::chrono::seconds(30);
  comm::run_threads(cp, [&](comm::Communicator& g) {
    const int r = g.rank();
    const auto q = local_tensor<T>(seed, kQ, b, cp, r, s.q_row());
    const auto k = local_tensor<T>(seed, kK, b, cp, r, s.kv_row());
    const auto v = local_tensor<T>(seed, kV, b, cp, r, s.kv_row());
    const auto dout = local_tensor<T>(seed, kDout, b, cp, r, s.q_row());
    std::vector<T> out(q.size()), lse(q.size() / s.head_dim), dq(q.size()), dk(k.size()),
        dv(v.size());
    cp_attn_fwd_fn<T>(algo)(g, b, s, q, k, v, out, lse);
    cp_attn_bwd_fn<T>(algo)(g, b, s, q, k, v, out, lse, dout, dq, dk, dv);
    const auto rows = zigzag_rows(b, cp, r);
    scatter_rows(out, rows, s.q_row(), res.out);
    scatter_rows(lse, rows, s.heads, res.lse);
    scatter_rows(dq, rows, s.q_row(), res.dq);
    scatter_rows(dk, rows, s.kv_row(), res.dk);
    scatter_rows(dv, rows, s.kv_row(), res.dv);
  }, opt);
  return res;
}

struct Param {
  CpAlgo algo;
  bool f64;
  int cp;
  int case_index;
};

class CpAttn : public ::testing::TestWithParam<Param> {};

template <typename T>
void check_against_reference(const Param& p) {
  const auto c = varlen_cases(p.cp)[p.case_index];
  const ThdBatch b = case_batch(c, p.cp);
  const AttnShape s = case_shape(c);
  const RefResult ref = reference<T>(b, s, kSeed);
  const CpResult got = run_cp<T>(p.algo, b, s, p.cp, kSeed);
  const Tolerance tol = tolerance_for<T>();
  const std::string where = std::string(cp_algo_name(p.algo)) + " cp=" + std::to_string(p.cp) +
                            " case '" + c.what + "'";
  const std::pair<const char*, std::pair<const std::vector<double>*, const std::vector<double>*>>
      tensors[] = {{"out", {&ref.out, &got.out}}, {"lse", {&ref.lse, &got.lse}},
                   {"dq", {&ref.dq, &got.dq}},    {"dk", {&ref.dk, &got.dk}},
                   {"dv", {&ref.dv, &got.dv}}};
  for (const auto& [name, pr] : tensors) {
    const auto cmp = compare_to_ref<double>(*pr.first, *pr.second);
    EXPECT_TRUE(cmp.within(tol.rel_to_max))
        << where << ": " << cmp.report(name) << " (tolerance " << tol.rel_to_max << ": "
        << tol.why << ")";
  }
  // Padding rows: exactly zero output and gradients, lse = -inf; real rows attend something.
  const auto real = real_token_mask(b);
  for (int64_t t = 0; t < b.total_tokens(); ++t) {
    for (int h = 0; h < s.heads; ++h) {
      const double l = got.lse[t * s.heads + h];
      if (real[t]) {
        ASSERT_TRUE(std::isfinite(l)) << where << " row " << t;
      } else {
        ASSERT_EQ(l, -std::numeric_limits<double>::infinity()) << where << " row " << t;
      }
    }
    if (real[t]) continue;
    for (int64_t e = 0; e < s.q_row(); ++e) {
      ASSERT_EQ(got.out[t * s.q_row() + e], 0.0) << where << " padding row " << t;
      ASSERT_EQ(got.dq[t * s.q_row() + e], 0.0) << where << " padding row " << t;
    }
    for (int64_t e = 0; e < s.kv_row(); ++e) {
      ASSERT_EQ(got.dk[t * s.kv_row() + e], 0.0) << where << " padding key row " << t;
      ASSERT_EQ(got.dv[t * s.kv_row() + e], 0.0) << where << " padding key row " << t;
    }
  }
}

TEST_P(CpAttn, MatchesFloat64Reference) {
  const Param p = GetParam();
  if (p.f64) {
    check_against_reference<double>(p);
  } else {
    check_against_reference<float>(p);
  }
}

std::vector<Param> all_params(CpAlgo algo) {
  std::vector<Param> out;
  const int n_cases = static_cast<int>(varlen_cases(1).size());
  for (bool f64 : {true, false})
    for (int cp : {1, 2, 4, 8})
      for (int c = 0; c < n_cases; ++c) out.push_back({algo, f64, cp, c});
  return out;
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  return std::string(info.param.f64 ? "f64" : "f32") + "_cp" + std::to_string(info.param.cp) +
         "_case" + std::to_string(info.param.case_index);
}

INSTANTIATE_TEST_SUITE_P(RingAttn, CpAttn, ::testing::ValuesIn(all_params(CpAlgo::ring)),
                         param_name);
INSTANTIATE_TEST_SUITE_P(AllGatherAttn, CpAttn,
                         ::testing::ValuesIn(all_params(CpAlgo::all_gather)), param_name);

TEST(RingSteps, TypesForCp2AndCp4) {
  // cp=2: rank 0 holds chunks 0,3; rank 1 holds chunks 1,2.
  EXPECT_EQ(ring_step_type(2, 0, 0, true), RingStep::diagonal);
  EXPECT_EQ(ring_step_type(2, 0, 1, true), RingStep::upper);  // src 1 > 0
  EXPECT_EQ(ring_step_type(2, 1, 0, true), RingStep::diagonal);
  EXPECT_EQ(ring_step_type(2, 1, 1, true), RingStep::lower);  // src 0 < 1
  // cp=4, rank 2: steps hold src 2, 1, 0, 3.
  EXPECT_EQ(ring_step_type(4, 2, 1, true), RingStep::lower);
  EXPECT_EQ(ring_step_type(4, 2, 2, true), RingStep::lower);
  EXPECT_EQ(ring_step_type(4, 2, 3, true), RingStep::upper);
  EXPECT_EQ(ring_step_type(4, 2, 3, false), RingStep::full);
}

// The parts of the (local Q x src KV) block a step type skips contain no allowed pair, and the
// parts it computes need no causal mask (except the diagonal): the §4.2 argument, checked.
TEST(RingSteps, SkippedBlocksHaveNoAllowedPairs) {
  for (int cp : {2, 4, 8}) {
    const int32_t lengths[] = {4 * cp, 4 * cp - 1, 2 * cp + 1};
    const ThdBatch b = make_thd_batch(lengths, cp);
    for (int r = 0; r < cp; ++r) {
      const auto qpos = zigzag_positions(b, cp, r);
      for (int step = 1; step < cp; ++step) {
        const int src = (r - step + cp) % cp;
        const auto kpos = zigzag_positions(b, cp, src);
        const RingStep type = ring_step_type(cp, r, step, true);
        for (int j = 0; j < b.batch(); ++j) {
          const int64_t c = b.padded_seqlen(j) / (2 * cp), ls = b.cu_seqlens_padded[j] / cp;
          for (int64_t i = ls; i < ls + 2 * c; ++i) {
            for (int64_t p = ls; p < ls + 2 * c; ++p) {
              const bool q_back = i >= ls + c, k_back = p >= ls + c;
              const bool computed = type == RingStep::lower ? !k_back : q_back;
              const bool causal_ok = kpos[p] <= qpos[i];
              if (!computed) {
                ASSERT_FALSE(causal_ok) << "cp=" << cp << " r=" << r << " step=" << step;
              } else {
                ASSERT_TRUE(causal_ok) << "cp=" << cp << " r=" << r << " step=" << step;
              }
            }
          }
        }
      }
    }
  }
}

TEST(CpAttnDeterminism, TwoRingRunsAreBitwiseIdentical) {
  const auto c = varlen_cases(4)[4];
  const ThdBatch b = case_batch(c, 4);
  const AttnShape s = case_shape(c);
  const auto a = run_cp<float>(CpAlgo::ring, b, s, 4, 7);
  const auto z = run_cp<float>(CpAlgo::ring, b, s, 4, 7);
  EXPECT_EQ(std::memcmp(a.out.data(), z.out.data(), a.out.size() * sizeof(double)), 0);
  EXPECT_EQ(std::memcmp(a.dk.data(), z.dk.data(), a.dk.size() * sizeof(double)), 0);
}

// TE #1930: a length-7 sequence at cp=2 must not be treated as 6 (its last token attends and is
// attended); TE #3331: tail padding content never reaches real outputs.
TEST(CpAttnRegressions, LengthSevenAtCp2KeepsItsLastToken) {
  const int32_t lengths[] = {7};
  const int32_t extra[] = {8};  // plus a tail of padding
  const ThdBatch b = make_thd_batch(lengths, 2, extra);
  AttnShape s;
  s.heads = 1;
  s.kv_heads = 1;
  s.head_dim = 4;
  const RefResult ref = reference<double>(b, s, 3);
  const CpResult got = run_cp<double>(CpAlgo::ring, b, s, 2, 3);
  // Row 6 is real: finite lse, and its output differs from the 6-token prefix's attention.
  EXPECT_TRUE(std::isfinite(got.lse[6]));
  EXPECT_NEAR(got.lse[6], ref.lse[6], 1e-12);
  for (int e = 0; e < 4; ++e) EXPECT_NEAR(got.out[6 * 4 + e], ref.out[6 * 4 + e], 1e-12);
  // Key row 6 receives gradient (someone attends it); padding key rows do not.
  double g6 = 0;
  for (int e = 0; e < 4; ++e) g6 += std::abs(got.dv[6 * 4 + e]);
  EXPECT_GT(g6, 0.0);
  for (int64_t t = 7; t < b.total_tokens(); ++t)
    for (int e = 0; e < 4; ++e) ASSERT_EQ(got.dv[t * 4 + e], 0.0) << "padding key row " << t;
}

TEST(CpAttnErrors, BadInputsThrowClearErrors) {
  const int32_t lengths[] = {3};
  const ThdBatch b2 = make_thd_batch(lengths, 2);  // padded to 4: not divisible by 2*4
  AttnShape s;
  s.heads = 3;
  s.kv_heads = 2;
  s.head_dim = 4;
  EXPECT_THROW(comm::run_threads(4, [&](comm::Communicator& g) {
                 std::vector<double> q(2 * 3 * 4), k(2 * 2 * 4), o(q.size()), l(2 * 3);
                 ring_attn_fwd<double>(g, b2, s, q, k, k, o, l);
               }),
               InputError);
  s.heads = 4;
  try {
    comm::run_threads(4, [&](comm::Communicator& g) {
      std::vector<double> q(2 * 4 * 4), k(2 * 2 * 4), o(q.size()), l(2 * 4);
      allgather_attn_fwd<double>(g, b2, s, q, k, k, o, l);
    });
    FAIL() << "expected an error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("not divisible by 2*cp=8"), std::string::npos)
        << e.what();
  }
  // Wrong tensor size on one rank: a dcp::Error naming the sizes, and no hang.
  EXPECT_THROW(comm::run_threads(2, [&](comm::Communicator& g) {
                 std::vector<double> q(2 * 4 * 4 + (g.rank() == 1 ? 1 : 0)), k(2 * 2 * 4),
                     o(2 * 4 * 4), l(2 * 4);
                 ring_attn_fwd<double>(g, b2, s, q, k, k, o, l);
               }),
               Error);
}

}  // namespace
}  // namespace dcp::attn
