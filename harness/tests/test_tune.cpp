// Issue 8's harness pieces: oom rows (no speed figures, written and read back), the reference
// strategy field, the aggregates written into the results file, Megatron's trimmed mean, the
// scenario "sources" check, the --tune search space and best-setting choice, and the speedup /
// ranking summary the sensitivity study reports.
#include "baselines/planners.h"
#include "core/error.h"
#include "harness/aggregate.h"
#include "harness/registry.h"
#include "harness/report.h"
#include "harness/results.h"
#include "harness/runner.h"
#include "harness/scenario.h"
#include "harness/tune.h"

#include "result_rows.h"

#include "data/numpy_legacy.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <sstream>

namespace dcp::harness {
namespace {

using nlohmann::json;

json tiny_json() {
  return json::parse(R"({
    "name": "tiny-tune", "model": "tiny",
    "dataset": {"source": "lognormal", "mean": 300, "sigma": 1.0, "min": 16, "max": 4096},
    "cluster": {"gpus": 8, "tp": 1, "pp": 2, "cp": 2, "gpus_per_node": 4},
    "training": {"global_batch": 32, "max_seqlen": 4096, "max_seqlen_per_rank": 2048, "steps": 2, "seed": 3},
    "strategies": ["packing", "bshd"]
  })");
}

plan::PlannerRegistry registry() {
  plan::PlannerRegistry r;
  baselines::register_baseline_planners(r);
  return r;
}

using testing_rows::row;

TEST(Results, OomRowHasNoSpeedFiguresAndRoundTrips) {
  ResultsFile f;
  f.context = make_context("d", "c", "k", "t");
  f.rows.push_back(row("packing", 0, 2.0));
  ResultRow oom = row("dyn", 0, 1.0);
  oom.oom = true;
  oom.peak_memory_gib = 91.5;
  f.rows.push_back(oom);
  const json j = results_to_json(f);
  EXPECT_TRUE(validate_results(j).empty());
  EXPECT_TRUE(j["rows"][1]["oom"].get<bool>());
  EXPECT_TRUE(j["rows"][1]["step_time_s"].is_null());  // never a number
  EXPECT_TRUE(j["rows"][1]["tflops_per_gpu"].is_null());
  EXPECT_DOUBLE_EQ(j["rows"][1]["peak_memory_gib"].get<double>(), 91.5);
  EXPECT_FALSE(j["rows"][0].contains("oom"));
  const ResultRow back = row_from_json(j["rows"][1]);
  EXPECT_TRUE(back.oom);
  EXPECT_FALSE(back.has_metrics());
  EXPECT_EQ(row_to_json(back), j["rows"][1]);
  // The aggregates are in the file: the oom strategy is reported as such, without numbers.
  ASSERT_EQ(j["aggregates"].size(), 2u);
  EXPECT_EQ(j["aggregates"][1]["oom_steps"], 1);
  EXPECT_FALSE(j["aggregates"][1]["valid"].get<bool>());
  EXPECT_FALSE(j["aggregates"][1].contains("step_time_s"));
  // A valid row with a null metric but no oom flag is still rejected.
  json bad = j;
  bad["rows"][1].erase("oom");
  EXPECT_FALSE(validate_results(bad).empty());
}

TEST(Aggregate, ReferenceStrategyAndMegatronsTrimmedMean) {
  // Megatron's statistic: 20 values, drop int(2.0) = 2 from each end.
  std::vector<double> v;
  for (int i = 1; i <= 20; ++i) v.push_back(i);
  v[0] = 1000;  // an outlier at one end is trimmed
  EXPECT_DOUBLE_EQ(trimmed_mean(v), 11.5);  // sorted 2..20, 1000: drop 2, 3 and 20, 1000 -> mean of 4..19
  EXPECT_DOUBLE_EQ(trimmed_mean({5, 7}), 6);                // n < 10: nothing trimmed
  ResultsFile f;
  f.context = make_context("d", "c", "k", "t");
  for (int s = 0; s < 2; ++s) {
    f.rows.push_back(row("a", s, 4.0));
    f.rows.push_back(row("b", s, 2.0));
  }
  for (auto& r : f.rows) r.reference = "b";  // speedups against b, not packing
  const auto aggs = aggregate(f);
  ASSERT_EQ(aggs.size(), 2u);
  EXPECT_DOUBLE_EQ(*aggs[0].speedup_vs_reference, 0.5);
  EXPECT_DOUBLE_EQ(*aggs[1].speedup_vs_reference, 1.0);
  EXPECT_DOUBLE_EQ(*aggs[0].trimmed_speedup_vs_reference, 0.5);
  EXPECT_EQ(how_obtained(f), "simulated");
  f.rows[0].source = "measured:H100";
  EXPECT_EQ(how_obtained(f), "simulated and measured");
}

TEST(Scenario, SourcesMustNameKeysOfTheScenarioAndReferenceMustBeAStrategy) {
  json j = tiny_json();
  j["sources"] = {{"training.global_batch", "script:12"}, {"cluster.cp", "script:3"}};
  const Scenario s = parse_scenario(j, "t.json");
  EXPECT_EQ(s.sources.at("cluster.cp"), "script:3");
  EXPECT_EQ(s.reference_strategy, "packing");
  j["sources"]["training.warp"] = "nowhere";
  try {
    parse_scenario(j, "t.json");
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("sources.training.warp"), std::string::npos) << e.what();
  }
  j = tiny_json();
  j["reference_strategy"] = "megatron-dev";
  EXPECT_THROW(parse_scenario(j, "t.json"), InputError);
  j["reference_strategy"] = "bshd";
  EXPECT_EQ(parse_scenario(j, "t.json").reference_strategy, "bshd");
  j["training"]["attention_backend"] = "fa9";
  EXPECT_THROW(parse_scenario(j, "t.json"), InputError);
}

