// The benchmark loop on a tiny scenario: one row per (strategy, step), every row of a step sees
// the same batch (same useful FLOPs, tokens and samples), packing's speedup is 1, the written
// results validate, and a planner that returns an invalid plan or throws is recorded in its row
// (plan_valid false, the violation named), never hidden and never simulated.
#include "baselines/planners.h"
#include "core/error.h"
#include "harness/registry.h"
#include "harness/report.h"
#include "harness/results.h"
#include "harness/runner.h"
#include "harness/scenario.h"
#include "sim/simulator.h"

#include <gtest/gtest.h>

#include <sstream>
#include <thread>

namespace dcp::harness {
namespace {

using nlohmann::json;

// Packing's plan with the last sample of the last group removed: find_violation must catch it.
class DropsASample : public plan::Planner {
 public:
  std::string name() const override { return "drops-a-sample"; }
  bool dynamic() const override { return false; }
  plan::Plan plan(const plan::Batch& batch, const plan::PlanConfig& config) const override {
    plan::PlannerRegistry r;
    baselines::register_baseline_planners(r);
    plan::Plan p = r.make("packing")->plan(batch, config);
    p.planner = name();
    auto& g = p.microbatches.back().groups.back();
    if (g.samples.size() > 1) g.samples.pop_back();
    else p.microbatches.pop_back();
    return p;
  }
};

class Throws : public plan::Planner {
 public:
  std::string name() const override { return "throws"; }
  bool dynamic() const override { return true; }
  plan::Plan plan(const plan::Batch&, const plan::PlanConfig&) const override {
    throw InputError("sample 3 (length 99999) needs more than the pool");
  }
};

plan::PlannerRegistry test_registry() {
  plan::PlannerRegistry r;
  baselines::register_baseline_planners(r);
  r.add("drops-a-sample", [] { return std::make_unique<DropsASample>(); });
  r.add("throws", [] { return std::make_unique<Throws>(); });
  return r;
}

Scenario tiny_scenario() {
  return parse_scenario(json::parse(R"({
    "name": "tiny", "notes": ["test"],
    "model": "tiny",
    "dataset": {"source": "lognormal", "mean": 300, "sigma": 1.0, "min": 16, "max": 4096},
    "cluster": {"gpus": 8, "tp": 1, "pp": 2, "cp": 2, "gpus_per_node": 4, "hardware": "h100-sxm"},
    "training": {"global_batch": 32, "max_seqlen": 4096, "max_seqlen_per_rank": 2048, "steps": 2, "seed": 3},
    "strategies": ["packing", "bshd", "drops-a-sample", "throws"]
  })"), "tiny.json");
}

// The still-running ticker reports what it was told, in whole lines, and nothing after at(""):
// the ticks go on for many periods after it (the scope had ended right after at(""), so no tick
// could fall there) and print nothing, and no line reports an empty place. The progress line
// comes after at(""), so at most one ticker line follows it: the one tick that may have read the
// place just before at("") (one tick at a time; every later one reads "").
TEST(Runner, HeartbeatPrintsWhereTheRunIs) {
  std::ostringstream out;
  {
    Heartbeat hb(out, std::chrono::milliseconds(10));
    hb.at("scenario x, dcp (published), step 2 of 5");
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    hb.at("");
    hb.print("a progress line\n");
    std::this_thread::sleep_for(std::chrono::milliseconds(150));  // 15 periods with nothing to report
  }
  const std::string s = out.str();
  EXPECT_NE(s.find("dcpbench run: still running ("), std::string::npos) << s;
  EXPECT_NE(s.find(" s): scenario x, dcp (published), step 2 of 5\n"), std::string::npos) << s;
  EXPECT_NE(s.find("a progress line\n"), std::string::npos) << s;
  std::istringstream lines(s);
  int after = -1;  // ticker lines after the progress line
  for (std::string line; std::getline(lines, line);) {
    if (line == "a progress line") {
      after = 0;
      continue;
    }
    EXPECT_EQ(line.rfind("dcpbench run: still running (", 0), 0u) << line;
    EXPECT_TRUE(line.ends_with(" s): scenario x, dcp (published), step 2 of 5")) << line;
    if (after >= 0) ++after;
  }
  EXPECT_LE(after, 1) << s;
}

// A scenario that loads but cannot draw a batch fails the run before any scenario has run (it had
// failed only after the scenarios before it, minutes of work lost; exploratory test of stop 44).
TEST(Runner, AScenarioThatCannotDrawABatchFailsBeforeAnyRuns) {
  const auto registry = test_registry();
  Scenario bad = tiny_scenario();
  bad.name = "no-samples";
  bad.dataset.min_len = 8192;  // every document above max_seqlen 4096, and long: drop
  bad.dataset.max_len = 16384;
  bad.dataset.long_policy = "drop";
  std::ostringstream progress;
  RunOptions o;
  o.progress = &progress;
  o.strategies = {"packing"};
  int rows = 0;
  o.on_row = [&](ResultRow&, const RowSource&) { ++rows; };
  try {
    run_scenarios({tiny_scenario(), bad}, o, registry);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("longer than max_seqlen"), std::string::npos) << e.what();
  }
  EXPECT_EQ(rows, 0);
  EXPECT_EQ(progress.str().find("steps x"), std::string::npos) << progress.str();
  // The first scenario's batches drawn in that check are the ones it runs with: the same rows.
  o.on_row = nullptr;
  const ResultsFile one = run_scenarios({tiny_scenario()}, o, registry);
  Scenario other = tiny_scenario();
  other.name = "other";
  const ResultsFile two = run_scenarios({tiny_scenario(), other}, o, registry);
  ASSERT_EQ(two.rows.size(), 2 * one.rows.size());
  for (size_t i = 0; i < one.rows.size(); ++i) {
    EXPECT_EQ(two.rows[i].tokens, one.rows[i].tokens);
    EXPECT_EQ(two.rows[i].step_time_s, one.rows[i].step_time_s);
    EXPECT_EQ(two.rows[one.rows.size() + i].step_time_s, one.rows[i].step_time_s);
  }
}

// Leaving out the reference strategy gives rows without speedups and says so on the progress stream.
TEST(Runner, NotesThatTheReferenceIsNotRun) {
  const auto registry = test_registry();
  std::ostringstream progress;
  RunOptions o;
  o.progress = &progress;
  o.strategies = {"bshd"};
  const ResultsFile r = run_scenarios({tiny_scenario()}, o, registry);
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_FALSE(r.rows[0].speedup_vs_packing.has_value());
  EXPECT_NE(progress.str().find("tiny: note: the reference strategy \"packing\" is not among the strategies run"),
            std::string::npos)
      << progress.str();
  o.strategies = {"bshd", "packing"};
  progress.str("");
  run_scenarios({tiny_scenario()}, o, registry);
  EXPECT_EQ(progress.str().find("note:"), std::string::npos) << progress.str();
}

TEST(Runner, RowsPerStrategyAndStepWithSharedBatch) {
  const auto registry = test_registry();
  const ResultsFile r = run_scenarios({tiny_scenario()}, RunOptions{}, registry);
  ASSERT_EQ(r.rows.size(), 8u);  // 2 steps x 4 strategies
  EXPECT_TRUE(validate_results(results_to_json(r)).empty());
  for (int step = 0; step < 2; ++step) {
    const ResultRow& packing = r.rows[static_cast<size_t>(step) * 4];
    ASSERT_EQ(packing.strategy, "packing");
    ASSERT_TRUE(packing.plan_valid) << packing.error;
    ASSERT_TRUE(packing.speedup_vs_packing.has_value());
    EXPECT_DOUBLE_EQ(*packing.speedup_vs_packing, 1.0);
    EXPECT_GT(packing.tflops_per_gpu, 0);
    EXPECT_GT(packing.useful_tflop, 0);
    EXPECT_EQ(packing.samples, 32);
    EXPECT_EQ(packing.source.rfind("simulated:", 0), 0u) << packing.source;
    for (int k = 1; k < 4; ++k) {
      const ResultRow& row = r.rows[static_cast<size_t>(step) * 4 + k];
      EXPECT_EQ(row.step, step);
      EXPECT_DOUBLE_EQ(row.useful_tflop, packing.useful_tflop) << row.strategy;
      EXPECT_EQ(row.tokens, packing.tokens) << row.strategy;
    }
    // Same useful FLOPs => TFLOPS ratio is the inverse step-time ratio.
    const ResultRow& bshd = r.rows[static_cast<size_t>(step) * 4 + 1];
    ASSERT_TRUE(bshd.plan_valid) << bshd.error;
    EXPECT_NEAR(bshd.tflops_per_gpu / packing.tflops_per_gpu, packing.step_time_s / bshd.step_time_s, 1e-9);
    EXPECT_NEAR(*bshd.speedup_vs_packing, packing.step_time_s / bshd.step_time_s, 1e-12);
  }
  // Step-0 details for the charts, only for valid plans.
  EXPECT_EQ(r.rows[0].rank_busy_s.size(), 4u);  // pool = dp 2 x cp 2
  EXPECT_TRUE(r.rows[0].plan.is_array());
  EXPECT_TRUE(r.rows[4].rank_busy_s.empty());   // step 1
}

// A tensor-parallel scenario runs end to end: every strategy's plans are valid, the same batches
// give the same useful FLOPs as at tp 1 on half the GPUs, and TP's exposed collectives show in
// the communication column (the tiny model's ring transfers hide under its attention at tp 1).
TEST(Runner, TensorParallelScenarioRunsAndPaysItsCollectives) {
  const auto& registry = builtin_planners();
  Scenario one = tiny_scenario();
  one.strategies = {"packing", "megatron-dev", "dcp"};
  Scenario two = one;
  two.cluster.tp = 2;
  two.cluster.gpus = 16;
  two.cluster.gpus_per_node = 8;
  two.training.sequence_parallel = true;
  RunOptions opts;
  const ResultsFile r1 = run_scenarios({one}, opts, registry);
  const ResultsFile r2 = run_scenarios({two}, opts, registry);
  ASSERT_EQ(r1.rows.size(), r2.rows.size());
  EXPECT_TRUE(validate_results(results_to_json(r2)).empty());
  EXPECT_EQ(r2.scenarios.at(0).at("tp"), 2);
  EXPECT_EQ(r2.scenarios.at(0).at("sequence_parallel"), true);
  for (size_t i = 0; i < r2.rows.size(); ++i) {
    const ResultRow& a = r1.rows[i];
    const ResultRow& b = r2.rows[i];
    ASSERT_TRUE(b.plan_valid) << b.strategy << ": " << b.error;
    EXPECT_DOUBLE_EQ(b.useful_tflop, a.useful_tflop) << b.strategy;
    EXPECT_GT(b.comm_s, a.comm_s) << b.strategy << " step " << b.step;
    // The lower bound keeps TP's synchronous collectives' bandwidth time and host calls: still a bound.
    EXPECT_GT(b.plan_efficiency, 0.0) << b.strategy;
    EXPECT_LE(b.plan_efficiency, 1.0) << b.strategy;
  }
}

// The scenario's "data" facts sum what the dataset rules did to the run's batches, and the table
// prints them (helper-67: llama13b-github drops 42% of the documents it draws, which nothing showed).
TEST(Runner, DataFactsSayWhatTheDatasetRulesDid) {
  json j = json::parse(R"({
    "name": "drops", "model": "tiny",
    "dataset": {"source": "lognormal", "mean": 300, "sigma": 1.0, "min": 16, "max": 4096, "min_seqlen": 200,
                "pad_multiple": 8},
    "cluster": {"gpus": 8, "tp": 1, "pp": 2, "cp": 2, "gpus_per_node": 4},
    "training": {"global_batch": 32, "max_seqlen": 1024, "max_seqlen_per_rank": 2048, "steps": 2, "seed": 3},
    "strategies": ["packing"]
  })");
  const Scenario s = parse_scenario(j, "drops.json");
  const auto registry = test_registry();
  const ResultsFile r = run_scenarios({s}, RunOptions{}, registry);
  ASSERT_EQ(r.scenarios.size(), 1u);
  const json& d = r.scenarios[0]["data"];
  PreparedScenario p = prepare_scenario(s, RunOptions{}, registry);
  sample_batches(p);
  int64_t drawn = 0, dropped = 0, split = 0, padding = 0, real = 0;
  for (const auto& b : p.batches) {
    drawn += b.documents_drawn;
    dropped += b.samples_dropped;
    split += b.documents_split;
    padding += b.padding_tokens;
    for (int64_t l : b.real_lengths) real += l;
  }
  EXPECT_GT(dropped, 0);
  EXPECT_GT(split, 0);
  EXPECT_EQ(d["steps"].get<int64_t>(), 2);
  EXPECT_EQ(d["samples"].get<int64_t>(), 64);
  EXPECT_EQ(d["documents_drawn"].get<int64_t>(), drawn);
  EXPECT_EQ(d["samples_dropped"].get<int64_t>(), dropped);
  EXPECT_EQ(d["documents_split"].get<int64_t>(), split);
  EXPECT_EQ(d["padding_tokens"].get<int64_t>(), padding);
  EXPECT_EQ(d["real_tokens"].get<int64_t>(), real);
  EXPECT_TRUE(validate_results(results_to_json(r)).empty());
  std::ostringstream os;
  print_table(os, r);
  // With splits, the dropped count holds short chunks too: not worded as a share of documents.
  EXPECT_NE(os.str().find("  data: 64 samples from " + std::to_string(drawn) + " documents over 2 steps; " +
                          std::to_string(dropped) + " documents or chunks dropped by the dataset rules; " +
                          std::to_string(split) + " documents split into chunks"),
            std::string::npos)
      << os.str();
  json bad = results_to_json(r);
  bad["scenarios"][0]["data"]["samples"] = -1;
  EXPECT_FALSE(validate_results(bad).empty());
}

