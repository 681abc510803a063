// `dcpbench run` with async planning (runner.cpp, results.h RowPlanning): the rows of an async run
// equal those of a --sync-planning run except for the planning timings; every row says how it was
// planned; the hidden planning time follows its model exactly (step 0: 0; step i: min(solve of i,
// simulated step time of i-1); sync: 0) and hidden + exposed = solve; a planner that throws at
// every step leaves an error row for every step (planning goes on after an error); the planning
// fields round-trip through the results JSON and are type-checked; rows without them write none.
#include "core/error.h"
#include "harness/registry.h"
#include "harness/runner.h"
#include "harness/scenario.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace dcp::harness {
namespace {

using nlohmann::json;

Scenario async_scenario(const std::string& strategies) {
  return parse_scenario(json::parse(R"({
    "name": "small", "notes": ["test"],
    "model": "tiny",
    "dataset": {"source": "lognormal", "mean": 300, "sigma": 1.0, "min": 16, "max": 4096},
    "cluster": {"gpus": 8, "tp": 1, "pp": 2, "cp": 2, "gpus_per_node": 4, "hardware": "h100-sxm"},
    "training": {"global_batch": 32, "max_seqlen": 4096, "max_seqlen_per_rank": 2048, "steps": 4, "seed": 5},
    "strategies": )" + strategies + "}"), "small.json");
}

json without_timings(const ResultRow& r) {
  json j = row_to_json(r);
  for (const char* k : {"solve_ms", "planning", "plan_hidden_ms", "plan_exposed_ms", "plan_wait_ms"}) j.erase(k);
  return j;
}

TEST(AsyncRun, SameRowsAsSyncAndHiddenPlanningFollowsItsModel) {
  const Scenario s = async_scenario(R"(["packing", "megatron-dev", "dcp"])");
  RunOptions async_opt, sync_opt;
  sync_opt.sync_planning = true;
  const ResultsFile a = run_scenarios({s}, async_opt, builtin_planners());
  const ResultsFile b = run_scenarios({s}, sync_opt, builtin_planners());
  ASSERT_EQ(a.rows.size(), 12u);  // 4 steps x 3 strategies
  ASSERT_EQ(b.rows.size(), a.rows.size());
  for (size_t i = 0; i < a.rows.size(); ++i) {
    const ResultRow& r = a.rows[i];
    SCOPED_TRACE(r.strategy + " step " + std::to_string(r.step));
    ASSERT_TRUE(r.has_metrics()) << r.error;
    EXPECT_EQ(without_timings(r), without_timings(b.rows[i]));  // the same plans, simulated the same
    EXPECT_EQ(r.planning, "async");
    EXPECT_EQ(b.rows[i].planning, "sync");
    EXPECT_GE(r.solve_ms, 0.0);
    EXPECT_GE(r.plan_wait_ms, 0.0);
    // The previous step of the same strategy: its simulated step time hides this step's planning.
    const auto prev = std::find_if(a.rows.begin(), a.rows.end(), [&](const ResultRow& p) {
      return p.strategy == r.strategy && p.step == r.step - 1;
    });
    const double want_hidden = r.step == 0 ? 0.0 : std::min(r.solve_ms, 1e3 * prev->step_time_s);
    EXPECT_DOUBLE_EQ(r.plan_hidden_ms, want_hidden);
    EXPECT_DOUBLE_EQ(r.plan_hidden_ms + r.plan_exposed_ms, r.solve_ms);
    EXPECT_EQ(b.rows[i].plan_hidden_ms, 0.0);
    EXPECT_DOUBLE_EQ(b.rows[i].plan_exposed_ms, b.rows[i].solve_ms);
  }
}

class ThrowsEveryStep : public plan::Planner {
 public:
  std::string name() const override { return "throws"; }
  bool dynamic() const override { return true; }
  plan::Plan plan(const plan::Batch& b, const plan::PlanConfig&) const override {
    throw InputError("cannot plan a batch of " + std::to_string(b.size()) + " samples");
  }
};

TEST(AsyncRun, AnErrorAtEveryStepLeavesAnErrorRowForEveryStep) {
  plan::PlannerRegistry reg;
  reg.add("throws", [] { return std::make_unique<ThrowsEveryStep>(); });
  const ResultsFile r = run_scenarios({async_scenario(R"(["throws"])")}, RunOptions{}, reg);
  ASSERT_EQ(r.rows.size(), 4u);
  for (int step = 0; step < 4; ++step) {
    EXPECT_EQ(r.rows[static_cast<size_t>(step)].step, step);
    EXPECT_FALSE(r.rows[static_cast<size_t>(step)].plan_valid);
    EXPECT_EQ(r.rows[static_cast<size_t>(step)].error, "planner failed: cannot plan a batch of 32 samples");
  }
}

TEST(AsyncRun, PlanningFieldsRoundTripAndAreTypeChecked) {
  ResultRow row;
  row.scenario = "s";
  row.strategy = "dcp";
  row.source = "simulated:x@y";
  json plain = row_to_json(row);
  for (const char* k : {"planning", "plan_hidden_ms", "plan_exposed_ms", "plan_wait_ms"})
    EXPECT_FALSE(plain.contains(k)) << k;  // a row without planning writes none of them
  row.planning = "async";
  row.solve_ms = 5;
  row.plan_hidden_ms = 3;
  row.plan_exposed_ms = 2;
  row.plan_wait_ms = 4.5;
  const json j = row_to_json(row);
  const ResultRow back = row_from_json(j);
  EXPECT_EQ(back.planning, "async");
  EXPECT_EQ(back.plan_hidden_ms, 3);
  EXPECT_EQ(back.plan_exposed_ms, 2);
  EXPECT_EQ(back.plan_wait_ms, 4.5);
  ResultsFile f;
  f.context = {{"git_sha", "x"}, {"date", "d"}, {"host", "h"}, {"device", "v"}, {"cost_model", "c"}, {"calibration", "k"}};
  f.rows.push_back(row);
  json file = results_to_json(f);
  EXPECT_TRUE(validate_results(file).empty());
  file["rows"][0]["planning"] = 3;
  file["rows"][0]["plan_hidden_ms"] = "three";
  const auto errs = validate_results(file);
  ASSERT_EQ(errs.size(), 2u);
  EXPECT_NE(errs[0].find("plan_hidden_ms"), std::string::npos) << errs[0];
  EXPECT_NE(errs[1].find("planning"), std::string::npos) << errs[1];
}

}  // namespace
}  // namespace dcp::harness
