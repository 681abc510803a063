// Issue 11 in the harness readers: the scenario loader, the results reader and cp-attn's argument
// check refuse inputs over a stated limit with an InputError that names the value and the limit
// (never a crash, a wrapped integer or hours of work). The CLI side (exit 2, one line on stderr,
// nothing written) is checked by the `robustness` CTest (harness/tests/robustness/).
#include "core/error.h"
#include "core/json_io.h"
#include "data/dataset.h"
#include "harness/cp_attn_check.h"
#include "harness/results.h"
#include "harness/scenario.h"
#include "plan/planner.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

namespace dcp::harness {
namespace {

using nlohmann::json;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

json minimal_scenario() {
  return json::parse(R"({
    "name": "t", "model": "llama-13b",
    "dataset": {"source": "lognormal", "mean": 1000, "sigma": 1.0},
    "cluster": {"gpus": 64, "tp": 1, "pp": 8, "cp": 4},
    "training": {"global_batch": 64, "max_seqlen": 8192, "max_seqlen_per_rank": 4096},
    "strategies": ["packing"]
  })");
}

TEST(BoundedScenario, MixtureNestingIsLimitedBeforeRecursing) {
  auto nested = [](int levels) {
    json m = {{"source", "lognormal"}, {"mean", 100}, {"sigma", 1}};
    for (int i = 0; i < levels; ++i) {
      json c = m;
      c["share"] = 1;
      m = {{"source", "mixture"}, {"components", json::array({c})}};
    }
    return m;
  };
  json j = minimal_scenario();
  j["dataset"] = nested(data::kMaxMixtureDepth);  // exactly the limit, as impl/data accepts it
  EXPECT_NO_THROW(parse_scenario(j, "x.json"));
  j["dataset"] = nested(data::kMaxMixtureDepth + 1);
  EXPECT_NE(error_of([&] { parse_scenario(j, "x.json"); }).find("nests mixtures deeper than the limit of 8 levels"),
            std::string::npos);
  // 20,000 levels (issue 11's crash) through the file reader: stopped by the JSON depth limit.
  std::string text;
  std::string deep = R"({"source":"mixture","components":[)";
  for (int i = 0; i < 20000; ++i) deep += R"({"share":1,"source":"mixture","components":[)";
  deep += R"({"share":1,"source":"lognormal","mean":100,"sigma":1})";
  for (int i = 0; i < 20000; ++i) deep += "]}";
  deep += "]}";
  j = minimal_scenario();
  j.erase("dataset");
  text = j.dump();
  text = text.substr(0, text.size() - 1) + ",\"dataset\":" + deep + "}";
  EXPECT_NE(error_of([&] { parse_json_text(text, "x.json"); }).find("JSON nested deeper than the limit"),
            std::string::npos);
}

TEST(BoundedScenario, UnknownKeyWithHugeValueIsShownShort) {
  json j = minimal_scenario();
  json v = json::array();
  for (int i = 0; i < 100000; ++i) v.push_back(i);
  j[std::string(1000, 'k') + "\n"] = v;
  const std::string e = error_of([&] { parse_scenario(j, "x.json"); });
  EXPECT_NE(e.find("is not a known key"), std::string::npos) << e.substr(0, 300);
  EXPECT_LT(e.size(), 400u);
  EXPECT_EQ(e.find('\n'), std::string::npos);
}

TEST(BoundedScenario, IntegersAreRangeCheckedNotWrapped) {
  json j = minimal_scenario();
  j["training"]["global_batch"] = json::parse("9223372036854775808");  // 2^63
  EXPECT_NE(error_of([&] { parse_scenario(j, "x.json"); }).find("is above the maximum 262144"), std::string::npos);
  j["training"]["global_batch"] = 10000000;  // issue 11: ran out of memory after 38 s
  EXPECT_NE(error_of([&] { parse_scenario(j, "x.json"); })
                .find("\"training.global_batch\"=10000000 is above the maximum 262144"),
            std::string::npos);
  j = minimal_scenario();
  j["training"]["seed"] = json::parse("18446744073709551615");
  EXPECT_NE(error_of([&] { parse_scenario(j, "x.json"); }).find("\"training.seed\"=18446744073709551615 is above"),
            std::string::npos);
  j["training"]["seed"] = json::parse("18446744073709551616");  // 2^64: a float to the parser (helper-75's trial)
  EXPECT_NE(error_of([&] { parse_scenario(j, "x.json"); })
                .find("\"training.seed\"=1.8446744073709552e+19 is not an integer in [0, 4611686018427387904]"),
            std::string::npos);
  j = minimal_scenario();
  j["dataset"] = json::parse(R"({"source": "quantiles", "quantiles": [[0, 1], [1, 18446744073709551615]]})");
  EXPECT_NE(error_of([&] { parse_scenario(j, "x.json"); }).find("length is above the maximum"), std::string::npos);
}

TEST(BoundedScenario, SimulationSizeIsRefusedAtLoad) {
  // 1024 samples on a pool of 2^20 ranks: 16.9 GB in the simulator before this limit.
  json j = minimal_scenario();
  j["cluster"] = json{{"gpus", 1 << 20}, {"cp", 1 << 20}};
  j["training"]["global_batch"] = 1024;
  EXPECT_NE(error_of([&] { parse_scenario(j, "x.json"); })
                .find("x the DP x CP pool of 1048576 ranks = 1073741824 is above the limit of 134217728"),
            std::string::npos);
  // pp 1024 x vpp 1024 with 4096 samples: killed for memory at 24 GB before this limit.
  j = minimal_scenario();
  j["cluster"] = json{{"gpus", 1024}, {"pp", 1024}, {"vpp", 1024}};
  j["training"] = json{{"global_batch", 4096}, {"max_seqlen", 8192}, {"max_seqlen_per_rank", 8192}};
  EXPECT_NE(error_of([&] { parse_scenario(j, "x.json"); }).find("x pp x vpp = 4294967296 is above the limit of 8388608"),
            std::string::npos);
  j["training"]["global_batch"] = 8;  // 8 x 2^20 stages = 2^23: at the limit, accepted
  EXPECT_NO_THROW(parse_scenario(j, "x.json"));
}

TEST(BoundedResults, StepAndCountsAreRangeChecked) {
  ResultsFile f;
  f.context = make_context("none", "m", "c", "test");
  ResultRow r;
  r.scenario = "s";
  r.strategy = "packing";
  r.source = simulated_source("m", "c");
  r.error = "x";
  f.rows.push_back(r);
  const json good = results_to_json(f);
  ASSERT_TRUE(validate_results(good).empty());
  auto first_error = [](const json& j) {
    const auto errs = validate_results(j);
    return errs.empty() ? std::string("(valid)") : errs.front();
  };
  json j = good;
  j["rows"][0]["step"] = json::parse("9223372036854775808");  // issue 11: the gate accepted it
  EXPECT_NE(first_error(j).find("rows[0].\"step\"=9223372036854775808 is not in [0, 2147483647]"), std::string::npos)
      << first_error(j);
  j = good;
  j["rows"][0]["step"] = -1;
  EXPECT_NE(first_error(j).find("\"step\"=-1 is not in"), std::string::npos);
  j = good;
  j["rows"][0]["tokens"] = 1e300;  // was a float-to-int64 conversion (undefined)
  EXPECT_NE(first_error(j).find("\"tokens\" is not an integer"), std::string::npos);
  j = good;
  j["rows"][0]["plan"] = json::array({json::array({json::array({0, 1, "x", 4})})});
  EXPECT_NE(first_error(j).find("\"plan\" is not an array of micro-batches"), std::string::npos);
  j = good;
  j["rows"][0]["rank_busy_s"] = json::array({1, "x"});
  EXPECT_NE(first_error(j).find("\"rank_busy_s\" is not an array of numbers"), std::string::npos);
  j = good;
  j["scenarios"] = json::array({json{{"name", "s"}, {"gpus", "many"}}});
  EXPECT_NE(first_error(j).find("scenarios[0].\"gpus\" is not an integer"), std::string::npos);
  j = good;
  j["scenarios"] = json::array({json{{"name", "s"}, {"published", json{{"values", json::array({json{{"strategy", 1}}})}}}}});
  EXPECT_NE(first_error(j).find("\"published.values\" has an entry"), std::string::npos);
  j = good;
  j["scenarios"] = 5;
  EXPECT_EQ(first_error(j), "\"scenarios\" is not an array");
}

TEST(BoundedCpAttn, ReferenceCostIsEstimatedAndRefused) {
  CpAttnArgs a;  // the defaults are well inside the budget
  EXPECT_NO_THROW(validate(a));
  const CpAttnCost d = estimate_cost(a);
  EXPECT_EQ(d.runs, 4 * 3);  // 4 thread ranks x group sizes 1, 2, 4
  EXPECT_LT(d.reference_units, kMaxReferenceUnits / 10);
  // Issue 11: --heads 4096 --kv-heads 4096 --head-dim 4096 ran out of memory.
  a.heads = a.kv_heads = a.head_dim = 4096;
  std::string e = error_of([&] { validate(a); });
  EXPECT_NE(e.find("the float64 reference needs an estimated 1.83e+13 units of work"), std::string::npos) << e;
  EXPECT_NE(e.find("over the budget of 8e+09"), std::string::npos) << e;
  // Issue 11: --ranks 1 --lengths 16384 ran past 120 s (sum L^2 * 4 * 64 = 6.87e10).
  a = CpAttnArgs{};
  a.ranks = 1;
  a.lengths = {16384};
  e = error_of([&] { validate(a); });
  EXPECT_NE(e.find("6.87e+10 units"), std::string::npos) << e;
  // Memory is estimated too: few tokens but wide rows, within the work budget.
  a = CpAttnArgs{};
  a.ranks = 1;
  a.all_groups = false;
  a.lengths = {2};
  a.heads = a.kv_heads = a.head_dim = 4096;
  const CpAttnCost m = estimate_cost(a);
  EXPECT_LE(m.reference_units, kMaxReferenceUnits);
  EXPECT_GT(m.bytes, kMaxCheckBytes);
  EXPECT_NE(error_of([&] { validate(a); }).find("GiB of memory, over the limit of 2 GiB"), std::string::npos);
}

}  // namespace
}  // namespace dcp::harness
