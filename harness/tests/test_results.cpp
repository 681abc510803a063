// Results file: what write_results() produces validates against the schema (required keys with
// their types, as google/benchmark tests its reporters), round-trips through read_results(), and
// the validator rejects files with missing or mistyped keys. Also the table aggregation.
#include "core/error.h"
#include "core/provenance.h"
#include "harness/report.h"
#include "harness/results.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <limits>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace dcp::harness {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

ResultRow valid_row(const std::string& strategy, int step, double time_s, double tflops) {
  ResultRow r;
  r.scenario = "s";
  r.strategy = strategy;
  r.step = step;
  r.plan_valid = true;
  r.source = simulated_source("dcp-cost-v1", "h100-sxm-public");
  r.step_time_s = time_s;
  r.tflops_per_gpu = tflops;
  r.tokens_per_s_per_gpu = 1000;
  r.microbatches = 16;
  r.balance = 1.1;
  r.bubble_frac = 0.2;
  r.comm_frac = 0.05;
  r.plan_efficiency = 0.7;
  r.rank_busy_s = {1.0, 2.0};
  r.plan = json::array({json::array({json::array({0, 2, 3, 100})})});
  return r;
}

ResultsFile sample_results() {
  ResultsFile f;
  f.context = make_context("none (simulated on the host CPU)", "dcp-cost-v1", "h100-sxm-public", "test");
  f.rows.push_back(valid_row("packing", 0, 2.0, 100));
  f.rows.push_back(valid_row("megatron-dev", 0, 1.0, 200));
  f.rows.back().speedup_vs_packing = 2.0;
  ResultRow bad;
  bad.scenario = "s";
  bad.strategy = "broken";
  bad.step = 0;
  bad.source = f.rows[0].source;
  bad.error = "invalid plan: sample 3 missing";
  f.rows.push_back(bad);
  fill_speedups(f.rows);  // packing's own 1.0 (the reader checks every row's, results.h)
  return f;
}

// What read_results says of `j` written to `path`: its InputError's text, or "(read)".
std::string read_message(const json& j, const fs::path& path) {
  std::ofstream(path) << j.dump();
  try {
    read_results(path.string());
  } catch (const InputError& e) {
    return e.what();
  }
  return "(read)";
}

TEST(Results, WrittenFileValidatesAndRoundTrips) {
  const fs::path path = fs::temp_directory_path() / ("dcp_results_" + std::to_string(::getpid()) + ".json");
  const ResultsFile f = sample_results();
  write_results(path.string(), f);
  std::ifstream in(path);
  const json j = json::parse(in);
  EXPECT_TRUE(validate_results(j).empty());
  EXPECT_EQ(j["schema"], "dcpbench.results.v1");
  for (const char* k : {"git_sha", "date", "host", "device", "cost_model", "calibration"})
    EXPECT_TRUE(j["context"][k].is_string()) << k;
  for (const char* k : {"scenario", "strategy", "step", "step_time_s", "tflops_per_gpu", "tokens_per_s_per_gpu",
                        "microbatches", "balance", "bubble_frac", "comm_frac", "plan_efficiency", "source"})
    EXPECT_TRUE(j["rows"][0].contains(k)) << k;
  EXPECT_TRUE(j["rows"][0]["step_time_s"].is_number());
  EXPECT_TRUE(j["rows"][0]["microbatches"].is_number_integer());
  EXPECT_EQ(j["rows"][0]["source"], "simulated:dcp-cost-v1@h100-sxm-public");
  EXPECT_TRUE(j["rows"][2]["tflops_per_gpu"].is_null());  // invalid plan: no numbers
  EXPECT_EQ(j["rows"][2]["plan_valid"], false);

  const ResultsFile back = read_results(path.string());
  ASSERT_EQ(back.rows.size(), 3u);
  EXPECT_EQ(back.rows[1].strategy, "megatron-dev");
  EXPECT_DOUBLE_EQ(back.rows[1].tflops_per_gpu, 200);
  ASSERT_TRUE(back.rows[1].speedup_vs_packing.has_value());
  EXPECT_DOUBLE_EQ(*back.rows[1].speedup_vs_packing, 2.0);
  EXPECT_EQ(back.rows[1].rank_busy_s, (std::vector<double>{1.0, 2.0}));
  EXPECT_FALSE(back.rows[2].plan_valid);
  EXPECT_EQ(back.rows[2].error, "invalid plan: sample 3 missing");
  EXPECT_EQ(row_to_json(back.rows[0]), row_to_json(f.rows[0]));
  fs::remove(path);
}

