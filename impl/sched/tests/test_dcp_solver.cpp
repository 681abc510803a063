// Tests of our solver "dcp": valid plans on random inputs of every shape (power-of-two pools and
// not, min_cp, VPP multiples), determinism, use of the cost callbacks, and the decisions the
// header promises (bigger CP for a dominating sample, micro-batch count chosen by the score).
#include "core/error.h"
#include "core/rng.h"
#include "plan/validate.h"
#include "sched/dcp_solver.h"

#include <gtest/gtest.h>

#include <cmath>

namespace dcp::sched {
namespace {

plan::PlanConfig cfg(int dp, int cp, int64_t m, int min_cp = 1, std::optional<int> vpp = std::nullopt) {
  plan::PlanConfig c;
  c.dp = dp;
  c.cp = cp;
  c.max_seqlen_per_rank = m;
  c.min_cp = min_cp;
  c.vpp_group = vpp;
  return c;
}

TEST(DcpSolver, RandomInputsGiveValidDeterministicPlans) {
  Rng rng(2026);
  int planned = 0;
  for (int t = 0; t < 1500; ++t) {
    const bool pow2 = rng.uniform() < 0.7;
    const int n = pow2 ? 1 << rng.uniform_int(0, 7) : static_cast<int>(rng.uniform_int(1, 40));
    const int cp = (n % 2 == 0 && rng.uniform() < 0.5) ? 2 : 1;
    const int64_t m = rng.uniform_int(8, 2048);
    int min_cp = 1;
    if (pow2 && rng.uniform() < 0.2) min_cp = 1 << rng.uniform_int(0, static_cast<int>(std::log2(n)));
    std::optional<int> vpp;
    if (rng.uniform() < 0.25) vpp = 1 << rng.uniform_int(1, 3);
    plan::Batch b;
    const int g = static_cast<int>(rng.uniform_int(1, 300));
    const int shape = static_cast<int>(rng.uniform_int(0, 2));
    for (int i = 0; i < g; ++i) {
      double x;
      if (shape == 0) x = rng.lognormal(std::log(static_cast<double>(m)) - 1.0, 1.5);
      else if (shape == 1) x = rng.uniform() < 0.9 ? rng.uniform(1, m / 4.0 + 1) : rng.uniform(m, m * n);
      else x = static_cast<double>(m) / 2;
      b.lengths.push_back(std::clamp<int64_t>(std::llround(x), 1, m * n));
    }
    const DcpPlanner planner;
    const auto c = cfg(n / cp, cp, m, min_cp, vpp);
    plan::Plan p;
    try {
      p = planner.plan(b, c);
    } catch (const InputError& e) {
      // The only refusal: the VPP multiple needs more micro-batches than there are samples.
      ASSERT_TRUE(vpp.has_value()) << "case " << t << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find("vpp_group"), std::string::npos) << e.what();
      continue;
    }
    const auto v = plan::find_violation(p, b);
    ASSERT_FALSE(v.has_value()) << "case " << t << " n=" << n << " g=" << g << ": " << *v;
    const auto q = planner.plan(b, c);
    ASSERT_EQ(plan::rank_lists_of(p), plan::rank_lists_of(q)) << "nondeterministic, case " << t;
    ++planned;
  }
  EXPECT_GT(planned, 1400);
}

TEST(DcpSolver, VppMultipleBeyondSampleCountIsAClearError) {
  // Every sample needs its own micro-batch (2 x 60 > 100) and 5 is not a multiple of 4.
  plan::Batch b{{60, 60, 60, 60, 60}};
  EXPECT_THROW(DcpPlanner().plan(b, cfg(1, 1, 100, 1, 4)), InputError);
  const auto p = DcpPlanner().plan(plan::Batch{{60, 60, 60, 60}}, cfg(1, 1, 100, 1, 4));
  EXPECT_EQ(p.microbatches.size(), 4u);
}

TEST(DcpSolver, RejectsSampleThatCannotFit) {
  try {
    DcpPlanner().plan(plan::Batch{{10, 1000}}, cfg(4, 2, 100));
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("sample 1 has length 1000"), std::string::npos) << e.what();
  }
}

TEST(DcpSolver, DominatingSampleGetsALargerGroup) {
  // One long sample (fits one rank: 1000 <= M) and many tiny ones on 8 ranks: alone on one rank
  // it would be the critical path, so dcp spreads it over more ranks.
  plan::Batch b{{1000}};
  for (int i = 0; i < 64; ++i) b.lengths.push_back(10);
  const auto p = DcpPlanner().plan(b, cfg(8, 1, 1000));
  plan::validate(p, b);
  int k_long = 0;
  for (const auto& mb : p.microbatches)
    for (const auto& g : mb.groups)
      for (int s : g.samples)
        if (s == 0) k_long = g.cp_size;
  EXPECT_GT(k_long, 1);
}

TEST(DcpSolver, MicroBatchCountFollowsTheStepTimeCallback) {
  plan::Batch b;
  for (int i = 0; i < 64; ++i) b.lengths.push_back(50);
  plan::PlannerOptions many;
  many.step_time_s = [](const plan::Plan& p) { return 1.0 / static_cast<double>(p.microbatches.size()); };
  plan::PlannerOptions few;
  few.step_time_s = [](const plan::Plan& p) { return static_cast<double>(p.microbatches.size()); };
  const auto c = cfg(4, 1, 1000);
  const auto pm = DcpPlanner(many).plan(b, c);
  const auto pf = DcpPlanner(few).plan(b, c);
  plan::validate(pm, b);
  plan::validate(pf, b);
  EXPECT_EQ(pf.microbatches.size(), 1u);  // 64*50 tokens fit 4 ranks x 1000 in one micro-batch
  EXPECT_GT(pm.microbatches.size(), pf.microbatches.size());
}

TEST(DcpSolver, UsesTheSampleTimeCallback) {
  // With a cost that makes CP free and perfectly parallel, a dominating sample takes the pool.
  plan::Batch b{{400, 10, 10, 10}};
  plan::PlannerOptions o;
  int calls = 0;
  o.sample_time_s = [&calls](int64_t L, int k) {
    ++calls;
    return static_cast<double>(L) * L / k;
  };
  const auto p = DcpPlanner(o).plan(b, cfg(4, 1, 400));
  plan::validate(p, b);
  EXPECT_GT(calls, 0);
}

TEST(DcpSolver, NonPowerOfTwoPoolUsesOnlyExistingSizes) {
  plan::Batch b{{450, 300, 20, 20, 20, 20, 20, 20}};
  const auto p = DcpPlanner().plan(b, cfg(3, 2, 100));  // N = 6: sizes 1, 2, 6
  plan::validate(p, b);
  for (const auto& mb : p.microbatches)
    for (const auto& g : mb.groups) EXPECT_TRUE(g.cp_size == 1 || g.cp_size == 2 || g.cp_size == 6) << g.cp_size;
}

TEST(DcpSolver, DefaultTimeModelIsLinearPlusQuadratic) {
  EXPECT_DOUBLE_EQ(dcp_default_sample_time(62000, 1), 124000.0);
  EXPECT_NEAR(dcp_default_sample_time(62000, 2), 62000.0 + 0.02 * 31000, 1e-6);
}

}  // namespace
}  // namespace dcp::sched