// plan_request_of is the request run_strategy plans (so `dcpbench share` sees the plan `run`
// reports), and sample_batches(p, first) draws a step's batch independently of the others.
TEST(Runner, PlanRequestOfAStepIsWhatRunPlans) {
  const auto registry = test_registry();
  const Scenario s = tiny_scenario();
  RunOptions opt;
  opt.strategies = {"packing", "bshd"};
  const ResultsFile r = run_scenarios({s}, opt, registry);
  PreparedScenario p = prepare_scenario(s, opt, registry);
  p.steps = 1;
  sample_batches(p, 1);  // step 1 alone
  const Setting setting = published_setting(s);
  const cost::CostModel cm = cost_model_at(p.cm, setting);
  for (const std::string strategy : {"packing", "bshd"}) {
    const plan::PlanRequest req = plan_request_of(p, cm, strategy, plan_config_of(s, setting), 0, 0, registry);
    const plan::Plan plan = req.planner->plan(req.batch, req.config);
    const double step_s = sim::simulate_step(plan, req.batch, cm, p.batches[0].real_lengths).step_s;
    bool found = false;
    for (const ResultRow& row : r.rows)
      if (row.strategy == strategy && row.step == 1) {
        found = true;
        EXPECT_DOUBLE_EQ(row.step_time_s, step_s) << strategy;
      }
    EXPECT_TRUE(found) << strategy;
  }
  EXPECT_THROW(plan_request_of(p, cm, "packing", plan_config_of(s, setting), 1, 0, registry), Error);
}

