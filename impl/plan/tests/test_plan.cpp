// Tests of the plan model: CP-size rule, group geometry (power-of-two and not), validate() on
// hand-made valid and invalid plans (each rule of DESIGN.md "Plan validity" violated once),
// rank-list conversion, summary statistics and the plan JSON.
#include "core/error.h"
#include "plan/conformance.h"
#include "plan/cp_rule.h"
#include "plan/geometry.h"
#include "plan/plan_json.h"
#include "plan/planner.h"
#include "plan/summary.h"
#include "plan/validate.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include <unistd.h>

namespace dcp::plan {
namespace {

PlanConfig cfg(int dp, int cp, int64_t m, int min_cp = 1) {
  PlanConfig c;
  c.dp = dp;
  c.cp = cp;
  c.max_seqlen_per_rank = m;
  c.min_cp = min_cp;
  return c;
}

TEST(CpRule, PowersOfTwoAndBoundaries) {
  EXPECT_EQ(cp_min(1, 100), 1);
  EXPECT_EQ(cp_min(100, 100), 1);   // L = M fits one rank
  EXPECT_EQ(cp_min(101, 100), 2);   // L = M+1 needs two
  EXPECT_EQ(cp_min(300, 100), 4);   // ceil(3) -> next pow2 4
  EXPECT_EQ(cp_min(800, 100), 8);
  EXPECT_EQ(cp_min(801, 100), 16);
  EXPECT_EQ(cp_min(10, 100, 4), 4);  // min_cp floor
  EXPECT_TRUE(is_pow2(1));
  EXPECT_FALSE(is_pow2(0));
  EXPECT_FALSE(is_pow2(6));
  EXPECT_EQ(prev_pow2(12), 8);
  EXPECT_EQ(next_pow2(9), 16);
  // No overflow at the top of the range (a length file may hold any int64).
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(ceil_div(kMax, 2), kMax / 2 + 1);
  EXPECT_EQ(next_pow2(kMax), int64_t{1} << 62);
  EXPECT_EQ(cp_min(kMax, 1), int64_t{1} << 62);
}

TEST(Geometry, PowerOfTwoPoolHasEverySize) {
  for (int n = 1; n <= 64; n *= 2) {
    const auto sizes = group_sizes(n);
    std::vector<int> expect;
    for (int k = 1; k <= n; k *= 2) expect.push_back(k);
    EXPECT_EQ(sizes, expect) << "n=" << n;
    for (int k : sizes) {
      for (int r = 0; r < n; ++r) {
        const int first = group_first_rank(n, k, r);
        EXPECT_EQ(first % k, 0);
        EXPECT_LE(first, r);
        EXPECT_LT(r, first + k);
      }
    }
  }
  EXPECT_EQ(group_sizes(16, 4), (std::vector<int>{4, 8, 16}));
}

TEST(Geometry, NonPowerOfTwoPoolOnlyHasCompleteBlocks) {
  EXPECT_EQ(group_sizes(6), (std::vector<int>{1, 2, 6}));        // no size 4 (Megatron §7j)
  EXPECT_EQ(group_sizes(12), (std::vector<int>{1, 2, 4, 12}));   // no size 8
  EXPECT_EQ(group_sizes(10), (std::vector<int>{1, 2, 10}));      // no short [8,9] block of 4
  EXPECT_EQ(group_sizes(7), (std::vector<int>{1, 7}));
  EXPECT_FALSE(group_size_exists(6, 4));
  EXPECT_THROW(group_first_rank(6, 4, 5), Error);
  EXPECT_EQ(group_first_rank(6, 6, 5), 0);
  EXPECT_EQ(group_first_ranks(12, 4), (std::vector<int>{0, 4, 8}));
}

Plan two_mb_plan() {
  // N = 4, M = 100. mb0: [0..1]{0}, [2]{1,2}, [3]{3}; mb1: [0..3]{4}
  Plan p;
  p.planner = "hand";
  p.config = cfg(2, 2, 100);
  p.microbatches.push_back(MicroBatch{{Group{0, 2, {0}}, Group{2, 1, {1, 2}}, Group{3, 1, {3}}}});
  p.microbatches.push_back(MicroBatch{{Group{0, 4, {4}}}});
  return p;
}
const Batch kBatch{{150, 40, 60, 100, 390}};

// The interleaved-1F1B rule, written once for validity and the simulator: a multiple of the group,
// and the group at least pp where pp is known.
TEST(Validate, VppGroupRule) {
  EXPECT_FALSE(vpp_group_violation(16, 8, 8).has_value());
  EXPECT_FALSE(vpp_group_violation(12, 4).has_value());  // pp unknown: only the multiple
  EXPECT_EQ(vpp_group_violation(12, 8).value_or(""), "12 micro-batches is not a multiple of vpp_group 8");
  EXPECT_NE(vpp_group_violation(12, 4, 8).value_or("").find("smaller than pp=8"), std::string::npos);
  EXPECT_TRUE(vpp_group_violation(3, 0).has_value());
}

// find_violation bounds M and the pool itself (no M x k overflow for a C++ caller).
TEST(Validate, ConfigBoundsWithoutOverflow) {
  Plan p = two_mb_plan();
  p.config.max_seqlen_per_rank = std::numeric_limits<int64_t>::max() / 2;
  EXPECT_NE(find_violation(p, kBatch).value_or("").find("larger than the supported"), std::string::npos);
  p = two_mb_plan();
  p.config.dp = 1 << 20;
  p.config.cp = 4;
  EXPECT_NE(find_violation(p, kBatch).value_or("").find("larger than the supported pool"), std::string::npos);
}

TEST(Validate, AcceptsAValidPlan) { EXPECT_FALSE(find_violation(two_mb_plan(), kBatch).has_value()); }

struct BadCase {
  const char* name;
  void (*mutate)(Plan&);
  const char* expect;  // substring of the violation
};

const BadCase kBadCases[] = {
    {"missing_sample", [](Plan& p) { p.microbatches.pop_back(); }, "sample 4 (length 390) is not scheduled"},
    {"duplicate_sample", [](Plan& p) { p.microbatches[1].groups[0].samples.push_back(0); }, "sample 0 appears more than once"},
    {"uncovered_rank", [](Plan& p) { p.microbatches[0].groups.pop_back(); p.microbatches[1].groups[0].samples = {4, 3}; }, "ranks 3..3 are empty"},
    {"misaligned", [](Plan& p) { p.microbatches[0].groups = {Group{0, 1, {1}}, Group{1, 2, {0}}, Group{3, 1, {2, 3}}}; }, "not aligned"},
    {"overlap", [](Plan& p) { p.microbatches[0].groups[1].first_rank = 1; }, "is already covered"},
    {"over_budget", [](Plan& p) { p.microbatches[0].groups[2].samples = {3, 1}; p.microbatches[0].groups[1].samples = {2}; }, "tokens per rank > max_seqlen_per_rank 100"},
    {"empty_group", [](Plan& p) { p.microbatches[0].groups[2].samples.clear(); p.microbatches[0].groups[1].samples = {1, 2}; p.microbatches[1].groups[0].samples = {4, 3}; }, "group has no samples"},
    {"past_pool", [](Plan& p) { p.microbatches[1].groups[0].cp_size = 8; }, "extends past the pool of 4 ranks"},
    {"below_min_cp", [](Plan& p) { p.config.min_cp = 2; }, "cp_size 1 < min_cp 2"},
    {"bad_id", [](Plan& p) { p.microbatches[0].groups[2].samples = {7}; }, "sample id 7 outside [0, 5)"},
    {"vpp_multiple", [](Plan& p) { p.config.vpp_group = 4; }, "not a multiple of vpp_group 4"},
    {"static_size", [](Plan& p) { p.dynamic = false; }, "static-CP plan has group size"},
};

class ValidateRejects : public ::testing::TestWithParam<BadCase> {};

TEST_P(ValidateRejects, NamesTheFirstViolation) {
  Plan p = two_mb_plan();
  GetParam().mutate(p);
  const auto v = find_violation(p, kBatch);
  ASSERT_TRUE(v.has_value());
  EXPECT_NE(v->find(GetParam().expect), std::string::npos) << *v;
  EXPECT_THROW(validate(p, kBatch), Error);
}

INSTANTIATE_TEST_SUITE_P(Plan, ValidateRejects, ::testing::ValuesIn(kBadCases),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(Validate, RejectsAPlanMadeForAnotherConfig) {
  const Plan p = two_mb_plan();
  PlanConfig requested = p.config;
  EXPECT_FALSE(find_violation(p, kBatch, requested).has_value());
  requested.vpp_group = 2;  // the planner dropped the VPP group
  const auto v = find_violation(p, kBatch, requested);
  ASSERT_TRUE(v.has_value());
  EXPECT_NE(v->find("is not the requested one"), std::string::npos) << *v;
  // an unset VPP group reads "none" (it had printed 0, as if the config set one)
  EXPECT_NE(v->find("vpp_group none, max_seqlen none) is not the requested one (dp"), std::string::npos) << *v;
  EXPECT_NE(v->find("vpp_group 2, max_seqlen none)"), std::string::npos) << *v;
  EXPECT_THROW(validate(p, kBatch, requested), Error);
}

// Rule 7: a padded (bshd) plan is checked at its padded length.
TEST(Validate, PaddedPlanIsCheckedAtItsPaddedLength) {
  Plan p;
  p.planner = "bshd-like";
  p.config = cfg(2, 2, 100);  // N = 4, static cp 2: two groups of 2 ranks per micro-batch
  p.dynamic = false;
  p.pad_to = 200;
  p.microbatches.push_back(MicroBatch{{Group{0, 2, {0}}, Group{2, 2, {1}}}});
  const Batch b{{150, 40}};
  EXPECT_FALSE(find_violation(p, b).has_value());
  p.config.max_seqlen = 200;
  EXPECT_FALSE(find_violation(p, b).has_value());
  p.config.max_seqlen = 300;  // padded to something other than the requested max_seqlen
  auto v = find_violation(p, b);
  ASSERT_TRUE(v.has_value());
  EXPECT_NE(v->find("pad_to 200 != max_seqlen 300"), std::string::npos) << *v;
  p.config.max_seqlen.reset();
  p.pad_to = 120;  // shorter than sample 0 (a multiple of 4)
  v = find_violation(p, b);
  ASSERT_TRUE(v.has_value());
  EXPECT_NE(v->find("sample 0 (length 150) is longer than pad_to 120"), std::string::npos) << *v;
  p.pad_to = 198;  // not a multiple of 2 x cp = 4: the executor would lay out 200 rows
  v = find_violation(p, b);
  ASSERT_TRUE(v.has_value());
  EXPECT_NE(v->find("pad_to 198 is not a multiple of 2 x cp = 4"), std::string::npos) << *v;
  p.pad_to = 252;  // 252 tokens over 2 ranks > M = 100, although the real 150 fit
  v = find_violation(p, b);
  ASSERT_TRUE(v.has_value());
  EXPECT_NE(v->find("tokens per rank > max_seqlen_per_rank 100"), std::string::npos) << *v;
  // From a hostile file: two samples at 2^62 tokens overflow int64; a violation, not UB.
  p.pad_to = int64_t{1} << 62;
  p.microbatches[0].groups = {Group{0, 2, {0, 1}}, Group{2, 2, {2}}};
  v = find_violation(p, Batch{{150, 40, 60}});
  ASSERT_TRUE(v.has_value());
  EXPECT_NE(v->find("overflow"), std::string::npos) << *v;
}

TEST(Validate, NonPowerOfTwoPoolAcceptsFullGroupRejectsMissingSize) {
  Plan p;
  p.config = cfg(3, 2, 100);  // N = 6
  p.microbatches.push_back(MicroBatch{{Group{0, 6, {0, 1}}}});
  const Batch b{{50, 50}};
  EXPECT_FALSE(find_violation(p, b).has_value());
  p.microbatches[0].groups = {Group{0, 4, {0}}, Group{4, 2, {1}}};
  const auto v = find_violation(p, b);
  ASSERT_TRUE(v.has_value());
  EXPECT_NE(v->find("no CP group of size 4"), std::string::npos) << *v;
}

// Megatron's format says nothing of the planner: static CP only where it can be nothing else
// (every group of cp ranks, a cp that is no dynamic size of the pool, min_cp 1); `check` and the
// Python module read it alike (helper-84's trial).
TEST(RankLists, MegatronFormatIsStaticOnlyWhereNoDynamicGroupFits) {
  PlanConfig c;
  c.dp = 2;
  c.cp = 3;
  c.max_seqlen_per_rank = 1024;
  const RankLists static3 = {{{0, 1, 2}, {0, 1, 2}, {0, 1, 2}, {3}, {3}, {3}}};
  const Plan p = plan_from_megatron_format(static3, c);
  EXPECT_FALSE(p.dynamic);
  EXPECT_EQ(p.planner, "megatron-format");
  EXPECT_FALSE(find_violation(p, Batch{{698, 873, 539, 100}}, c).has_value());
  // The same lists read as dynamic (plan_from_rank_lists) have a group size the pool lacks.
  EXPECT_TRUE(find_violation(plan_from_rank_lists(static3, "x", c), Batch{{698, 873, 539, 100}}, c).has_value());
  // Groups of other sizes: dynamic.
  EXPECT_TRUE(plan_from_megatron_format({{{0}, {1}, {2}, {3}, {3}, {3}}}, c).dynamic);
  auto min2 = c;  // min_cp > 1: no static planner plans it
  min2.min_cp = 2;
  EXPECT_TRUE(plan_from_megatron_format(static3, min2).dynamic);
  auto pow2 = c;  // cp 2 in a pool of 4: a dynamic size
  pow2.cp = 2;
  EXPECT_TRUE(plan_from_megatron_format({{{0}, {0}, {1}, {1}}}, pow2).dynamic);
}

TEST(RankLists, RoundTripAndRejectsEmptyRank) {
  const Plan p = two_mb_plan();
  const RankLists lists = rank_lists_of(p);
  ASSERT_EQ(lists[0].size(), 4u);
  EXPECT_EQ(lists[0][1], (std::vector<int>{0}));
  EXPECT_EQ(lists[0][2], (std::vector<int>{1, 2}));
  const Plan q = plan_from_rank_lists(lists, "x", p.config);
  ASSERT_EQ(q.microbatches.size(), 2u);
  EXPECT_EQ(q.microbatches[0].groups.size(), 3u);
  EXPECT_EQ(q.microbatches[0].groups[0].cp_size, 2);
  EXPECT_EQ(q.microbatches[1].groups[0].cp_size, 4);
  RankLists bad = lists;
  bad[1][3].clear();
  EXPECT_THROW(plan_from_rank_lists(bad, "x", p.config), Error);
}

// plan_from_rank_lists checks what its comment says: a sample on two runs of ranks (different
// lists, or the same list on non-contiguous ranks) or twice in one list is rejected, precisely.
TEST(RankLists, RejectsASampleOnTwoRunsOfRanks) {
  const int n = 4;
  EXPECT_FALSE(rank_lists_violation({{{0}, {0}, {1, 2}, {3}}}, n).has_value());
  const auto differ = rank_lists_violation({{{0}, {0}, {1, 0}, {3}}}, n);
  ASSERT_TRUE(differ.has_value());
  EXPECT_NE(differ->find("micro-batch 0: sample 0 is on ranks 0..1 and on ranks 2..2 with different lists"),
            std::string::npos)
      << *differ;
  const auto apart = rank_lists_violation({{{5}, {5}}, {{3}, {4}, {3}, {4}}}, n + 0);
  ASSERT_TRUE(apart.has_value());  // micro-batch 0 has 2 lists for a pool of 4
  EXPECT_NE(apart->find("micro-batch 0 has 2 rank lists, the pool has 4 ranks"), std::string::npos) << *apart;
  const auto same = rank_lists_violation({{{3}, {4}, {3}, {4}}}, n);
  ASSERT_TRUE(same.has_value());
  EXPECT_NE(same->find("the same list on non-contiguous ranks"), std::string::npos) << *same;
  const auto twice = rank_lists_violation({{{7, 7}, {1}, {2}, {3}}}, n);
  ASSERT_TRUE(twice.has_value());
  EXPECT_NE(twice->find("sample 7 appears twice in the list of ranks 0..0"), std::string::npos) << *twice;
  EXPECT_THROW(plan_from_rank_lists({{{3}, {4}, {3}, {4}}}, "x", cfg(4, 1, 100)), Error);
}

TEST(Validate, MicroBatchCheckMatchesTheWholePlanCheck) {
  const Plan p = two_mb_plan();
  EXPECT_FALSE(find_microbatch_violation(p.microbatches[0].groups, p.config, kBatch.lengths).has_value());
  auto groups = p.microbatches[0].groups;
  groups[0].samples = {0, 1};  // sample 1 in two groups of the micro-batch (190 tokens fit 2 ranks)
  const auto v = find_microbatch_violation(groups, p.config, kBatch.lengths, 7);
  ASSERT_TRUE(v.has_value());
  EXPECT_NE(v->find("micro-batch 7 group 1 (ranks 2..2): sample 1 appears more than once (also in group 0"),
            std::string::npos)
      << *v;
  groups = p.microbatches[0].groups;
  groups.pop_back();
  EXPECT_NE(find_microbatch_violation(groups, p.config, kBatch.lengths)->find("ranks 3..3 are empty"), std::string::npos);
}

TEST(Summary, WorkloadAndTokensPerRank) {
  const PlanStats st = plan_stats(two_mb_plan(), kBatch);
  ASSERT_EQ(st.microbatches.size(), 2u);
  // mb0 ranks: 150^2/2 = 11250 (x2), 40^2+60^2 = 5200, 100^2 = 10000
  EXPECT_DOUBLE_EQ(st.microbatches[0].max_rank_workload, 11250.0);
  EXPECT_DOUBLE_EQ(st.microbatches[0].mean_rank_workload, (11250.0 * 2 + 5200 + 10000) / 4);
  EXPECT_DOUBLE_EQ(st.microbatches[0].max_rank_tokens, 100.0);
  EXPECT_DOUBLE_EQ(st.microbatches[1].max_rank_tokens, 97.5);
  EXPECT_EQ(st.cp_size_histogram.at(1), 3);
  EXPECT_EQ(st.cp_size_histogram.at(2), 1);
  EXPECT_EQ(st.cp_size_histogram.at(4), 1);
}

TEST(PlanJson, SchemaKeysAndRoundTrip) {
  const Plan p = two_mb_plan();
  const auto j = plan_to_json(p, kBatch, nlohmann::json{{"solve_ms", 1.5}});
  EXPECT_EQ(j["schema"], "dcpbench.plan.v1");
  EXPECT_EQ(j["pool"], 4);
  EXPECT_TRUE(j["vpp_group"].is_null());
  EXPECT_EQ(j["microbatches"][0]["groups"][0]["ranks"], nlohmann::json::array({0, 1}));
  EXPECT_EQ(j["microbatches"][1]["groups"][0]["ranks"], nlohmann::json::array({0, 1, 2, 3}));
  EXPECT_EQ(j["summary"]["solve_ms"], 1.5);
  EXPECT_EQ(j["summary"]["microbatch_count"], 2);
  EXPECT_EQ(j["summary"]["cp_size_histogram"]["4"], 1);
  const Plan q = plan_from_json(j);
  EXPECT_EQ(rank_lists_of(q), rank_lists_of(p));
  EXPECT_TRUE(q.dynamic);
  Plan st = p;
  st.dynamic = false;
  EXPECT_FALSE(plan_from_json(plan_to_json(st, kBatch, nlohmann::json::object())).dynamic);
}

// A plan.v1 file's summary and pool must agree with its plan (dcpbench check): each key that can
// be edited to contradict it is caught, naming the key and both values; the writer's own keys
// (solve_ms) and left-out keys are not checked. (dynamic and pad_to are read from the summary
// into the plan, so they agree by construction; validate.h checks them against the config.)
TEST(PlanJson, SummaryViolationNamesTheContradictedKey) {
  const Plan p = two_mb_plan();
  const auto good = plan_to_json(p, kBatch, nlohmann::json{{"solve_ms", 1.5}});
  EXPECT_EQ(summary_violation(good, plan_from_json(good), kBatch), std::nullopt);
  const auto violation = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = good;
    edit(j);
    return summary_violation(j, plan_from_json(j), kBatch).value_or("");
  };
  EXPECT_EQ(violation([](auto& j) { j["summary"].erase("per_microbatch"); j["summary"]["solve_ms"] = 99; }), "");
  EXPECT_EQ(violation([](auto& j) { j["summary"]["microbatch_count"] = 3; }),
            "\"summary.microbatch_count\" is 3, the plan has 2");
  EXPECT_EQ(violation([](auto& j) { j["pool"] = 8; }), "\"pool\" is 8, the plan has 4");
  EXPECT_NE(violation([](auto& j) { j["summary"]["cp_size_histogram"]["4"] = 2; }).find("summary.cp_size_histogram"),
            std::string::npos);
  EXPECT_NE(violation([](auto& j) { j["summary"]["cp_size_histogram"].erase("4"); }).find("cp_size_histogram"),
            std::string::npos);
  EXPECT_NE(violation([](auto& j) { j["summary"]["tokens"] = 1; }).find("summary.tokens"), std::string::npos);
  EXPECT_NE(violation([](auto& j) { j["summary"]["samples"] = 99; }).find("summary.samples"), std::string::npos);
  EXPECT_NE(violation([](auto& j) { j["summary"]["per_microbatch"].erase(1); }).find("has 1 entries, the plan 2"),
            std::string::npos);
  EXPECT_NE(violation([](auto& j) { j["summary"]["per_microbatch"][0]["max_rank_tokens"] = 101; })
                .find("summary.per_microbatch[0].max_rank_tokens"),
            std::string::npos);
  // Workloads to a relative 1e-9: another writer's order of summation passes, a wrong sum not.
  EXPECT_EQ(violation([](auto& j) { j["summary"]["workload_critical_path"] =
                                        j["summary"]["workload_critical_path"].template get<double>() * (1 + 1e-12); }),
            "");
  EXPECT_NE(violation([](auto& j) { j["summary"]["workload_critical_path"] =
                                        j["summary"]["workload_critical_path"].template get<double>() * 1.01; })
                .find("workload_critical_path"),
            std::string::npos);
  nlohmann::json not_object = good;
  not_object["summary"] = 3;  // (plan_from_json refuses it first: its "dynamic" is read there)
  EXPECT_EQ(summary_violation(not_object, p, kBatch).value_or(""), "\"summary\" is 3, not an object");
}

// Issue 11: every integer of a plan file is range-checked (a 2^63, a negative id or a 1e300
// would otherwise wrap or be an undefined conversion), and a huge batch is refused up front.
TEST(PlanJson, ReaderRangeChecksEveryInteger) {
  const auto good = plan_to_json(two_mb_plan(), kBatch, nlohmann::json::object());
  auto expect_bad = [&](const std::function<void(nlohmann::json&)>& edit, const std::string& sub) {
    nlohmann::json j = good;
    edit(j);
    try {
      plan_from_json(j);
      ADD_FAILURE() << "accepted: " << sub;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(sub), std::string::npos) << e.what();
    }
  };
  expect_bad([](auto& j) { j["dp"] = nlohmann::json::parse("9223372036854775808"); }, "\"dp\"=9223372036854775808 is above");
  expect_bad([](auto& j) { j["cp"] = 1e300; }, "\"cp\"=1e+300 is not an integer in [1, 1048576]");
  expect_bad([](auto& j) { j["dp"] = 1 << 20; j["cp"] = 2; }, "dp x cp = 2097152 is above the supported pool");
  expect_bad([](auto& j) { j["max_seqlen_per_rank"] = 0; }, "below the minimum 1");
  expect_bad([](auto& j) { j["vpp_group"] = -3; }, "\"vpp_group\"=-3 is below the minimum 1");
  expect_bad([](auto& j) { j["microbatches"][0]["groups"][0]["samples"][0] = -1; }, "sample id=-1 is below");
  expect_bad([](auto& j) { j["microbatches"][0]["groups"][0]["cp_size"] = "2"; }, "\"microbatches[0].groups[0].cp_size\"=\"2\" is not an integer");
  expect_bad([](auto& j) { j["microbatches"][0]["groups"][0]["ranks"] = 7; }, "plan group with no ranks");
  expect_bad([](auto& j) { j["microbatches"] = nlohmann::json::object(); }, "\"microbatches\" is not an array");
  expect_bad([](auto& j) { j = nlohmann::json::array(); }, "not an object");
  EXPECT_NO_THROW(plan_from_json(good));
}

// `dcpbench check --plan` and the Python module's validate(dict) showed nlohmann's text
// ("[json.exception.out_of_range.403] key 'planner' not found") and took any "schema".
TEST(PlanJson, MissingOrMistypedKeyAndForeignSchemaAreNamed) {
  const auto good = plan_to_json(two_mb_plan(), kBatch, nlohmann::json::object());
  const auto error_of = [](const nlohmann::json& j) -> std::string {
    try {
      plan_from_json(j);
    } catch (const InputError& e) {
      return e.what();
    }
    return "(accepted)";
  };
  EXPECT_EQ(error_of(nlohmann::json{{"microbatches", nlohmann::json::array()}}), "plan JSON: \"planner\" is missing");
  auto j = good;
  j["planner"] = 5;
  EXPECT_EQ(error_of(j), "plan JSON: \"planner\"=5 is not a string");
  j = good;
  j.erase("dp");
  EXPECT_EQ(error_of(j), "plan JSON: \"dp\" is missing");
  j = good;
  j.erase("microbatches");
  EXPECT_EQ(error_of(j), "plan JSON: \"microbatches\" is missing");
  j = good;
  j["microbatches"][1] = 3;
  EXPECT_EQ(error_of(j), "plan JSON: \"microbatches[1]\"=3 is not an object");
  j = good;
  j["microbatches"][1]["groups"][0].erase("samples");
  EXPECT_EQ(error_of(j), "plan JSON: \"microbatches[1].groups[0].samples\" is missing");
  j = good;
  j["summary"]["dynamic"] = "yes";
  EXPECT_EQ(error_of(j), "plan JSON: \"summary.dynamic\"=\"yes\" is not true or false");
  j = good;
  j["schema"] = "dcpbench.plan.v9";
  EXPECT_EQ(error_of(j), "plan JSON: \"schema\"=\"dcpbench.plan.v9\" is not dcpbench.plan.v1");
  j.erase("schema");  // readers of plan.v1 answers without one (external planners) still read them
  EXPECT_NO_THROW(plan_from_json(j));
}

// A conformance case that is not an object named an empty key: `x.json: "" the file is not ...`.
TEST(ConformanceCase, FileThatIsNotAnObjectIsNamedWithItsValue) {
  // Named by pid: two test_plan runs on one machine (two build trees) would share a fixed name.
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("dcp_conformance_array_" + std::to_string(getpid()) + ".json");
  const auto error_of = [&file](const char* text) -> std::string {
    std::ofstream(file) << text;
    try {
      conformance::read_case(file.string());
    } catch (const InputError& e) {
      return e.what();
    }
    return "(accepted)";
  };
  EXPECT_EQ(error_of("[1, 2]"),
            file.string() + ": the file holds [1,2], not a JSON object (a dcpbench.conformance.v1 case)");
  EXPECT_EQ(error_of(R"({"schema": "dcpbench.conformance.v0"})"),
            file.string() + ": \"schema\"=\"dcpbench.conformance.v0\" is not dcpbench.conformance.v1");
  std::filesystem::remove(file);
}

TEST(CheckConfig, RefusesBatchesOverTheSampleLimit) {
  const Batch b{std::vector<int64_t>(static_cast<size_t>(kMaxBatchSamples) + 1, 1)};
  try {
    check_config(b, cfg(1, 1, 8));
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("262145 samples, more than the limit of 262144"), std::string::npos)
        << e.what();
  }
}