// busiest_idle_s (the busiest GPU's idle time, evaluate's split of a plan-efficiency miss) goes to
// the rows and back, is type-checked, and a file written before it existed (rows without the key)
// still reads, its aggregates included (the key is not among the aggregates the file carries).
TEST(Results, BusiestIdleRoundTripsAndOlderFilesStillRead) {
  ResultsFile f = sample_results();
  f.rows[1].busiest_idle_s = 0.25;
  const json j = results_to_json(f);
  EXPECT_DOUBLE_EQ(j["rows"][1]["busiest_idle_s"].get<double>(), 0.25);
  for (const auto& a : j["aggregates"]) EXPECT_FALSE(a.contains("busiest_idle_s"));
  EXPECT_DOUBLE_EQ(results_from_json(j, "r").rows[1].busiest_idle_s, 0.25);
  json older = j;
  for (auto& r : older["rows"]) r.erase("busiest_idle_s");
  const ResultsFile back = results_from_json(older, "older");
  EXPECT_DOUBLE_EQ(back.rows[1].busiest_idle_s, 0.0);
  json bad = j;
  bad["rows"][1]["busiest_idle_s"] = "0.25";
  EXPECT_THROW(results_from_json(bad, "bad"), InputError);
}

// Step 0's per-rank detail grows with the pool: where it would take the file past what the readers
// accept, it is left out (with a note) and the rest written, never a file table/plot/gate refuse.
TEST(Results, DetailTooLargeForTheReadersIsLeftOut) {
  const fs::path path = fs::temp_directory_path() / ("dcp_results_big_" + std::to_string(::getpid()) + ".json");
  ResultsFile f = sample_results();
  f.rows[1].rank_busy_s.assign(size_t{4} << 20, 0.123456789012345);  // ~4M numbers of ~18 bytes: ~75 MiB
  std::ostringstream note;
  write_results(path.string(), f, &note);
  EXPECT_NE(note.str().find("left out"), std::string::npos) << note.str();
  const ResultsFile back = read_results(path.string());  // readable: under the limit
  ASSERT_EQ(back.rows.size(), 3u);
  EXPECT_TRUE(back.rows[0].rank_busy_s.empty());
  EXPECT_TRUE(back.rows[1].rank_busy_s.empty());
  EXPECT_DOUBLE_EQ(back.rows[1].tflops_per_gpu, 200);  // the numbers stay
  // A small file keeps its detail and says nothing.
  std::ostringstream quiet;
  write_results(path.string(), sample_results(), &quiet);
  EXPECT_EQ(quiet.str(), "");
  EXPECT_EQ(read_results(path.string()).rows[1].rank_busy_s, (std::vector<double>{1.0, 2.0}));
  fs::remove(path);
}

TEST(Results, ReadersIgnoreUnknownFields) {
  json j = results_to_json(sample_results());
  j["rows"][0]["something_new"] = 42;
  j["extra"] = "x";
  EXPECT_TRUE(validate_results(j).empty());
}

