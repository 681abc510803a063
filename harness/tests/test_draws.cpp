// `dcpbench run --draws` (harness/draws.h): the spread statistics, the section against runs done
// by hand (draw d = steps [d*steps, (d+1)*steps) of the data stream), the results-file checks, and
// the dcp failure the first --draws run of Megatron's example found.
#include "core/error.h"
#include "harness/aggregate.h"
#include "harness/draws.h"
#include "harness/registry.h"
#include "harness/report.h"
#include "harness/results.h"
#include "harness/runner.h"
#include "harness/scenario.h"
#include "plan/validate.h"

#include "result_rows.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

namespace dcp::harness {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const fs::path kRepo = fs::path(__FILE__).parent_path().parent_path().parent_path();

json tiny_json() {
  return json::parse(R"({
    "name": "tiny-draws", "model": "tiny",
    "dataset": {"source": "lognormal", "mean": 300, "sigma": 1.2, "min": 16, "max": 4096},
    "cluster": {"gpus": 8, "tp": 1, "pp": 2, "cp": 2, "gpus_per_node": 4},
    "training": {"global_batch": 16, "max_seqlen": 4096, "max_seqlen_per_rank": 2048, "steps": 2, "seed": 3},
    "strategies": ["packing", "bshd", "megatron-dev", "dcp"]
  })");
}

TEST(Draws, SpreadIsNumpysLinearInterpolationAndKeepsDrawOrder) {
  // Hand-computed: sorted 1 2 3 4 10, h = 4q: median = x[2] = 3; p5: h = 0.2 -> 1 + 0.2 = 1.2;
  // p95: h = 3.8 -> 4 + 0.8 * 6 = 8.8. The draw without a value stays in "values" as null.
  const json s = spread_of({3.0, 10.0, std::nullopt, 1.0, 4.0, 2.0});
  EXPECT_DOUBLE_EQ(s["nominal"].get<double>(), 3);
  EXPECT_DOUBLE_EQ(s["median"].get<double>(), 3);
  EXPECT_DOUBLE_EQ(s["p5"].get<double>(), 1.2);
  EXPECT_DOUBLE_EQ(s["p95"].get<double>(), 8.8);
  EXPECT_DOUBLE_EQ(s["min"].get<double>(), 1);
  EXPECT_DOUBLE_EQ(s["max"].get<double>(), 10);
  EXPECT_EQ(s["values"], json::parse("[3, 10, null, 1, 4, 2]"));
  // Even count: the median interpolates the middle pair.
  EXPECT_DOUBLE_EQ(quantile_sorted({1, 2, 4, 8}, 0.5), 3);
  EXPECT_FALSE(spread_of({}).contains("median"));
  // Draw 0 without a value: no nominal (never another draw's figure).
  const json t = spread_of({std::nullopt, 1.5, 2.5});
  EXPECT_FALSE(t.contains("nominal"));
  EXPECT_DOUBLE_EQ(t["median"].get<double>(), 2.0);
}

using testing_rows::row;

