// Scenario loader validation: every committed scenario loads; unknown keys, missing keys and bad
// values are InputErrors whose message names the file, the (dotted) key and the value.
#include "core/error.h"
#include "harness/runner.h"
#include "harness/scenario.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace dcp::harness {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const fs::path kRepo = fs::path(__FILE__).parent_path().parent_path().parent_path();

json minimal() {
  return json::parse(R"({
    "name": "t",
    "model": "llama-13b",
    "dataset": {"source": "lognormal", "mean": 1000, "sigma": 1.0},
    "cluster": {"gpus": 64, "tp": 1, "pp": 8, "cp": 4},
    "training": {"global_batch": 64, "max_seqlen": 8192, "max_seqlen_per_rank": 4096},
    "strategies": ["packing", "megatron-dev"]
  })");
}

// Expects parse_scenario to throw an InputError containing every fragment.
void expect_error(const json& j, const std::vector<std::string>& fragments) {
  try {
    parse_scenario(j, "scenarios/x.json");
    FAIL() << "no error for " << j.dump();
  } catch (const InputError& e) {
    const std::string msg = e.what();
    for (const auto& f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << "message: " << msg << "\nmissing: " << f;
  }
}

TEST(Scenario, MinimalLoadsWithDefaults) {
  const Scenario s = parse_scenario(minimal(), "scenarios/x.json");
  EXPECT_EQ(s.name, "t");
  EXPECT_EQ(s.model.preset, "llama-13b");
  EXPECT_EQ(s.cluster.dp(), 2);
  EXPECT_EQ(s.cluster.pool(), 8);
  EXPECT_EQ(s.training.min_cp, 1);
  EXPECT_EQ(s.training.steps, 1);
  EXPECT_EQ(s.training.recompute, "none");
  EXPECT_EQ(s.dataset.kind, "lognormal");
  EXPECT_EQ(s.dataset.short_policy, "drop");
  ASSERT_EQ(s.strategies.size(), 2u);
}

TEST(Scenario, UnknownTopLevelKey) {
  json j = minimal();
  j["stratgies"] = json::array({"packing"});
  expect_error(j, {"scenarios/x.json", "\"stratgies\"", "[\"packing\"]", "not a known key"});
}

TEST(Scenario, UnknownNestedKey) {
  json j = minimal();
  j["cluster"]["cp_max"] = 8;
  expect_error(j, {"scenarios/x.json", "\"cluster.cp_max\"=8", "not a known key"});
}

TEST(Scenario, CpNotPowerOfTwo) {
  json j = minimal();
  j["cluster"]["cp"] = 6;
  j["cluster"]["gpus"] = 48;
  expect_error(j, {"scenarios/x.json: \"cluster.cp\"=6 is not a power of two"});
}

TEST(Scenario, MissingRequiredKey) {
  json j = minimal();
  j["training"].erase("max_seqlen_per_rank");
  expect_error(j, {"scenarios/x.json", "\"training.max_seqlen_per_rank\" is missing"});
}

// A misspelt required key is named beside the missing one (within |key| / 4 edits, case aside),
// and a key that is merely absent, or a real one read later, gets no guess.
TEST(Scenario, MissingRequiredKeyNamesALikelyTypo) {
  json j = minimal();
  j["training"]["global_batchh"] = j["training"]["global_batch"];
  j["training"].erase("global_batch");
  expect_error(j, {"\"training.global_batch\" is missing (required); the object has \"global_batchh\": a typo?"});
  j = minimal();
  j["Cluster"] = j["cluster"];
  j.erase("cluster");
  expect_error(j, {"\"cluster\" is missing (required); the object has \"Cluster\": a typo?"});
  // A real key of the same object that is merely read later is no typo: "max" is two edits from a
  // missing "mean", beyond |mean| / 4 (helper-74).
  j = minimal();
  j["dataset"].erase("mean");
  j["dataset"]["max"] = 100000;
  try {
    parse_scenario(j, "scenarios/x.json");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "scenarios/x.json: \"dataset.mean\" is missing (required)");
  }
  j = minimal();
  j["training"]["steps_total"] = 3;  // too far from "max_seqlen" to be its typo
  j["training"].erase("max_seqlen");
  try {
    parse_scenario(j, "scenarios/x.json");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "scenarios/x.json: \"training.max_seqlen\" is missing (required)");
  }
}

// Another dcpbench file given as a scenario says what it is instead of its first missing key.
TEST(Scenario, AnotherDcpbenchFileIsNamed) {
  expect_error(json{{"schema", "dcpbench.results.v1"}, {"rows", json::array()}},
               {"scenarios/x.json: is a \"dcpbench.results.v1\" file, not a run scenario"});
}

TEST(Scenario, WrongType) {
  json j = minimal();
  j["training"]["global_batch"] = "2048";
  expect_error(j, {"\"training.global_batch\"=\"2048\"", "not an integer"});
}

TEST(Scenario, BadEnumValue) {
  json j = minimal();
  j["training"]["recompute"] = "selective";
  expect_error(j, {"\"training.recompute\"=\"selective\"", "none, full"});
}