TEST(Tune, SearchSpaceHoldsThePublishedSettingAndOnlyLegalKnobs) {
  json j = tiny_json();
  j["training"]["global_batch"] = 64;
  const Scenario s = parse_scenario(j, "t.json");
  const int layers = 4;  // pp 2: vpp 2 (4 % (2*2) == 0) is legal, vpp 3 is not
  const auto dyn = tune_space(s, layers, true);
  const auto stat = tune_space(s, layers, false);
  auto has = [](const std::vector<Setting>& v, int64_t m, int cp, int vpp) {
    for (const auto& x : v)
      if (x.max_seqlen_per_rank == m && x.cp == cp && x.vpp == vpp) return true;
    return false;
  };
  EXPECT_TRUE(has(dyn, 2048, 2, 1));  // the published setting
  EXPECT_TRUE(has(dyn, 1024, 2, 2));
  EXPECT_FALSE(has(dyn, 512, 2, 2));   // the pool's 4 ranks x 512 cannot hold a 4096-token sample
  EXPECT_FALSE(has(dyn, 2048, 1, 1));  // dynamic planners keep the pool's static cp
  EXPECT_TRUE(has(stat, 4096, 1, 1));
  EXPECT_FALSE(has(stat, 2048, 1, 1));  // one rank x 2048 cannot hold a 4096-token sample
  EXPECT_TRUE(has(stat, 4096, 4, 2));
  for (const auto& x : stat) {
    EXPECT_NE(x.vpp, 3);
    EXPECT_EQ(64 % (4 / x.cp), 0);
    EXPECT_GE(x.max_seqlen_per_rank, 512);
    EXPECT_LE(x.max_seqlen_per_rank, 4096);
    EXPECT_GE(x.cp * x.max_seqlen_per_rank, 4096);  // max_seqlen
  }
  for (const auto& x : dyn) EXPECT_GE(4 * x.max_seqlen_per_rank, 4096);
}

// The second pass of --tune: M between the octaves around the best setting, at its cp and VPP,
// within the first pass's range and max_seqlen rule.
TEST(Tune, RefinementTriesMBetweenTheOctavesAroundTheBest) {
  json j = tiny_json();
  j["training"]["global_batch"] = 64;
  const Scenario s = parse_scenario(j, "t.json");  // M0 2048, max_seqlen 4096, pool 4, cp 2
  auto ms = [](const std::vector<Setting>& v) {
    std::vector<int64_t> out;
    for (const auto& x : v) out.push_back(x.max_seqlen_per_rank);
    return out;
  };
  const auto dyn = tune_refinement(s, Setting{2048, 2, 2}, true);
  EXPECT_EQ(ms(dyn), (std::vector<int64_t>{1280, 1536, 1792, 2560, 3072, 3584}));
  for (const auto& x : dyn) {
    EXPECT_EQ(x.cp, 2);
    EXPECT_EQ(x.vpp, 2);
  }
  // Static at cp 2: 2 x M must hold the 4096-token sample, so nothing below 2048.
  EXPECT_EQ(ms(tune_refinement(s, Setting{2048, 2, 1}, false)), (std::vector<int64_t>{2560, 3072, 3584}));
  // At the top of the range (max(2 M0, max_seqlen) = 4096) nothing above it, and at cp 1 nothing
  // below (one rank must hold the 4096-token sample).
  EXPECT_EQ(ms(tune_refinement(s, Setting{4096, 1, 1}, false)), (std::vector<int64_t>{}));
  EXPECT_EQ(ms(tune_refinement(s, Setting{4096, 2, 1}, false)), (std::vector<int64_t>{2560, 3072, 3584}));
}

// A static planner at a tuned cp pads as Megatron does at that cp (2 x cp, 1 at cp 1, x tp with
// sequence parallelism) when the scenario's pad_multiple is Megatron's at its own cp; a multiple of the scenario's own
// choosing stays; dynamic planners keep pad_multiple_dynamic.
TEST(Tune, StaticPaddingFollowsTheTunedCp) {
  json j = tiny_json();
  j["dataset"]["pad_multiple"] = 4;  // 2 x cp 2
  j["dataset"]["pad_multiple_dynamic"] = 8;
  const Scenario s = parse_scenario(j, "t.json");
  EXPECT_EQ(static_pad_multiple(s, 2), 4);
  EXPECT_EQ(static_pad_multiple(s, 4), 8);
  EXPECT_EQ(static_pad_multiple(s, 1), 1);
  EXPECT_EQ(planner_length(s, 13, false, 4), 16);
  EXPECT_EQ(planner_length(s, 13, false, 1), 13);
  EXPECT_EQ(planner_length(s, 13, false, 2), 16);
  EXPECT_EQ(planner_length(s, 13, true, 4), 16);
  EXPECT_EQ(planner_length(s, 17, true, 1), 24);
  json own = j;
  own["dataset"]["pad_multiple"] = 2;  // not 2 x cp: the scenario's own choice
  const Scenario o = parse_scenario(own, "o.json");
  EXPECT_EQ(static_pad_multiple(o, 4), 2);
  // With tensor (sequence) parallelism Megatron's divisor is x tp: 2 x cp x tp, tp at cp 1.
  json tp = j;
  tp["cluster"]["gpus"] = 16;
  tp["cluster"]["tp"] = 2;
  tp["cluster"]["gpus_per_node"] = 8;
  tp["training"]["sequence_parallel"] = true;
  tp["dataset"]["pad_multiple"] = 8;  // 2 x cp 2 x tp 2
  const Scenario t = parse_scenario(tp, "tp.json");
  EXPECT_EQ(static_pad_multiple(t, 4), 16);
  EXPECT_EQ(static_pad_multiple(t, 1), 2);
  tp["dataset"]["pad_multiple"] = 4;  // 2 x cp, not Megatron's at tp 2: the scenario's own choice
  EXPECT_EQ(static_pad_multiple(parse_scenario(tp, "tp.json"), 4), 4);
  // The batch a static planner plans at cp 4 holds multiples of 8.
  const auto reg = registry();
  RunOptions opt;
  PreparedScenario p = prepare_scenario(s, opt, reg);
  sample_batches(p);
  const cost::CostModel cm = cost_model_at(p.cm, Setting{2048, 4, 1});
  const plan::PlanRequest req =
      plan_request_of(p, cm, "packing", plan_config_of(s, Setting{2048, 4, 1}), 0, 0, reg);
  bool some_unaligned_real = false;
  for (size_t i = 0; i < req.batch.lengths.size(); ++i) {
    EXPECT_EQ(req.batch.lengths[i] % 8, 0) << i;
    some_unaligned_real = some_unaligned_real || p.batches[0].real_lengths[i] % 8 != 0;
  }
  EXPECT_TRUE(some_unaligned_real);
}