TEST(Draws, ADrawWhereTheStrategyOrTheReferenceLacksNumbersGivesNoValue) {
  // Draw 0: the reference (packing) is invalid on step 1, so no strategy has a speedup there,
  // although "fast" would have one over step 0 alone. Draw 1: all valid. Draw 2: "fast" oom.
  std::vector<std::vector<ResultRow>> draws(3);
  for (int d = 0; d < 3; ++d)
    for (int step = 0; step < 2; ++step) {
      draws[d].push_back(row("packing", step, 2.0));
      draws[d].push_back(row("fast", step, 1.0 + 0.25 * d));
    }
  draws[0][2].plan_valid = false;  // packing, step 1
  draws[2][3].oom = true;          // fast, step 1
  const json st = draw_study(draws, {"packing", "fast"}, "packing");
  const json& fast = st["strategies"]["fast"];
  EXPECT_EQ(fast["speedup"]["values"], json::parse("[null, 1.6, null]"));
  EXPECT_FALSE(fast["speedup"].contains("nominal"));
  EXPECT_DOUBLE_EQ(fast["speedup"]["median"].get<double>(), 1.6);
  EXPECT_EQ(fast["oom_draws"].get<int>(), 1);
  EXPECT_EQ(fast["invalid_draws"].get<int>(), 0);
  EXPECT_EQ(st["strategies"]["packing"]["invalid_draws"].get<int>(), 1);
  EXPECT_EQ(st["draws"].get<int>(), 3);
  // Draw 0's strategies without numbers and the draws where the reference has none (helper-65).
  EXPECT_EQ(st["without_numbers"], json::parse(R"(["packing"])"));
  EXPECT_EQ(st["reference_without_numbers_draws"].get<int>(), 1);
  // The table ranks only the strategies with numbers, names the others apart, and counts the
  // draws that hold draw 0's ranking among the other draws (draw 0 holds it by definition).
  ResultsFile f;
  f.context = make_context("d", "c", "k", "t");
  f.rows = draws[0];
  json sc = st;
  sc["scenario"] = "s";
  sc["steps_per_draw"] = 2;
  f.draws = draws_section(3, json::array({sc}));
  ASSERT_TRUE(validate_results(results_to_json(f)).empty());
  std::ostringstream os;
  print_table(os, f);
  const std::string text = os.str();
  // Draw 1 ranks fast > packing as draw 0 does; draw 2, where fast is oom, does not.
  EXPECT_EQ(st["ranking_held"].get<int>(), 2);
  EXPECT_NE(text.find("ranking of draw 0 (fast; no numbers: packing) held in 1 of the 2 other draws of 2 steps, "
                      "its fastest in 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("the reference strategy has no numbers (oom, no valid plan or not in the run) in 1 of 3 draws"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("(a speedup in 1 of 3 draws: its own or the reference's step oom or invalid in the rest)"),
            std::string::npos)
      << text;
}

TEST(Draws, EachDrawIsTheNextStepsOfTheDataStreamAtTheSameSettings) {
  const Scenario s = parse_scenario(tiny_json(), "t.json");
  const int steps = s.training.steps;
  RunOptions opt;
  opt.draws = 3;
  opt.tune = true;
  const ResultsFile f = run_scenarios({s}, opt, builtin_planners());
  ASSERT_TRUE(f.draws.is_object());
  EXPECT_EQ(f.draws["draws"].get<int>(), 3);
  const json& sc = f.draws["scenarios"][0];
  EXPECT_EQ(sc["steps_per_draw"].get<int>(), steps);
  ASSERT_TRUE(sc.contains("tuned"));

  // Draws 1 and 2 by hand: the same scenario run for 3 * steps steps, its rows of steps
  // [d*steps, (d+1)*steps) aggregated alone.
  RunOptions longer;
  longer.steps = 3 * steps;
  const ResultsFile all = run_scenarios({s}, longer, builtin_planners());
  const auto published = aggregate(f);
  for (const std::string st : {"bshd", "megatron-dev", "dcp"}) {
    SCOPED_TRACE(st);
    const json& sp = sc["strategies"][st]["speedup"];
    const json& tr = sc["strategies"][st]["trimmed_speedup"];
    ASSERT_EQ(sp["values"].size(), 3u);
    for (const auto& a : published)
      if (a.strategy == st && a.setting == "published") {
        EXPECT_DOUBLE_EQ(sp["nominal"].get<double>(), *a.speedup_vs_reference);  // draw 0 = the table's
        EXPECT_DOUBLE_EQ(tr["nominal"].get<double>(), *a.trimmed_speedup_vs_reference);
      }
    for (int d = 1; d < 3; ++d) {
      ResultsFile part;
      for (const auto& r : all.rows)
        if (r.step >= d * steps && r.step < (d + 1) * steps) part.rows.push_back(r);
      for (const auto& a : aggregate(part))
        if (a.strategy == st) {
          EXPECT_DOUBLE_EQ(sp["values"][d].get<double>(), *a.speedup_vs_reference) << "draw " << d;
        }
    }
    EXPECT_LE(sp["min"].get<double>(), sp["p5"].get<double>());
    EXPECT_LE(sp["p5"].get<double>(), sp["median"].get<double>());
    EXPECT_LE(sp["median"].get<double>(), sp["p95"].get<double>());
    EXPECT_LE(sp["p95"].get<double>(), sp["max"].get<double>());
  }
  // Different batches give different numbers (a draw that reused draw 0's batches would not).
  const json& v = sc["strategies"]["bshd"]["speedup"]["values"];
  EXPECT_NE(v[0].get<double>(), v[1].get<double>());
  const int held = sc["ranking_held"].get<int>();
  EXPECT_GE(held, 1);  // draw 0 holds its own ranking
  EXPECT_LE(held, 3);
  EXPECT_GE(sc["first_held"].get<int>(), held);  // a draw with the whole ranking has its first
  EXPECT_LE(sc["first_held"].get<int>(), 3);
  EXPECT_EQ(sc["ranking"].size(), 4u);
  EXPECT_TRUE(validate_results(results_to_json(f)).empty());
}

TEST(Draws, ResultsCheckRejectsAWrongTypeInTheSection) {
  ResultsFile f;
  f.context = make_context("d", "c", "k", "t");
  f.draws = draws_section(2, json::array({{{"scenario", "s"},
                                           {"draws", 2},
                                           {"strategies", {{"dcp", {{"speedup", spread_of({1.2, 1.1})}}}}}}}));
  json j = results_to_json(f);
  EXPECT_TRUE(validate_results(j).empty());
  for (const auto& [where, bad] : std::vector<std::pair<json::json_pointer, json>>{
           {json::json_pointer("/draws/scenarios/0/strategies/dcp/speedup/p95"), "high"},
           {json::json_pointer("/draws/scenarios/0/strategies/dcp/speedup/values/1"), "x"},
           {json::json_pointer("/draws/scenarios/0/draws"), 0},
           {json::json_pointer("/draws/scenarios/0/ranking_held"), 3},  // more than its 2 draws
           {json::json_pointer("/draws/draws"), int64_t{1} << 40}}) {
    json k = j;
    k[where] = bad;
    const auto errs = validate_results(k);
    ASSERT_EQ(errs.size(), 1u) << where.to_string();
    EXPECT_NE(errs[0].find("\"draws\""), std::string::npos) << errs[0];
  }
}

// Found by the first `run --draws 100` of Megatron's example (2026-11-27): on the batch of step
// 1704 of megatron-example-8gpu every sample's marginal time was ~0 (the host floor absorbs it),
// the local search's running total drifted to -6.9e-18 and its "the surrogate never rises" check,
// relative only, failed on an unchanged total: dcp had no plan for that step.
TEST(Draws, DcpPlansTheHostBoundBatchOfMegatronsExample) {
  const Scenario s = load_scenario((kRepo / "scenarios" / "megatron-example-8gpu.json").string());
  RunOptions opt;
  opt.steps = 1;
  opt.strategies = {"dcp"};
  PreparedScenario p = prepare_scenario(s, opt, builtin_planners());
  sample_batches(p, 1704);
  const auto rows = run_strategy(p, p.cm, "dcp", published_setting(s), "published", opt, builtin_planners());
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_TRUE(rows[0].plan_valid) << rows[0].error;
  EXPECT_TRUE(rows[0].has_metrics());
}

}  // namespace
}  // namespace dcp::harness