TEST(CheckConfig, NamesTheBadValue) {
  const Batch b{{10, 0}};
  auto expect_msg = [](const Batch& batch, const PlanConfig& c, const std::string& sub) {
    try {
      check_config(batch, c);
      ADD_FAILURE() << "no error for " << sub;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(sub), std::string::npos) << e.what();
    }
  };
  expect_msg(Batch{{10}}, cfg(0, 1, 10), "--dp 0");
  expect_msg(Batch{{10}}, cfg(1, 1, 10, 3), "--min-cp 3 is not a power of two");
  expect_msg(Batch{{10}}, cfg(1, 2, 10, 4), "--min-cp 4 is larger than the pool");
  expect_msg(b, cfg(1, 1, 10), "sample 1 has length 0");
  expect_msg(Batch{{10}}, cfg(1, 1, kMaxTokensPerRank + 1), "is larger than the supported");
  // README's 2^40 tokens per sample and --max-seqlen (schedule, check and Python took 2^41).
  expect_msg(Batch{{10, kMaxTokensPerRank + 1}}, cfg(1, 2, kMaxTokensPerRank),
             "sample 1 has length 1099511627777, above the limit of 1099511627776 tokens per sample");
  PlanConfig long_max = cfg(1, 2, 10);
  long_max.max_seqlen = kMaxTokensPerRank + 1;
  expect_msg(Batch{{10}}, long_max, "--max-seqlen 1099511627777 is above the limit of 1099511627776 tokens");
  long_max.max_seqlen = kMaxTokensPerRank;
  EXPECT_NO_THROW(check_config(Batch{{kMaxTokensPerRank}}, long_max));
  expect_msg(Batch{{10}}, cfg(65536, 65536, 10), "--dp 65536 x --cp 65536 is larger than the supported pool");
  try {
    check_fits(Batch{{5, 1000}}, cfg(2, 4, 100));
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("sample 1 has length 1000 which needs CP size 16 but the pool has 8 ranks "
                                         "(largest length that fits: 800)"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace dcp::plan