TEST(Tune, TunedRowsAreNeverWorseWhereTheSettingWasPicked) {
  const Scenario s = parse_scenario(tiny_json(), "t.json");
  const auto reg = registry();
  RunOptions opt;
  opt.tune = true;
  const ResultsFile f = run_scenarios({s}, opt, reg);
  EXPECT_EQ(f.context.value("tune_pick", ""), kTunePickHeldOut);  // evaluate and table say how it was picked
  for (const std::string st : {"packing", "bshd"}) {
    int tuned_rows = 0;
    for (const auto& r : f.rows) {
      if (r.strategy != st || !r.has_metrics()) continue;
      if (r.setting == "tuned") {
        ++tuned_rows;
        EXPECT_TRUE(r.knobs.is_object());
        EXPECT_EQ(r.reference, "packing");
      }
    }
    EXPECT_EQ(tuned_rows, 2) << st;
  }
  // On the selection batches, where the setting was picked, it is never slower than the published
  // one (which is in the search space); on the run's own batches it may be (a held-out pick).
  RunOptions plain;
  PreparedScenario sel = prepare_scenario(s, plain, reg);
  sel.sampler.seed = tune_selection_seed(sel.sampler.seed);
  sample_batches(sel);
  const std::map<std::string, Setting> picked = tuned_settings(f.rows);
  for (const std::string st : {"packing", "bshd"}) {
    double pub = 0, tuned = 0;
    for (const auto& r : run_strategy(sel, sel.cm, st, published_setting(s), "published", plain, reg)) pub += r.step_time_s;
    for (const auto& r : run_strategy(sel, sel.cm, st, picked.at(st), "tuned", plain, reg)) tuned += r.step_time_s;
    EXPECT_GT(tuned, 0) << st;
    EXPECT_LE(tuned, pub * (1 + 1e-12)) << st;
  }
  // Tuned speedups are against tuned packing: packing (tuned) is exactly 1.
  for (const auto& a : aggregate(f)) {
    if (a.strategy == "packing" && a.setting == "tuned") {
      EXPECT_DOUBLE_EQ(*a.speedup_vs_reference, 1.0);
    }
  }
}

// The legend of the table and the evaluation: a run without --tune says so (it had said "in-sample;
// results written before 2026-12-06" on a file written the same day, helper-47); merged files name
// each way; an old file without the key keeps the in-sample wording.
TEST(Tune, PickPhraseSaysHowOrWhetherTunedSettingsWerePicked) {
  const Scenario s = parse_scenario(tiny_json(), "t.json");
  RunOptions opt;
  opt.strategies = {"packing"};
  const ResultsFile f = run_scenarios({s}, opt, registry());
  EXPECT_EQ(f.context.value("tune_pick", ""), kTunePickNone);
  const auto phrase = [](const char* v) {
    nlohmann::json c = nlohmann::json::object();
    if (v) c["tune_pick"] = v;
    return tune_pick_phrase(c);
  };
  EXPECT_EQ(tune_pick_phrase(f.context), "not searched here (run without --tune: no tuned rows)");
  EXPECT_NE(phrase("held-out").find("held-out selection batches"), std::string::npos);
  EXPECT_EQ(phrase("held-out + none"), phrase("held-out"));
  EXPECT_EQ(phrase("none + none"), phrase("none"));
  EXPECT_NE(phrase(nullptr).find("in-sample; results written before 2026-12-06"), std::string::npos);
  EXPECT_EQ(phrase("in-sample + held-out"), "picked on held-out batches in some files, in-sample in others");
  EXPECT_EQ(phrase("in-sample + none"), phrase(nullptr));
  // A results file without a tuned row is "not searched", whatever its context says (an old file
  // has no "tune_pick"); with one, the context decides.
  ResultsFile old = f;
  old.context.erase("tune_pick");
  EXPECT_EQ(tune_pick_phrase(old), phrase("none"));
  ASSERT_FALSE(old.rows.empty());
  old.rows[0].setting = "tuned";
  EXPECT_EQ(tune_pick_phrase(old), phrase(nullptr));
}