// The planners' scorer (planner_options_of: estimate and step_time_s, with their memo of the
// samples' attention times, cost::AttnTermsMemo) rates a plan exactly as the simulator alone does,
// on its first plans and after the memo has seen them (packed and padded plans, CP rings of 2).
TEST(Runner, PlannerOptionsScoreExactlyAsTheSimulator) {
  const auto registry = test_registry();
  const Scenario s = tiny_scenario();
  RunOptions opt;
  PreparedScenario p = prepare_scenario(s, opt, registry);
  sample_batches(p, 0);
  const Setting setting = published_setting(s);
  const cost::CostModel cm = cost_model_at(p.cm, setting);
  const auto& sb = p.batches[0];
  const plan::PlannerOptions o = planner_options_of(cm, sb, s.training.max_seqlen_per_rank);
  ASSERT_TRUE(o.estimate && o.step_time_s);
  int scored = 0;
  for (int pass = 0; pass < 2; ++pass) {
    for (const std::string strategy : {"packing", "bshd"}) {
      const plan::PlanRequest req = plan_request_of(p, cm, strategy, plan_config_of(s, setting), 0, 0, registry);
      const plan::Plan plan = req.planner->plan(req.batch, req.config);
      const sim::StepResult alone = sim::simulate_step(plan, req.batch, cm, sb.real_lengths, sim::Bound::skip);
      if (req.batch.lengths == sb.batch.lengths) {  // the options were made for this batch
        const auto e = o.estimate(plan);
        EXPECT_EQ(e.step_s, alone.step_s) << strategy;
        EXPECT_EQ(e.fits, alone.fits) << strategy;
        EXPECT_EQ(e.peak_bytes, alone.peak_memory_bytes) << strategy;
        EXPECT_EQ(o.step_time_s(plan), alone.step_s) << strategy;
        ++scored;
      }
    }
  }
  EXPECT_GE(scored, 2);
}