// The data path and the gradient-accumulation fusion: Megatron's defaults when left out, the
// scenario's values when given, and a bad value named.
TEST(Scenario, DataPathAndGradientAccumulationFusion) {
  const Scenario d = parse_scenario(minimal(), "scenarios/x.json");
  EXPECT_EQ(d.training.data_path, "megatron");
  EXPECT_TRUE(d.training.gradient_accumulation_fusion);
  json j = minimal();
  j["training"]["data_path"] = "prefetch";
  j["training"]["gradient_accumulation_fusion"] = false;
  const Scenario s = parse_scenario(j, "scenarios/x.json");
  EXPECT_EQ(s.training.data_path, "prefetch");
  EXPECT_FALSE(s.training.gradient_accumulation_fusion);
  j["training"]["data_path"] = "reroute";
  expect_error(j, {"\"training.data_path\"=\"reroute\"", "megatron, prefetch"});
  j = minimal();
  j["training"]["gradient_accumulation_fusion"] = "no";
  expect_error(j, {"\"training.gradient_accumulation_fusion\"=\"no\""});
  // --check-for-nan-in-loss-and-grad: on unless the scenario turns it off, and into the cost model.
  EXPECT_TRUE(d.training.check_for_nan_in_grad);
  j = minimal();
  j["training"]["check_for_nan_in_grad"] = false;
  EXPECT_FALSE(parse_scenario(j, "scenarios/x.json").training.check_for_nan_in_grad);
  EXPECT_FALSE(cost_model_of(parse_scenario(j, "scenarios/x.json")).training.check_for_nan_in_grad);
  EXPECT_TRUE(cost_model_of(d).training.check_for_nan_in_grad);
  j["training"]["check_for_nan_in_grad"] = 1;
  expect_error(j, {"\"training.check_for_nan_in_grad\"=1"});
}

TEST(Scenario, GpusNotDivisible) {
  json j = minimal();
  j["cluster"]["gpus"] = 60;
  expect_error(j, {"\"cluster.gpus\"=60", "tp*pp*cp=32"});
}

// Tensor parallelism is charged with sequence parallelism only (cost/time_model.h "TP"): a tp > 1
// scenario must say so, and its TP groups must stay on one node.
TEST(Scenario, TensorParallelNeedsSequenceParallelAndOneNode) {
  json j = minimal();
  j["cluster"]["gpus"] = 128;
  j["cluster"]["tp"] = 2;
  expect_error(j, {"\"training.sequence_parallel\"=false", "must be true with \"cluster.tp\"=2"});
  j["training"]["sequence_parallel"] = true;
  const Scenario s = parse_scenario(j, "scenarios/x.json");
  EXPECT_TRUE(s.training.sequence_parallel);
  EXPECT_EQ(s.cluster.pool(), 8);
  EXPECT_EQ(cost_model_of(s).cluster.tp, 2);
  // A preset's vocabulary padded as Megatron pads it: Llama-2's 32000 to a multiple of 128 x tp.
  EXPECT_EQ(cost_model_of(s).model.vocab, 32000);  // 250 x 128
  json t8 = j;
  t8["cluster"]["gpus"] = 512;
  t8["cluster"]["tp"] = 8;
  EXPECT_EQ(cost_model_of(parse_scenario(t8, "scenarios/x.json")).model.vocab, 32768);  // 32 x 1024
  EXPECT_EQ(cost_model_of(parse_scenario(minimal(), "scenarios/x.json")).model.vocab, 32000);
  j["cluster"]["gpus_per_node"] = 4;
  j["cluster"]["gpus"] = 512;
  j["cluster"]["tp"] = 8;
  try {
    cost_model_of(parse_scenario(j, "scenarios/x.json"));
    FAIL() << "tp 8 on nodes of 4 GPUs was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("\"tp\"=8 does not divide gpus_per_node=4"), std::string::npos) << e.what();
  }
  // At tp 1 the flag is accepted and changes nothing (Megatron turns it off there).
  j = minimal();
  j["training"]["sequence_parallel"] = true;
  EXPECT_EQ(cost_model_of(parse_scenario(j, "scenarios/x.json")).cluster.tp, 1);
}

TEST(Scenario, PoolNotPowerOfTwo) {
  json j = minimal();
  j["cluster"]["gpus"] = 96;  // dp 3, pool 12
  expect_error(j, {"\"cluster.gpus\"=96", "pool of 12"});
}

TEST(Scenario, MaxSeqlenDoesNotFitPool) {
  json j = minimal();
  j["training"]["max_seqlen"] = 1 << 20;
  expect_error(j, {"\"training.max_seqlen\"=1048576", "does not fit"});
}

TEST(Scenario, NegativeSigma) {
  json j = minimal();
  j["dataset"]["sigma"] = -1.0;
  expect_error(j, {"\"dataset.sigma\"=-1.0", "must be > 0"});
}

TEST(Scenario, MissingLengthsFile) {
  json j = minimal();
  j["dataset"] = {{"source", "file"}, {"path", "data/nope.txt"}};
  expect_error(j, {"\"dataset.path\"=\"data/nope.txt\"", "does not exist"});
}