// --tune picks on held-out batches (tune.h): the fastest setting over both passes (the
// power-of-two grid and, at each (cp, VPP)'s best M of it, the refinement; recomputed here setting
// by setting) on the selection batches (another seed's steps), then reports that setting's rows
// on the run's own batches. The test needs a case where that pick is a refinement (the grid alone
// misses it) and differs from the pick on the run's own batches, so that an in-sample pick or a
// grid-only search fails it: the first of Megatron's examples (8, 4, 16, 32, 64 GPUs) where
// packing's is (on 2026-12-06 the 8-GPU one: cp 4, M 2560, against M 4096 on the run's batches;
// since the examples replay Megatron's own batches, 2026-12-07, see the commit).
TEST(Tune, TunedRowsAreTheBestOfBothPassesOnHeldOutBatches) {
  const auto repo = std::filesystem::path(__FILE__).parent_path().parent_path().parent_path();
  const auto reg = registry();
  RunOptions opt;
  const double none = std::numeric_limits<double>::infinity();
  for (const char* gpus : {"8", "4", "16", "32", "64"}) {
    SCOPED_TRACE(std::string("megatron-example-") + gpus + "gpu");
    Scenario s = load_scenario((repo / "scenarios" / (std::string("megatron-example-") + gpus + "gpu.json")).string());
    s.strategies = {"packing"};
    PreparedScenario p = prepare_scenario(s, opt, reg);
    sample_batches(p);
    PreparedScenario sel = p;
    sample_selection_batches(sel);  // the windows before the run's (megatron-mock: an ordered source)
    ASSERT_NE(sel.batches.front().real_lengths, p.batches.front().real_lengths);
    auto total = [&](const PreparedScenario& q, const Setting& x) {  // none: no numbers, or impossible
      double t = 0;
      try {
        for (const auto& r : run_strategy(q, q.cm, "packing", x, "tuned", opt, reg)) {
          if (!r.has_metrics()) return none;
          t += r.step_time_s;
        }
      } catch (const InputError&) {
        return none;
      }
      return t;
    };
    // Both passes, in run_tuned's order (the first strictly faster setting wins), on batches `q`.
    auto pick = [&](const PreparedScenario& q, double* grid_best) {
      std::map<std::pair<int, int>, std::pair<double, Setting>> first;
      double best_t = none;
      Setting best;
      for (const auto& x : tune_space(s, q.cm.model.layers, false)) {
        const double t = total(q, x);
        if (t == none) continue;
        if (t < best_t) best_t = t, best = x;
        auto [at, fresh] = first.try_emplace({x.cp, x.vpp}, t, x);
        if (!fresh && t < at->second.first) at->second = {t, x};
      }
      *grid_best = best_t;
      for (const auto& [knobs, b] : first)
        for (const auto& x : tune_refinement(s, b.second, false))
          if (const double t = total(q, x); t < best_t) best_t = t, best = x;
      return best;
    };
    double grid_sel = none, grid_own = none;
    const Setting chosen = pick(sel, &grid_sel);
    const Setting in_sample = pick(p, &grid_own);
    if (chosen.to_json() == in_sample.to_json() || !(total(sel, chosen) < grid_sel)) continue;  // not telling
    opt.tune = true;
    const auto own_lengths = p.batches.front().real_lengths;
    const auto rows = run_tuned(p, opt, reg);
    ASSERT_EQ(p.batches.size(), static_cast<size_t>(p.steps));  // p holds its own batches again
    EXPECT_EQ(p.batches.front().real_lengths, own_lengths);
    const auto published = run_strategy(p, p.cm, "packing", published_setting(s), "published", opt, reg);
    ASSERT_EQ(rows.size(), published.size());
    double tuned = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      EXPECT_EQ(rows[i].knobs, chosen.to_json());
      EXPECT_EQ(rows[i].tokens, published[i].tokens);  // the run's batches, not the selection's
      tuned += rows[i].step_time_s;
    }
    EXPECT_DOUBLE_EQ(tuned, total(p, chosen));
    return;
  }
  FAIL() << "no Megatron example where packing's held-out pick is a refinement and differs from the in-sample "
            "pick: the test needs another case";
}

TEST(Sensitivity, SummaryRanksByTimeAndDropsStrategiesWithoutNumbers) {
  std::vector<ResultRow> rows = {row("packing", 0, 2.0), row("packing", 1, 2.0), row("fast", 0, 1.0),
                                 row("fast", 1, 1.0), row("oomy", 0, 0.1), row("oomy", 1, 0.1)};
  rows[4].oom = true;
  const auto s = summarize_speedups(rows, {"packing", "fast", "oomy"}, "packing");
  EXPECT_DOUBLE_EQ(s.speedup.at("fast"), 2.0);
  EXPECT_DOUBLE_EQ(s.speedup.at("packing"), 1.0);
  EXPECT_FALSE(s.speedup.count("oomy"));
  EXPECT_EQ(s.ranking, (std::vector<std::string>{"fast", "packing", "oomy"}));
  // Every parameter of the study scales something: a variant differs from the nominal model.
  const Scenario sc = parse_scenario(tiny_json(), "t.json");
  const cost::CostModel base = cost_model_of(sc);
  for (const auto& p : sensitivity_parameters()) {
    cost::CostModel up = base;
    p.scale(up, kSensitivityHigh);
    EXPECT_NE(cost::profile_to_json(up.hardware), cost::profile_to_json(base.hardware)) << p.name;
    if (p.name != "attention_efficiency_short") continue;
    // Only the points below 512 tokens (the [estimate]s without a source) move, each by the factor
    // (none of them near 1).
    for (size_t b = 0; b < base.hardware.attention_tables.size(); ++b) {
      const auto& t0 = base.hardware.attention_tables[b];
      const auto& t1 = up.hardware.attention_tables[b];
      const size_t n = t0.lengths.size();
      for (size_t iq = 0; iq < n; ++iq)
        for (size_t ik = 0; ik < n; ++ik) {
          const bool short_point = t0.lengths[iq] < 512 || t0.lengths[ik] < 512;
          const double f = short_point ? kSensitivityHigh : 1.0;
          EXPECT_DOUBLE_EQ(t1.fwd_causal[iq * n + ik], t0.fwd_causal[iq * n + ik] * f) << t0.backend;
          EXPECT_DOUBLE_EQ(t1.fwd_full[iq * n + ik], std::min(1.0, t0.fwd_full[iq * n + ik] * f)) << t0.backend;
          EXPECT_DOUBLE_EQ(t1.bwd[iq * n + ik], t0.bwd[iq * n + ik] * f) << t0.backend;
        }
    }
  }
}