TEST(Results, ValidatorNamesMissingAndMistypedKeys) {
  json j = results_to_json(sample_results());
  j["rows"][0].erase("tflops_per_gpu");
  j["rows"][1]["step"] = "zero";
  j["rows"][1]["step_time_s"] = nullptr;  // null only allowed when the plan is invalid
  j["context"].erase("git_sha");
  const auto errs = validate_results(j);
  auto has = [&](const std::string& s) {
    for (const auto& e : errs)
      if (e.find(s) != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(has("rows[0].\"tflops_per_gpu\" is missing"));
  EXPECT_TRUE(has("rows[1].\"step\" is not an integer"));
  EXPECT_TRUE(has("rows[1].\"step_time_s\" is not a number"));
  EXPECT_TRUE(has("\"context.git_sha\""));
  // A scenario's GPU capacity, which the table prints beside an OOM row: a number, or refused
  // (not a type_error thrown from the table; helper-74).
  json k = results_to_json(sample_results());
  k["scenarios"] = json::array({{{"name", "s"}, {"memory_gib", "80"}}});
  bool named = false;
  for (const auto& e : validate_results(k)) named = named || e.find("scenarios[0].\"memory_gib\" is not a finite number") != std::string::npos;
  EXPECT_TRUE(named);
  k["scenarios"][0]["memory_gib"] = 80.0;
  EXPECT_TRUE(validate_results(k).empty());
}

TEST(Results, ValidatorRejectsNonFiniteAndZeroMetrics) {
  // NaN would be written as null and make the file unreadable; step time 0 weighs nothing.
  json j = results_to_json(sample_results());
  ASSERT_TRUE(j["rows"][0]["plan_valid"].get<bool>());
  j["rows"][0]["balance"] = std::numeric_limits<double>::quiet_NaN();
  j["rows"][0]["step_time_s"] = 0.0;
  const auto errs = validate_results(j);
  auto has = [&](const std::string& s) {
    for (const auto& e : errs)
      if (e.find(s) != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(has("rows[0].\"balance\" is not finite"));
  EXPECT_TRUE(has("rows[0].\"step_time_s\"=0.0 must be > 0"));
}

TEST(Results, WrongSchemaIsAnInputError) {
  const fs::path path = fs::temp_directory_path() / ("dcp_results_bad_" + std::to_string(::getpid()) + ".json");
  json j = results_to_json(sample_results());
  j["schema"] = "dcpbench.results.v0";
  std::ofstream(path) << j.dump();
  EXPECT_THROW(read_results(path.string()), InputError);
  fs::remove(path);
}

// A file whose rows disagree with each other or with its aggregates is refused by read_results
// (table, evaluate, gate and plot all read through it): a row deleted by hand made evaluate compare
// a 2-step mean with a 1-step one, and halved aggregates halved the charts only.
TEST(Results, RowsThatDisagreeAreAnInputError) {
  const fs::path path = fs::temp_directory_path() / ("dcp_results_rows_" + std::to_string(::getpid()) + ".json");
  ResultsFile f = sample_results();
  f.rows.push_back(valid_row("packing", 1, 2.0, 100));
  f.rows.push_back(valid_row("megatron-dev", 1, 1.0, 200));
  f.rows.push_back(f.rows[2]);
  f.rows.back().step = 1;
  fill_speedups(f.rows);
  const json good = results_to_json(f);
  const auto message = [&](const json& j) { return read_message(j, path); };
  EXPECT_EQ(message(good), "(read)");
  json missing = good;
  missing["rows"].erase(4);  // megatron-dev step 1
  EXPECT_NE(message(missing).find("strategy \"megatron-dev\" has steps [0] where \"broken\" has [0, 1]"),
            std::string::npos)
      << message(missing);
  json twice = good;
  twice["rows"][4]["step"] = 0;
  EXPECT_NE(message(twice).find("strategy \"megatron-dev\" has a step twice: [0, 0]"), std::string::npos)
      << message(twice);
  json edited = good;
  for (auto& a : edited["aggregates"])
    if (a["strategy"] == "megatron-dev") a["tflops_per_gpu"] = 100.0;
  EXPECT_NE(message(edited).find(".\"tflops_per_gpu\"=100.0 is not what its rows give (200.0)"), std::string::npos)
      << message(edited);
  json reordered = good;  // the same aggregates in another order are the rows' still
  std::swap(reordered["aggregates"][0], reordered["aggregates"][2]);
  EXPECT_EQ(message(reordered), "(read)");
  json fewer = good;
  fewer["aggregates"].erase(0);
  EXPECT_NE(message(fewer).find("\"aggregates\" has 2 entries, its rows make 3"), std::string::npos) << message(fewer);
  json copied = good;  // one strategy's entry replaced by a copy of another's (the charts left it out)
  copied["aggregates"][0] = copied["aggregates"][1];
  EXPECT_NE(message(copied).find("\"aggregates\"[1] names a scenario, setting and strategy that an earlier entry names"),
            std::string::npos)
      << message(copied);
  json lacking = good;  // a key deleted (the charts failed on it, or drew a deleted compute_s as 0)
  size_t dev = 0;
  while (lacking["aggregates"][dev]["strategy"] != "megatron-dev") ++dev;
  lacking["aggregates"][dev].erase("compute_s");
  EXPECT_NE(message(lacking).find("\"aggregates\"[" + std::to_string(dev) + "] has no \"compute_s\""),
            std::string::npos)
      << message(lacking);
  // A row's speedup is its reference's step time over its own (stop 44: an edited one was read,
  // and the gate passed on it), and a strategy's knobs are the same every step (the aggregate
  // carries the first step's).
  json faster = good;
  faster["rows"][4]["speedup_vs_packing"] = 3.0;
  EXPECT_NE(message(faster).find("row 4 (scenario \"s\", \"megatron-dev\", step 1): \"speedup_vs_packing\"=3.0 is not "
                                 "what its rows give (2.0"),
            std::string::npos)
      << message(faster);
  json dropped = good;  // null where the reference has numbers
  dropped["rows"][0]["speedup_vs_packing"] = nullptr;
  EXPECT_NE(message(dropped).find("row 0 (scenario \"s\", \"packing\", step 0): \"speedup_vs_packing\"=null"),
            std::string::npos)
      << message(dropped);
  json knobs = good;
  knobs["rows"][1]["knobs"] = {{"max_seqlen_per_rank", 4096}, {"cp", 2}, {"vpp", 1}};
  knobs["rows"][4]["knobs"] = {{"max_seqlen_per_rank", 8192}, {"cp", 2}, {"vpp", 1}};
  for (auto& a : knobs["aggregates"])
    if (a["strategy"] == "megatron-dev") a["knobs"] = knobs["rows"][1]["knobs"];
  EXPECT_NE(message(knobs).find("row 4 (scenario \"s\", \"megatron-dev\", step 1): \"knobs\"="), std::string::npos)
      << message(knobs);
  EXPECT_NE(message(knobs).find("differ from its step 0's"), std::string::npos) << message(knobs);
  fs::remove(path);
}

TEST(Report, AggregatesTimeWeightedTflopsAndSpeedup) {
  ResultsFile f;
  f.context = make_context("d", "c", "k", "t");
  f.rows.push_back(valid_row("packing", 0, 2.0, 100));
  f.rows.push_back(valid_row("packing", 1, 4.0, 50));
  f.rows.push_back(valid_row("dyn", 0, 1.0, 200));
  f.rows.push_back(valid_row("dyn", 1, 2.0, 100));
  const auto aggs = aggregate(f);
  ASSERT_EQ(aggs.size(), 2u);
  // packing: useful = 100*2 + 50*4 = 400 TF*s over 6 s -> 66.67; dyn: 400 over 3 s -> 133.33.
  EXPECT_NEAR(aggs[0].tflops_per_gpu, 400.0 / 6.0, 1e-9);
  EXPECT_NEAR(aggs[1].tflops_per_gpu, 400.0 / 3.0, 1e-9);
  ASSERT_TRUE(aggs[1].speedup_vs_reference.has_value());
  EXPECT_NEAR(*aggs[1].speedup_vs_reference, 2.0, 1e-12);
  std::ostringstream os;
  print_table(os, f);
  EXPECT_NE(os.str().find("How obtained: simulated:dcp-cost-v1@h100-sxm-public"), std::string::npos) << os.str();
  EXPECT_NE(os.str().find("(useful)"), std::string::npos);
}

// A file written before 0b0a667 holds the fractions as means of the steps' ratios: read (every
// older results file and gate baseline had been refused as edited), while any other value is
// still an edit. A row whose reference is not its scenario's is refused (review of stop 45: one
// row's "reference" set to bshd mixed two baselines into one speedup), and fill_speedups clears a
// speedup whose reference lost its numbers.
TEST(Results, OlderFractionsReadAndOneReferencePerScenario) {
  const fs::path path = fs::temp_directory_path() / ("dcp_results_legacy_" + std::to_string(::getpid()) + ".json");
  const auto message = [&](const json& j) { return read_message(j, path); };
  ResultsFile f;
  f.context = make_context("d", "c", "k", "t");
  for (int step = 0; step < 2; ++step) {
    for (const char* strategy : {"packing", "dyn"}) {
      ResultRow r = valid_row(strategy, step, step == 0 ? 1.0 : 3.0, 100);
      r.bubble_s = step == 0 ? 0.1 : 0.9;
      r.bubble_frac = r.bubble_s / r.step_time_s;  // 0.1 and 0.3: mean of ratios 0.2, of the mean step 0.25
      f.rows.push_back(r);
    }
  }
  fill_speedups(f.rows);
  const json good = results_to_json(f);
  EXPECT_EQ(message(good), "(read)");
  json older = good;
  for (auto& a : older["aggregates"]) {
    EXPECT_DOUBLE_EQ(a["bubble_frac"].get<double>(), 0.25);
    a["bubble_frac"] = 0.2;  // (0.1 + 0.3) / 2, as the writer before 0b0a667 wrote it
  }
  EXPECT_EQ(message(older), "(read)");
  json edited = good;
  edited["aggregates"][0]["bubble_frac"] = 0.22;
  EXPECT_NE(message(edited).find(".\"bubble_frac\"=0.22 is not what its rows give (0.25)"), std::string::npos)
      << message(edited);
  json other_key = good;  // only the three fractions changed definition
  other_key["aggregates"][0]["balance"] = 1.2;
  EXPECT_NE(message(other_key).find(".\"balance\"=1.2 is not what its rows give"), std::string::npos)
      << message(other_key);

  json mixed = good;  // step 1 of dyn over another reference than step 0's
  mixed["rows"][3]["reference"] = "dyn";
  EXPECT_NE(message(mixed).find("row 3 (scenario \"s\", \"dyn\", step 1): \"reference\"=\"dyn\" is not its "
                                "scenario's reference (row 0's) \"packing\""),
            std::string::npos)
      << message(mixed);
  ResultsFile declared = f;
  declared.scenarios = json::array({{{"name", "s"}, {"reference_strategy", "dyn"}}});
  EXPECT_NE(message(results_to_json(declared)).find("row 0 (scenario \"s\", \"packing\", step 0): \"reference\"="
                                                    "\"packing\" is not its scenario's reference_strategy \"dyn\""),
            std::string::npos)
      << message(results_to_json(declared));

  ResultsFile lost = f;
  ASSERT_TRUE(lost.rows[3].speedup_vs_packing.has_value());
  lost.rows[2].oom = true;  // packing's step 1
  fill_speedups(lost.rows);
  EXPECT_FALSE(lost.rows[3].speedup_vs_packing.has_value());
  EXPECT_EQ(message(results_to_json(lost)), "(read)");
  fs::remove(path);
}

// The fractions are of the mean step (ratios of sums, like TFLOPS): with steps of 1 s and 3 s and
// 0.5 s of exposed communication in each, comm is 1 / 4 = 25% of the mean step, not the mean of
// 50% and 16.7%; the plan efficiency is the mean bound over the mean step, so it, the busiest
// GPU's idle time and its busy time above the bound add up to the step. A row without the seconds
// (optional keys) counts its ratio x its step time, so rows without them are weighted by time and
// a group where only some rows have them is still a ratio of sums (review of stop 45).
TEST(Report, FractionsAreOfTheMeanStep) {
  ResultsFile f;
  f.context = make_context("d", "c", "k", "t");
  for (int step = 0; step < 2; ++step) {
    ResultRow r = valid_row("dyn", step, step == 0 ? 1.0 : 3.0, 100);
    r.comm_s = 0.5;
    r.comm_frac = 0.5 / r.step_time_s;
    r.bubble_s = step == 0 ? 0.1 : 0.9;
    r.bubble_frac = r.bubble_s / r.step_time_s;
    r.lower_bound_s = step == 0 ? 0.9 : 1.5;
    r.plan_efficiency = r.lower_bound_s / r.step_time_s;
    r.busiest_idle_s = 0.05 * r.step_time_s;
    f.rows.push_back(r);
    f.rows.push_back(valid_row("bare", step, step == 0 ? 1.0 : 3.0, 100));  // no seconds
    f.rows.back().comm_frac = step == 0 ? 0.1 : 0.3;                     // 0.1 s and 0.9 s
    ResultRow m = valid_row("mixed", step, step == 0 ? 1.0 : 3.0, 100);  // seconds in step 1 only
    m.comm_frac = step == 0 ? 0.4 : 0.6 / 3.0;                           // 0.4 s and 0.6 s
    if (step == 1) m.comm_s = 0.6;
    f.rows.push_back(m);
  }
  const auto aggs = aggregate(f);
  ASSERT_EQ(aggs.size(), 3u);
  const Aggregate& d = aggs[0];
  EXPECT_DOUBLE_EQ(d.step_time_s, 2.0);
  EXPECT_DOUBLE_EQ(d.comm_frac, 0.25);
  EXPECT_DOUBLE_EQ(d.bubble_frac, 0.25);
  EXPECT_DOUBLE_EQ(d.plan_efficiency, 0.6);  // (0.9 + 1.5) / (1 + 3); the mean of the ratios is 0.7
  EXPECT_NEAR(d.plan_efficiency + d.busiest_idle_s / d.step_time_s +
                  (d.step_time_s - d.lower_bound_s - d.busiest_idle_s) / d.step_time_s,
              1.0, 1e-12);
  const Aggregate& b = aggs[1];
  EXPECT_DOUBLE_EQ(b.comm_frac, 0.25);  // (0.1 + 0.9) s / 4 s; the mean of the ratios is 0.2
  EXPECT_DOUBLE_EQ(b.bubble_frac, 0.2);
  EXPECT_DOUBLE_EQ(b.plan_efficiency, 0.7);
  // (0.4 + 0.6) s / 4 s; deciding for the group by its seconds had given 0.6 s / 2 s / 2 = 0.15.
  EXPECT_DOUBLE_EQ(aggs[2].comm_frac, 0.25);
}

// No speedup over a reference out of memory in some steps (it had been the ratio over the steps the
// reference fits, printed beside the reference's "OOM (1/2 steps)"), nor for a strategy that is.
TEST(Report, NoSpeedupWhereTheReferenceOrTheStrategyLacksNumbersInAStep) {
  ResultsFile f;
  f.context = make_context("d", "c", "k", "t");
  f.rows.push_back(valid_row("packing", 0, 2.0, 100));
  f.rows.push_back(valid_row("packing", 1, 4.0, 50));
  f.rows.back().oom = true;
  f.rows.push_back(valid_row("dyn", 0, 1.0, 200));
  f.rows.push_back(valid_row("dyn", 1, 2.0, 100));
  f.rows.push_back(valid_row("other", 0, 1.0, 200));
  f.rows.push_back(valid_row("other", 1, 2.0, 100));
  f.rows.back().oom = true;
  for (const auto& a : aggregate(f)) {
    EXPECT_FALSE(a.speedup_vs_reference.has_value()) << a.strategy;
    EXPECT_FALSE(a.trimmed_speedup_vs_reference.has_value()) << a.strategy;
  }
  f.rows[1].oom = false;  // the reference fits everywhere: dyn has its speedup, other (oom) none
  const auto aggs = aggregate(f);
  ASSERT_TRUE(aggs[1].speedup_vs_reference.has_value());
  EXPECT_NEAR(*aggs[1].speedup_vs_reference, 2.0, 1e-12);
  EXPECT_FALSE(aggs[2].speedup_vs_reference.has_value());
}

// Ours beside published numbers: ours/theirs only for the published setting, where theirs were
// measured (a tuned row divided by theirs read as a model error); no speedup beside an oom.
TEST(Report, OursOverTheirsOnlyForThePublishedSetting) {
  ResultsFile f;
  f.context = make_context("d", "c", "k", "t");
  f.scenarios = nlohmann::json::array({{{"name", "s"},
                                        {"hardware", "h100-sxm"},
                                        {"published", {{"source", "test"},
                                                       {"values", {{{"strategy", "dyn"}, {"speedup_vs_packing", 2.0}}}}}}}});
  for (const char* setting : {"published", "tuned"}) {
    const double dyn_time = std::string(setting) == "published" ? 1.0 : 0.5;  // speedups 2 and 4
    for (auto r : {valid_row("packing", 0, 2.0, 100), valid_row("dyn", 0, dyn_time, 200)}) {
      r.setting = setting;
      f.rows.push_back(r);
    }
  }
  std::ostringstream os;
  print_table(os, f);
  const std::string text = os.str();
  const auto line_of = [&](const std::string& label) {
    std::istringstream in(text.substr(text.find("beside published numbers")));
    for (std::string line; std::getline(in, line);)
      if (line.rfind("s ", 0) == 0 && line.find(" " + label + " ") != std::string::npos) return line;
    return std::string("(no line)");
  };
  const std::string published = line_of("dyn"), tuned = line_of("dyn (tuned)");
  EXPECT_NE(published.find("2.000"), std::string::npos) << published;   // ours
  EXPECT_EQ(published.substr(published.find_last_not_of(' ') - 4, 5), "1.000") << published;  // ours/theirs
  EXPECT_NE(tuned.find("4.000"), std::string::npos) << tuned;           // ours, shown
  EXPECT_EQ(tuned.substr(tuned.find_last_not_of(' ')), "-") << tuned;  // ours/theirs (4 / 2 before)
  // No "hardware" in the published block: theirs reads as unpublished (the shipped sources).
  EXPECT_NE(text.find("theirs is in each scenario's published source (GPU type unpublished)"), std::string::npos) << text;

  // A user's own measurements name their hardware: the footnote says it, per scenario, and the
  // results file keeps it (a number in its place is refused).
  f.scenarios[0]["published"]["hardware"] = "8x H200 SXM, one node";
  std::ostringstream own;
  print_table(own, f);
  EXPECT_NE(own.str().find("# Theirs, as published: s: 8x H200 SXM, one node.\n"), std::string::npos) << own.str();
  EXPECT_EQ(own.str().find("GPU type unpublished"), std::string::npos) << own.str();
  nlohmann::json j = results_to_json(f);
  EXPECT_TRUE(validate_results(j).empty());
  j["scenarios"][0]["published"]["hardware"] = 8;
  const auto errs = validate_results(j);
  ASSERT_FALSE(errs.empty());
  EXPECT_NE(errs[0].find("string source/note/hardware"), std::string::npos) << errs[0];
}

// Theirs are over packing: where the file's reference is another strategy, ours beside theirs is
// over packing too, from the packing rows (it was ours over bshd / theirs over packing, 3.556 in
// the audit of helper-48), and "-" without packing rows.
TEST(Report, OursBesideTheirsIsOverPackingWhateverTheReference) {
  const auto dyn_line = [](bool with_packing) {
    ResultsFile f;
    f.context = make_context("d", "c", "k", "t");
    f.scenarios = nlohmann::json::array(
        {{{"name", "s"},
          {"hardware", "h100-sxm"},
          {"published", {{"source", "test"}, {"values", {{{"strategy", "dyn"}, {"speedup_vs_packing", 4.0}}}}}}}});
    std::vector<ResultRow> rows = {valid_row("bshd", 0, 8.0, 25), valid_row("dyn", 0, 1.0, 200)};
    if (with_packing) rows.push_back(valid_row("packing", 0, 2.0, 100));
    for (auto r : rows) {
      r.reference = "bshd";
      f.rows.push_back(r);
    }
    std::ostringstream os;
    print_table(os, f);
    const std::string text = os.str();
    std::istringstream in(text.substr(text.find("beside published numbers")));
    for (std::string line; std::getline(in, line);)
      if (line.rfind("s ", 0) == 0 && line.find(" dyn ") != std::string::npos) return line;
    return std::string("(no line)");
  };
  const std::string with = dyn_line(true);
  EXPECT_NE(with.find(" 2.000 "), std::string::npos) << with;  // ours over packing: 2 / 1
  EXPECT_EQ(with.find("8.000"), std::string::npos) << with;    // not over bshd
  EXPECT_EQ(with.substr(with.find_last_not_of(' ') - 4, 5), "0.500") << with;  // 2 / 4
  const std::string without = dyn_line(false);
  EXPECT_EQ(without.find("8.000"), std::string::npos) << without;
  EXPECT_EQ(without.substr(without.find_last_not_of(' ')), "-") << without;
}

// Another of dcpbench's files given where a results file goes (table, plot, gate, evaluate) says
// what it is (helper-77's trial: a convergence scenario was "not a valid ... file: \"schema\" ...").
TEST(Results, AnotherDcpbenchFileSaysWhatItIs) {
  const auto error_of = [](const nlohmann::json& j) {
    try {
      results_from_json(j, "f.json");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_EQ(error_of({{"schema", "dcpbench.converge.v1"}}),
            "f.json: is a \"dcpbench.converge.v1\" file, not a dcpbench.results.v1 file");
  EXPECT_EQ(error_of({{"name", "x"}, {"cluster", {{"gpus", 8}}}, {"dataset", {{"source", "file"}}}}),
            "f.json: is a run scenario (the input of dcpbench run), not a dcpbench.results.v1 file");
  EXPECT_EQ(error_of({{"name", "x"}, {"pool", {{"dp", 2}}}, {"data", {{"max_seqlen", 64}}}}),
            "f.json: is a convergence scenario (the input of dcpbench converge), not a dcpbench.results.v1 file");
  EXPECT_NE(error_of({{"rows", 1}}).find("not a valid dcpbench.results.v1 file"), std::string::npos);
}

// A planner's note on a plan (plan::Plan::note) is kept in its row, left out of the file when
// empty, must be a string, and the table counts each note per strategy and setting.
TEST(Results, APlannersNoteRoundTripsAndTheTableCountsIt) {
  ResultsFile f;
  f.context = make_context("d", "c", "k", "t");
  f.rows.push_back(valid_row("packing", 0, 2.0, 100));
  f.rows.push_back(valid_row("packing", 1, 2.0, 100));
  f.rows.push_back(valid_row("dyn", 0, 1.0, 200));
  f.rows.push_back(valid_row("dyn", 1, 1.0, 200));
  f.rows[3].note = "upstream raises here";
  fill_speedups(f.rows);
  const json j = results_to_json(f);
  EXPECT_TRUE(validate_results(j).empty());
  EXPECT_FALSE(j["rows"][2].contains("note"));
  EXPECT_EQ(j["rows"][3]["note"], "upstream raises here");
  EXPECT_EQ(results_from_json(j, "r").rows[3].note, "upstream raises here");
  json bad = j;
  bad["rows"][3]["note"] = 7;
  bool named = false;
  for (const auto& e : validate_results(bad)) named = named || e.find("rows[3].\"note\" is not a string") != std::string::npos;
  EXPECT_TRUE(named);
  std::ostringstream os;
  print_table(os, f);
  EXPECT_NE(os.str().find("  planner note: dyn (published), 1 of 2 steps: upstream raises here\n"), std::string::npos)
      << os.str();
  EXPECT_EQ(os.str().find("planner note: packing"), std::string::npos);
}

// Tuned rows divide by the reference's tuned row. Where that row is slower than the reference as
// published on the same batches, the table says by how much every tuned speedup would shrink
// against the faster one (helper-73's trial); where it is not, it says nothing.
TEST(Report, ATunedReferenceSlowerThanItsPublishedSettingIsNamed) {
  ResultsFile f;
  f.context = make_context("d", "c", "k", "t");
  for (int step : {0, 1}) {
    f.rows.push_back(valid_row("packing", step, 2.0, 100));
    f.rows.push_back(valid_row("dyn", step, 1.5, 130));
    ResultRow ref = valid_row("packing", step, 2.1, 95), dyn = valid_row("dyn", step, 1.4, 140);
    ref.setting = dyn.setting = "tuned";
    f.rows.push_back(ref);
    f.rows.push_back(dyn);
  }
  fill_speedups(f.rows);
  std::ostringstream os;
  print_table(os, f);
  EXPECT_NE(os.str().find("  tuned reference: packing (tuned) takes 2.1000 s, 5.0% more than packing on these "
                          "batches (its setting was picked on held-out ones); against packing each tuned speedup "
                          "would be 1.050x smaller\n"),
            std::string::npos)
      << os.str();
  for (auto& r : f.rows)
    if (r.strategy == "packing" && r.setting == "tuned") r.step_time_s = 1.9;
  fill_speedups(f.rows);
  std::ostringstream faster;
  print_table(faster, f);
  EXPECT_EQ(faster.str().find("tuned reference"), std::string::npos) << faster.str();
}

// A results file without rows: the table says so (it printed "# How obtained: " with nothing after
// it and no table; audit of helper-48).
TEST(Report, AFileWithoutRowsSaysSo) {
  ResultsFile f;
  f.context = make_context("d", "c", "k", "t");
  std::ostringstream os;
  print_table(os, f);
  EXPECT_EQ(os.str(), "# This results file has no rows: nothing was run, simulated or measured.\n");
}

}  // namespace
}  // namespace dcp::harness

// test_harness does not link the build-time sha (only dcpbench and bench_sched do): the weak
// reference is null and the tree's commit is recorded, with no warning.
TEST(Provenance, WithoutTheBuildTimeShaTheTreesCommitIsRecorded) {
  testing::internal::CaptureStderr();
  const std::string sha = dcp::source_git_sha();
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  const std::string tree = dcp::tree_git_sha();
  const char* env = std::getenv("DCP_GIT_SHA");
  EXPECT_EQ(sha, !tree.empty() ? tree : env && *env ? std::string(env) : std::string("unknown"));
}