TEST(Runner, InvalidPlanIsRecordedNotHidden) {
  const auto registry = test_registry();
  const ResultsFile r = run_scenarios({tiny_scenario()}, RunOptions{}, registry);
  const ResultRow& bad = r.rows[2];
  ASSERT_EQ(bad.strategy, "drops-a-sample");
  EXPECT_FALSE(bad.plan_valid);
  EXPECT_NE(bad.error.find("invalid plan"), std::string::npos) << bad.error;
  EXPECT_NE(bad.error.find("sample"), std::string::npos) << bad.error;
  const json j = row_to_json(bad);
  EXPECT_TRUE(j["tflops_per_gpu"].is_null());
  const ResultRow& threw = r.rows[3];
  EXPECT_FALSE(threw.plan_valid);
  EXPECT_NE(threw.error.find("needs more than the pool"), std::string::npos) << threw.error;
}

TEST(Runner, StrategyFilterAndStepsOverride) {
  const auto registry = test_registry();
  RunOptions opt;
  opt.steps = 1;
  opt.strategies = {"packing"};
  const ResultsFile r = run_scenarios({tiny_scenario()}, opt, registry);
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(r.rows[0].strategy, "packing");
  opt.strategies = {"no-such-planner"};
  EXPECT_THROW(run_scenarios({tiny_scenario()}, opt, registry), InputError);
}