// A variant where a strategy, or the reference, has no number (oom: a memory parameter shows only
// there) is named for it, and counts as a change of the ranking even where the strategy without
// numbers was last anyway (helper-23: packing, the reference and the slowest, went oom at
// memory_reserved_bytes x1.2 and the study said "unchanged" with the range of the others).
TEST(Sensitivity, VariantsWithoutNumbersAreNamedAndChangeTheRanking) {
  const std::vector<std::string> strategies = {"packing", "fast", "late"};
  auto rows = [](double packing, double fast, double late, bool packing_oom, bool late_oom) {
    std::vector<ResultRow> r = {row("packing", 0, packing), row("fast", 0, fast), row("late", 0, late)};
    r[0].oom = packing_oom;
    r[2].oom = late_oom;
    return r;
  };
  const SpeedupSummary nominal = summarize_speedups(rows(2.0, 1.0, 0.5, false, true), strategies, "packing");
  EXPECT_EQ(nominal.without_numbers, (std::vector<std::string>{"late"}));
  const std::vector<std::pair<std::string, SpeedupSummary>> variants = {
      {"gemm_efficiency x0.8", summarize_speedups(rows(2.0, 0.8, 0.5, false, true), strategies, "packing")},
      {"memory_reserved_bytes x1.2", summarize_speedups(rows(2.0, 1.0, 0.5, true, true), strategies, "packing")},
      {"memory_reserved_bytes x0.8", summarize_speedups(rows(2.0, 1.0, 0.5, false, false), strategies, "packing")},
  };
  const json st = merge_study(nominal, variants, strategies);
  // The reference oom: same order of names (packing was already behind fast, late last), but a change.
  EXPECT_EQ(st["ranking_changed_by"],
            json::array({"memory_reserved_bytes x1.2", "memory_reserved_bytes x0.8"}));
  EXPECT_TRUE(st["ranking_changes"].get<bool>());
  EXPECT_EQ(st["without_numbers"], json::array({"late"}));
  const json& fast = st["speedups"]["fast"];
  EXPECT_DOUBLE_EQ(fast["nominal"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(fast["min"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(fast["max"].get<double>(), 2.5);
  EXPECT_EQ(fast["widest_parameter"], "gemm_efficiency");
  EXPECT_EQ(fast["no_number_in"], json::array({"memory_reserved_bytes x1.2"}));
  // No number nominally, one in a variant: reported, with a null nominal.
  const json& late = st["speedups"]["late"];
  EXPECT_TRUE(late["nominal"].is_null());
  EXPECT_DOUBLE_EQ(late["min"].get<double>(), 4.0);
  EXPECT_DOUBLE_EQ(late["max"].get<double>(), 4.0);
  EXPECT_EQ(late["no_number_in"],
            json::array({"nominal", "gemm_efficiency x0.8", "memory_reserved_bytes x1.2"}));
  // The results check takes the nulls, the table prints them as "-" and names the variants.
  ResultsFile f;
  f.context = make_context("d", "c", "k", "t");
  f.rows.push_back(row("packing", 0, 2.0));
  json sc = st;
  sc["scenario"] = "s";
  f.sensitivity = sensitivity_section(json::array({sc}));
  EXPECT_TRUE(validate_results(results_to_json(f)).empty());
  std::ostringstream table;
  print_table(table, f);
  EXPECT_NE(table.str().find("no numbers: late"), std::string::npos) << table.str();
  EXPECT_NE(table.str().find("speedup -  range [4.000, 4.000]"), std::string::npos) << table.str();
  EXPECT_NE(table.str().find("its own or the reference's) in: memory_reserved_bytes x1.2"), std::string::npos)
      << table.str();
}

// A variant stands for hardware that differs from the calibration: it is simulated, but every
// planner plans with the scenario's own model (dcp had planned with the variant, helper-32). A
// probe planner plans as packing does and records the step time its model gives that plan.
class ProbePlanner : public plan::Planner {
 public:
  ProbePlanner(plan::PlannerOptions o, std::shared_ptr<std::vector<double>> seen) : o_(std::move(o)), seen_(std::move(seen)) {}
  std::string name() const override { return "probe"; }
  bool dynamic() const override { return false; }
  plan::Plan plan(const plan::Batch& batch, const plan::PlanConfig& config) const override {
    plan::Plan out = builtin_planners().make("packing")->plan(batch, config);
    seen_->push_back(o_.step_time_s ? o_.step_time_s(out) : -1.0);  // its own plan's time, by its model
    return out;
  }

 private:
  plan::PlannerOptions o_;
  std::shared_ptr<std::vector<double>> seen_;
};

TEST(Sensitivity, VariantsAreSimulatedButPlannedWithTheNominalModel) {
  json j = tiny_json();
  j["training"]["steps"] = 1;
  const Scenario s = parse_scenario(j, "t.json");
  plan::PlannerRegistry reg = registry();
  auto seen = std::make_shared<std::vector<double>>();
  reg.add("probe", [seen](const plan::PlannerOptions& o) { return std::make_unique<ProbePlanner>(o, seen); });
  RunOptions opt;
  PreparedScenario p = prepare_scenario(s, opt, reg);
  sample_batches(p);
  cost::CostModel variant = p.cm;
  for (const auto& param : sensitivity_parameters())
    if (param.name == "iteration_overhead_s") param.scale(variant, kSensitivityHigh);
  const Setting at = published_setting(s);
  const auto nominal = run_strategy(p, p.cm, "probe", at, "published", opt, reg);
  const auto held = run_strategy(p, variant, "probe", at, "published", opt, reg, &p.cm);
  const auto adapted = run_strategy(p, variant, "probe", at, "published", opt, reg);
  ASSERT_EQ(seen->size(), 3u);
  ASSERT_GT((*seen)[0], 0.0);
  EXPECT_EQ((*seen)[1], (*seen)[0]);  // planned with the scenario's model
  EXPECT_GT((*seen)[2], (*seen)[0]);  // (the variant's, when not held: the check can fail)
  ASSERT_TRUE(nominal[0].has_metrics() && held[0].has_metrics());
  EXPECT_DOUBLE_EQ(nominal[0].step_time_s, (*seen)[0]);
  EXPECT_DOUBLE_EQ(held[0].step_time_s, (*seen)[2]);  // simulated under the variant
  // And the study itself: every variant's plan made with the nominal model.
  json with_probe = j;
  with_probe["strategies"] = {"packing", "probe"};
  const Scenario sp = parse_scenario(with_probe, "t.json");
  PreparedScenario pp = prepare_scenario(sp, opt, reg);
  sample_batches(pp);
  seen->clear();
  const json study = run_sensitivity(pp, opt, reg);
  ASSERT_EQ(seen->size(), 1 + 2 * sensitivity_parameters().size());
  for (size_t i = 1; i < seen->size(); ++i) EXPECT_EQ((*seen)[i], (*seen)[0]) << "variant " << i;
  EXPECT_EQ(study["variants"].size(), 2 * sensitivity_parameters().size());
  // Each variant carries the name the study's ranking_changed_by and ranking_swaps key it by.
  EXPECT_EQ(study["variants"][0]["name"], sensitivity_parameters()[0].name + " x0.8");
  EXPECT_EQ(study["variants"][1]["name"], sensitivity_parameters()[0].name + " x1.2");
}

// A swap of strategies within kRankingTolerance of each other is a tie, not a change of the
// ranking; a clear one is.
TEST(Sensitivity, RankingChangesOnlyBeyondTheTolerance) {
  const std::vector<std::string> strategies = {"packing", "a", "b"};
  auto summary = [&](double a, double b) {
    return summarize_speedups({row("packing", 0, 2.0), row("a", 0, a), row("b", 0, b)}, strategies, "packing");
  };
  const SpeedupSummary nominal = summary(1.0, 1.0 + 1e-6);
  EXPECT_EQ(nominal.ranking, (std::vector<std::string>{"a", "b", "packing"}));
  const json tie = merge_study(nominal, {{"x x1.2", summary(1.0 + 1e-6, 1.0)}}, strategies);
  EXPECT_FALSE(tie["ranking_changes"].get<bool>()) << tie;
  const json clear = merge_study(nominal, {{"x x1.2", summary(1.0, 0.99)}}, strategies);
  EXPECT_TRUE(clear["ranking_changes"].get<bool>()) << clear;
  const json slower = merge_study(nominal, {{"x x1.2", summary(1.0, 2.5)}}, strategies);  // packing ahead of b
  EXPECT_TRUE(slower["ranking_changes"].get<bool>()) << slower;
  // Each variant's clear swaps are named, who is now ahead of whom; a tie names none.
  EXPECT_EQ(tie["ranking_swaps"], json::object()) << tie;
  EXPECT_EQ(clear["ranking_swaps"], json({{"x x1.2", json::array({{{"ahead", "b"}, {"behind", "a"}}})}})) << clear;
  EXPECT_EQ(slower["ranking_swaps"], json({{"x x1.2", json::array({{{"ahead", "packing"}, {"behind", "b"}}})}}))
      << slower;
}

// The table prints each reordering variant's swaps with the speedups it gives them (read from the
// study's "variants"), and a results file with swaps of the wrong type is refused.
TEST(Sensitivity, TableNamesWhoOvertakesWhomUnderEachVariant) {
  const std::vector<std::string> strategies = {"packing", "a", "b"};
  auto summary = [&](double a, double b) {
    return summarize_speedups({row("packing", 0, 2.0), row("a", 0, a), row("b", 0, b)}, strategies, "packing");
  };
  json st = merge_study(summary(1.0, 1.2), {{"gemm_efficiency x0.8", summary(1.0, 0.9)}}, strategies);
  st["variants"] = json::array({{{"name", "gemm_efficiency x0.8"},
                                 {"parameter", "gemm_efficiency"},
                                 {"factor", 0.8},
                                 {"speedups", {{"packing", 1.0}, {"a", 2.0}, {"b", 2.0 / 0.9}}}}});
  st["scenario"] = "s";
  ResultsFile f;
  f.context = make_context("d", "c", "k", "t");
  f.rows.push_back(row("packing", 0, 2.0));
  f.sensitivity = sensitivity_section(json::array({st}));
  EXPECT_TRUE(validate_results(results_to_json(f)).empty());
  std::ostringstream table;
  print_table(table, f);
  EXPECT_NE(table.str().find("    gemm_efficiency x0.8: b 2.222 ahead of a 2.000\n"), std::string::npos) << table.str();
  json bad = results_to_json(f);
  bad["sensitivity"]["scenarios"][0]["ranking_swaps"]["gemm_efficiency x0.8"][0]["ahead"] = 3;
  EXPECT_FALSE(validate_results(bad).empty());
}

// The trimmed speedup (Megatron's statistic) has its nominal value and range beside the mean's.
TEST(Sensitivity, TrimmedSpeedupHasItsRange) {
  const std::vector<std::string> strategies = {"packing", "a"};
  auto summary = [&](double a1) {
    std::vector<ResultRow> rows;
    for (int step = 0; step < 10; ++step) {
      rows.push_back(row("packing", step, step == 9 ? 20.0 : 2.0));
      rows.push_back(row("a", step, step == 0 ? a1 : 1.0));
    }
    return summarize_speedups(rows, strategies, "packing");
  };
  const SpeedupSummary nominal = summary(1.0);
  // 10 steps: trimmed_mean drops one value from each end.
  EXPECT_DOUBLE_EQ(nominal.trimmed.at("a"), 2.0);
  EXPECT_DOUBLE_EQ(nominal.speedup.at("a"), 38.0 / 10.0);
  const json st = merge_study(nominal, {{"x x0.8", summary(9.0)}}, strategies);
  const json& a = st["speedups"]["a"];
  EXPECT_DOUBLE_EQ(a["trimmed_nominal"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(a["trimmed_min"].get<double>(), 2.0);  // one slow step is trimmed away
  EXPECT_DOUBLE_EQ(a["trimmed_max"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(a["min"].get<double>(), 38.0 / 18.0);
}

// Without the reference in the run there are no speedups, and the table says why (it said "no
// number (oom or no valid plan ...)" for every variant).
TEST(Sensitivity, SaysWhenTheReferenceWasNotRun) {
  const std::vector<std::string> strategies = {"a"};
  const SpeedupSummary nominal = summarize_speedups({row("a", 0, 1.0)}, strategies, "packing");
  json st = merge_study(nominal, {}, strategies, /*reference_run=*/false);
  EXPECT_TRUE(st["reference_missing"].get<bool>());
  ResultsFile f;
  f.context = make_context("d", "c", "k", "t");
  f.rows.push_back(row("a", 0, 1.0));
  st["scenario"] = "s";
  f.sensitivity = sensitivity_section(json::array({st}));
  EXPECT_TRUE(validate_results(results_to_json(f)).empty());
  std::ostringstream table;
  print_table(table, f);
  EXPECT_NE(table.str().find("no speedups: the reference strategy was not in this run"), std::string::npos)
      << table.str();
  EXPECT_EQ(table.str().find("no number (oom"), std::string::npos) << table.str();
}

// training.interleaved_p2p_calls: on unless set false, and it reaches the simulator: with VPP the
// rows' steps with it are never shorter than without (Megatron's calls add waits, never work) and
// at least one is longer; a bad value is named.
TEST(Scenario, InterleavedP2pCallsReachTheSimulator) {
  json j = tiny_json();
  j["model"] = {{"layers", 4}, {"hidden", 256}, {"ffn", 1024}, {"heads", 4}, {"vocab", 1024}};
  j["cluster"]["vpp"] = 2;
  const Scenario on = parse_scenario(j, "t.json");
  EXPECT_TRUE(on.training.interleaved_p2p_calls);
  EXPECT_TRUE(cost_model_of(on).training.interleaved_p2p_calls);
  j["training"]["interleaved_p2p_calls"] = false;
  const Scenario off = parse_scenario(j, "t.json");
  EXPECT_FALSE(cost_model_of(off).training.interleaved_p2p_calls);
  const auto reg = registry();
  const RunOptions opt;
  const ResultsFile a = run_scenarios({off}, opt, reg), b = run_scenarios({on}, opt, reg);
  ASSERT_EQ(a.rows.size(), b.rows.size());
  int longer = 0;
  for (size_t i = 0; i < a.rows.size(); ++i) {
    ASSERT_TRUE(a.rows[i].has_metrics() && b.rows[i].has_metrics()) << i;
    EXPECT_GE(b.rows[i].step_time_s, a.rows[i].step_time_s * (1 - 1e-12)) << a.rows[i].strategy;
    longer += b.rows[i].step_time_s > a.rows[i].step_time_s * (1 + 1e-9);
  }
  EXPECT_GT(longer, 0);
  EXPECT_EQ(b.scenarios[0]["interleaved_p2p_calls"], true);  // a recorded fact (the gate compares it)
  EXPECT_EQ(a.scenarios[0]["interleaved_p2p_calls"], false);
  j["training"]["interleaved_p2p_calls"] = "yes";
  try {
    parse_scenario(j, "t.json");
    ADD_FAILURE() << "a string was taken";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("\"training.interleaved_p2p_calls\"=\"yes\""), std::string::npos) << e.what();
  }
}

// --tune tries no VPP that takes global_batch x pp x vpp over the limit a scenario must meet.
TEST(Tune, VppCandidatesStayWithinTheStageLimit) {
  Scenario s = parse_scenario(tiny_json(), "t.json");
  s.training.global_batch = int64_t{1} << 20;
  s.cluster.pp = 2;
  s.cluster.vpp = 1;
  std::set<int> vpps;
  for (const auto& setting : tune_space(s, 64, true)) vpps.insert(setting.vpp);
  EXPECT_EQ(vpps, (std::set<int>{1, 2, 4}));  // 2^20 x 2 x 4 = 2^23; 8 would be 2^24
}

TEST(Sensitivity, SectionReportsRangesAndRanking) {
  json j = tiny_json();
  j["training"]["steps"] = 1;
  const Scenario s = parse_scenario(j, "t.json");
  const auto reg = registry();
  RunOptions opt;
  opt.sensitivity = true;
  opt.tune = true;
  const ResultsFile f = run_scenarios({s}, opt, reg);
  ASSERT_TRUE(f.sensitivity.is_object());
  // With --tune the study is repeated at each strategy's tuned setting.
  ASSERT_TRUE(f.sensitivity["scenarios"][0].contains("tuned"));
  EXPECT_EQ(f.sensitivity["scenarios"][0]["tuned"]["variants"].size(), 2 * sensitivity_parameters().size());
  const json& sc = f.sensitivity["scenarios"][0];
  EXPECT_EQ(sc["variants"].size(), 2 * sensitivity_parameters().size());
  for (const auto& [strategy, v] : sc["speedups"].items()) {
    EXPECT_LE(v["min"].get<double>(), v["nominal"].get<double>());
    EXPECT_GE(v["max"].get<double>(), v["nominal"].get<double>());
  }
  EXPECT_EQ(sc["ranking"].size(), 2u);
  EXPECT_TRUE(validate_results(results_to_json(f)).empty());
}

// An ordered source (megatron-mock) replays Megatron's pool: the run's step k is window
// skip_steps + k, in the sequential sampler's order over the DP ranks, less `shift` tokens; --tune's
// held-out batches are the windows before it (the seed is not used), and a run whose draws would
// read the held-out windows again is refused.
TEST(Tune, OrderedSourceHoldsOutTheWindowsBeforeTheRun) {
  json j = tiny_json();  // 8 GPUs, pp 2, cp 2: dp 2; global batch 32
  j["dataset"] = json::parse(R"({"source": "megatron-mock", "mean": 300, "sigma": 1.0, "min": 16, "max": 4096,
                                 "size": 2000, "train_samples": 1000, "skip_steps": 3, "shift": 1})");
  const Scenario s = parse_scenario(j, "t.json");
  const auto reg = registry();
  RunOptions opt;
  PreparedScenario p = prepare_scenario(s, opt, reg);
  const std::vector<int64_t> pool = data::megatron_mock_lognormal_lengths(0, 1000, 300, 1.0, 16, 4096);
  const auto window = [&](int64_t w) {  // rank 0's 16 samples, then rank 1's
    std::vector<int64_t> out;
    for (int r = 0; r < 2; ++r)
      for (int m = 0; m < 16; ++m) out.push_back(pool[static_cast<size_t>(((w * 32 + m * 2 + r) % 1000 + 1000) % 1000)] - 1);
    return out;
  };
  sample_batches(p);
  ASSERT_EQ(p.batches.size(), 2u);
  EXPECT_EQ(p.batches[0].real_lengths, window(3));
  EXPECT_EQ(p.batches[1].real_lengths, window(4));
  sample_selection_batches(p);
  EXPECT_EQ(p.batches[0].real_lengths, window(1));
  EXPECT_EQ(p.batches[1].real_lengths, window(2));
  // 1000 samples hold 31 windows of 32: steps up to 29 plus the 2 held out fit, 30 does not.
  EXPECT_NO_THROW(sample_batches(p, 27));
  EXPECT_THROW(sample_batches(p, 28), InputError);
  // --draws whose batches would reach the held-out ones is refused before anything runs: 1000
  // samples hold 31 batches of 32, so 14 draws of 2 steps (+ 2 held out) fit and 15 do not.
  RunOptions many;
  many.draws = 15;
  int rows_run = 0;
  many.on_row = [&](ResultRow&, const RowSource&) { ++rows_run; };
  EXPECT_THROW(run_scenarios({s}, many, reg), InputError);
  EXPECT_EQ(rows_run, 0);
  many.draws = 14;
  EXPECT_NO_THROW(run_scenarios({s}, many, reg));
  EXPECT_GT(rows_run, 0);
  // The scenario's rules for the source (skip_steps x global batch 32 must stay below 1000).
  try {
    json b = j;
    b["dataset"]["skip_steps"] = 32;
    parse_scenario(b, "b.json");
    ADD_FAILURE() << "skip_steps past the pool accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("\"dataset.skip_steps\"=32"), std::string::npos) << e.what();
  }
  for (const char* bad : {R"({"train_samples": 3000})", R"({"shift": 16})", R"({"max": 8})", R"({"numpy_seed": -1})"}) {
    json b = j;
    b["dataset"].update(json::parse(bad));
    EXPECT_THROW(parse_scenario(b, "b.json"), InputError) << bad;
  }
  json mix = j;
  mix["dataset"] = json::parse(R"({"source": "mixture", "components": [{"share": 1.0, "source": "megatron-mock",
                                   "mean": 300, "sigma": 1.0, "min": 16, "max": 4096}]})");
  EXPECT_THROW(parse_scenario(mix, "m.json"), InputError);
}

}  // namespace
}  // namespace dcp::harness