TEST(Scenario, MixtureSharesMustSumToOne) {
  json j = minimal();
  j["dataset"] = json::parse(R"({"source": "mixture", "components": [
      {"share": 0.5, "source": "lognormal", "mean": 500, "sigma": 1.0},
      {"share": 0.4, "source": "lognormal", "mean": 5000, "sigma": 0.5}]})");
  expect_error(j, {"\"dataset.components\"", "sum to 0.9, not 1"});
  j["dataset"]["components"][1]["share"] = 0.5;
  j["dataset"]["components"][1]["colour"] = "red";
  expect_error(j, {"\"dataset.components[1].colour\"=\"red\"", "not a known key"});
}

TEST(Scenario, DuplicateStrategy) {
  json j = minimal();
  j["strategies"] = json::array({"packing", "packing"});
  expect_error(j, {"\"strategies[1]\"=\"packing\"", "listed twice"});
}

TEST(Scenario, PublishedNeedsANumber) {
  json j = minimal();
  j["published"] = json::parse(R"({"source": "blog", "values": [{"strategy": "packing"}]})");
  expect_error(j, {"\"published.values[0].strategy\"=\"packing\"", "no published number"});
}

// A published value that no strategy would show, twice for one strategy (two rows), or 0 (ours /
// theirs printed inf) was accepted.
TEST(Scenario, PublishedValuesBelongToOneStrategyOnceAndArePositive) {
  json j = minimal();
  j["published"] = json::parse(R"({"source": "blog", "values": [{"strategy": "packing", "step_time_ms": 5},
                                   {"strategy": "megatron-dev", "speedup_vs_packing": 1.3}]})");
  EXPECT_EQ(parse_scenario(j, "scenarios/x.json").published->values.size(), 2u);
  EXPECT_EQ(parse_scenario(j, "scenarios/x.json").published->hardware, "");  // unpublished
  json own = j;
  own["published"]["hardware"] = "8x H200 SXM";
  EXPECT_EQ(parse_scenario(own, "scenarios/x.json").published->hardware, "8x H200 SXM");
  own["published"]["hardware"] = 8;
  expect_error(own, {"\"published.hardware\"=8"});
  json bad = j;
  bad["published"]["values"][1]["strategy"] = "nope";
  expect_error(bad, {"scenarios/x.json: \"published.values[1].strategy\"=\"nope\" is not one of the scenario's "
                     "\"strategies\""});
  bad = j;
  bad["published"]["values"][1]["strategy"] = "packing";
  expect_error(bad, {"\"published.values[1].strategy\"=\"packing\" is published twice (also \"published.values[0]\")"});
  bad = j;
  bad["published"]["values"][0]["step_time_ms"] = 0;
  expect_error(bad, {"\"published.values[0].step_time_ms\"=0 must be > 0"});
  bad = j;
  bad["published"]["values"][1]["speedup_vs_packing"] = 0.0;
  expect_error(bad, {"\"published.values[1].speedup_vs_packing\"=0.0 must be > 0"});
  bad = j;
  bad["published"]["values"][1]["tflops_per_gpu"] = -1;
  expect_error(bad, {"\"published.values[1].tflops_per_gpu\"=-1 must be > 0"});
}

// A misspelt strategy is named as itself, not as the reference it makes absent (the reference
// check had come first: "reference_strategy"="packing" is not one of the scenario's "strategies").
TEST(Scenario, UnknownStrategyIsNamedBeforeTheReference) {
  json j = minimal();
  j["strategies"] = json::array({"dcpx"});
  j["reference_strategy"] = "packing";
  // named for this process: two test_harness processes on one machine had shared the file
  const fs::path file =
      fs::temp_directory_path() / ("dcp_scenario_unknown_strategy_" + std::to_string(::getpid()) + ".json");
  std::ofstream(file) << j.dump();
  try {
    load_scenario(file.string());
    FAIL() << "no error";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("\"strategies[0]\"=\"dcpx\" is not a known planner (known: "), std::string::npos) << msg;
    EXPECT_EQ(msg.find("reference_strategy"), std::string::npos) << msg;
  }
  fs::remove(file);
  // Without a registry (tests with planners of their own) the reference is still checked.
  expect_error(j, {"\"reference_strategy\"=\"packing\" is not one of the scenario's \"strategies\""});
}

TEST(Scenario, EveryCommittedScenarioLoads) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(kRepo / "scenarios")) {
    if (e.path().extension() != ".json") continue;
    if (e.path().filename().string().rfind("converge-", 0) == 0) continue;  // test_converge.cpp
    SCOPED_TRACE(e.path().string());
    const Scenario s = load_scenario(e.path().string());
    EXPECT_EQ(s.name + ".json", e.path().filename().string()) << "file name and \"name\" should agree";
    EXPECT_FALSE(s.notes.empty()) << "every committed scenario says why it is set up that way";
    ++n;
  }
  EXPECT_GE(n, 5);
}

}  // namespace
}  // namespace dcp::harness