TEST(Runner, UnknownStrategyNamesFileKeyAndValue) {
  json j = json::parse(R"({
    "name": "t", "model": "tiny",
    "dataset": {"source": "lognormal", "mean": 300, "sigma": 1.0},
    "cluster": {"gpus": 4, "cp": 2},
    "training": {"global_batch": 8, "max_seqlen": 2048, "max_seqlen_per_rank": 1024},
    "strategies": ["packing", "packign"]
  })");
  const auto registry = test_registry();
  try {
    run_scenarios({parse_scenario(j, "scenarios/t.json")}, RunOptions{}, registry);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("scenarios/t.json: \"strategies[1]\"=\"packign\" is not a known planner"),
              std::string::npos) << e.what();
  }
}

// A plan the simulator refuses to size (kMaxScheduleEntries: bshd's 262,144 micro-batches on a pool
// of 512) is an input error that names the scenario file, strategy, setting and step: the
// simulator's own line named none (audit of helper-48).
TEST(Runner, ASimulatorLimitNamesTheScenarioStrategyAndStep) {
  json j = json::parse(R"({
    "name": "t", "model": "tiny",
    "dataset": {"source": "lognormal", "mean": 300, "sigma": 1.0, "min": 16, "max": 2048},
    "cluster": {"gpus": 512, "cp": 512, "gpus_per_node": 8},
    "training": {"global_batch": 262144, "max_seqlen": 2048, "max_seqlen_per_rank": 2048, "steps": 1},
    "strategies": ["bshd"], "reference_strategy": "bshd"
  })");
  try {
    run_scenarios({parse_scenario(j, "scenarios/t.json")}, RunOptions{}, test_registry());
    FAIL() << "no error";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("scenarios/t.json: bshd (published), step 0: simulating this plan needs ", 0), 0u) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
}

TEST(Runner, UnknownModelPresetNamesFileAndKey) {
  json j = json::parse(R"({
    "name": "t", "model": "llama-14b",
    "dataset": {"source": "lognormal", "mean": 300, "sigma": 1.0},
    "cluster": {"gpus": 4, "cp": 2},
    "training": {"global_batch": 8, "max_seqlen": 2048, "max_seqlen_per_rank": 1024},
    "strategies": ["packing"]
  })");
  try {
    run_scenarios({parse_scenario(j, "scenarios/t.json")}, RunOptions{}, test_registry());
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("scenarios/t.json: \"model\"=\"llama-14b\""), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dcp::harness
