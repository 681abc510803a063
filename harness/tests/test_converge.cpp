// dcpbench converge: the scenario loader's errors, the text corpus and batches, the report's
// schema check, and end-to-end runs on a 4-rank pool: a passing run, and the same run with an
// impossible bound, which must fail naming the strategy, the step and the quantity.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "attn/compare.h"
#include "comm/thread_comm.h"
#include "core/error.h"
#include "harness/converge.h"
#include "harness/converge_data.h"
#include "harness/converge_scenario.h"

namespace dcp::harness {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const fs::path kConvergeRepo = fs::path(__FILE__).parent_path().parent_path().parent_path();

// A small but complete scenario: 4 ranks, 2 attention + Mamba blocks, MTP, 3 steps, 1 edge case.
json small() {
  json j = json::parse(R"({
    "name": "t",
    "model": {"vocab": 256, "hidden": 8, "ffn": 12, "heads": 2, "kv_heads": 1, "head_dim": 4,
              "mixers": ["attention", "mamba"], "mamba_heads": 4, "mamba_head_dim": 2, "mamba_state": 2,
              "mtp": true, "attention": "ring"},
    "data": {"text_dir": "", "max_seqlen": 64, "max_paragraphs": 3, "seed": 2},
    "pool": {"dp": 1, "cp": 4},
    "training": {"steps": 3, "global_batch": 6, "max_seqlen_per_rank": 16, "lr": 0.05},
    "strategies": ["packing", "megatron-dev", "dcp"],
    "edge_cases": [{"name": "tied", "lengths": [20, 20, 20, 20]}]
  })");
  j["data"]["text_dir"] = (kConvergeRepo / "scenarios" / "data" / "text" / "moby-dick").string();
  return j;
}

// Loads j from a file named for this process (two test_harness processes on one machine had
// written and read each other's dcp_converge_<name>.json), removed once read, loaded or not.
ConvergeScenario load_tmp(const json& j, const std::string& name) {
  const fs::path p =
      fs::temp_directory_path() / ("dcp_converge_" + name + "_" + std::to_string(::getpid()) + ".json");
  std::ofstream(p) << j.dump();
  struct Remove {
    fs::path p;
    ~Remove() {
      std::error_code ec;
      fs::remove(p, ec);
    }
  } remove{p};
  return load_converge_scenario(p.string());
}

void expect_converge_error(const json& j, const std::vector<std::string>& fragments) {
  try {
    load_tmp(j, "err");
    FAIL() << "no error for " << j.dump();
  } catch (const InputError& e) {
    const std::string msg = e.what();
    for (const auto& f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << "message: " << msg << "\nmissing: " << f;
  }
}

TEST(ConvergeScenario, EveryCommittedConvergenceScenarioLoads) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(kConvergeRepo / "scenarios")) {
    const std::string f = e.path().filename().string();
    if (f.rfind("converge-", 0) != 0 || e.path().extension() != ".json") continue;
    SCOPED_TRACE(f);
    const ConvergeScenario s = load_converge_scenario(e.path().string());
    EXPECT_EQ(s.name + ".json", f);
    EXPECT_GE(s.steps, 1);
    EXPECT_EQ(s.pool(), 8) << "issue 7: a pool of 8 ranks";
    ++n;
  }
  EXPECT_GE(n, 2);
}

TEST(ConvergeScenario, BadInputNamesFileKeyAndValue) {
  json j = small();
  j["training"]["stepz"] = 3;
  expect_converge_error(j, {"\"training.stepz\"=3", "not a known key"});
  j = small();
  j["model"]["mixers"] = {"attention", "lstm"};
  expect_converge_error(j, {"\"model.mixers[1]\"=\"lstm\"", "attention, mamba"});
  j = small();
  j["model"]["mamba_heads"] = 6;
  expect_converge_error(j, {"\"model.mamba_heads\"=6", "pool of 4"});
  j = small();
  j["training"]["max_seqlen_per_rank"] = 8;
  expect_converge_error(j, {"\"training.max_seqlen_per_rank\"=8", "data.max_seqlen"});
  j = small();
  j["edge_cases"][0]["lengths"] = {20, 1};
  expect_converge_error(j, {"\"edge_cases[0].lengths[1]\"=1"});
  j = small();
  j["data"]["text_dir"] = "no/such/folder";
  expect_converge_error(j, {"\"data.text_dir\"=\"no/such/folder\"", "is not a folder"});
  j = small();
  j["strategies"] = {"reference"};
  expect_converge_error(j, {"\"strategies[0]\"=\"reference\""});
  j = small();
  j["strategies"] = {"packing", "dcpp"};
  expect_converge_error(j, {"\"strategies[1]\"=\"dcpp\"", "is not a planner", "megatron-dev"});
  j = small();
  j["training"]["steps"] = 1;
  expect_converge_error(j, {"\"training.steps\"=1", "below the minimum 2"});
  // Byte-level text: a vocabulary below 256 failed the model's assertion on the first step (exit 1,
  // helper-77's trial).
  j = small();
  j["model"]["vocab"] = 100;
  expect_converge_error(j, {"\"model.vocab\"=100", "below the minimum 256"});
  j = small();
  j["training"]["steps"] = 10001;  // kConvergeMaxSteps: memory grows with the steps
  expect_converge_error(j, {"\"training.steps\"=10001", "above the maximum 10000"});
  j = small();
  j["strategies"] = {"dcp", "packing", "dcp"};
  expect_converge_error(j, {"\"strategies[2]\"=\"dcp\"", "is listed twice"});
  j = small();
  j["edge_cases"].push_back(j["edge_cases"][0]);
  expect_converge_error(j, {"\"edge_cases[1].name\"=\"tied\"", "edge_cases[0]"});
  j = small();
  j["edge_cases"][0]["lengths"] = std::vector<int>(65537, 20);
  expect_converge_error(j, {"\"edge_cases[0].lengths\"=65537", "1 to 65536 documents"});
}

// A run scenario given to converge was refused for its first value out of a convergence
// scenario's range ("model.ffn"=8192 is above the maximum 4096), never saying what it is.
TEST(ConvergeScenario, ARunScenarioIsNamedAsOne) {
  const std::string file = (kConvergeRepo / "scenarios" / "megatron-example-4gpu.json").string();
  try {
    load_converge_scenario(file);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("megatron-example-4gpu.json: has \"cluster\": it is a run scenario (dcpbench "
                                         "run), not a convergence scenario"),
              std::string::npos)
        << e.what();
  }
  json j = small();
  j["cluster"] = json::object();  // a convergence scenario with a stray key: the unknown key, as before
  expect_converge_error(j, {"\"cluster\"={}", "is not a known key"});
}

TEST(ConvergeData, CorpusAndBatchesAreDeterministicAndWithinLimits) {
  const ConvergeScenario s = load_tmp(small(), "data");
  const TextCorpus a = load_text_corpus(s), b = load_text_corpus(s);
  ASSERT_EQ(a.documents, b.documents);
  EXPECT_EQ(a.files, 40);
  int64_t tokens = 0, short_docs = 0;
  for (const auto& d : a.documents) {
    EXPECT_GE(d.size(), 2u);
    EXPECT_LE(static_cast<int64_t>(d.size()), s.max_seqlen);
    for (int32_t t : d) EXPECT_TRUE(t >= 0 && t < 256);
    tokens += static_cast<int64_t>(d.size());
    short_docs += static_cast<int64_t>(d.size()) <= s.max_seqlen_per_rank;
  }
  EXPECT_LE(tokens, a.bytes);  // documents are pieces of the text (blank lines collapse)
  EXPECT_GT(tokens, a.bytes * 9 / 10);
  EXPECT_GT(short_docs, 0) << "some documents fit one rank (CP 1)";
  const auto s0 = step_batch(a, s, 0), s0b = step_batch(a, s, 0), s1 = step_batch(a, s, 1);
  EXPECT_EQ(s0.samples, s0b.samples);
  EXPECT_NE(s0.samples, s1.samples);
  EXPECT_EQ(static_cast<int>(s0.samples.size()), s.global_batch);
  const auto e = edge_batch(a, {5, 64, 2}, 3);
  ASSERT_EQ(e.samples.size(), 3u);
  EXPECT_EQ(e.samples[0].size(), 5u);
  EXPECT_EQ(e.samples[1].size(), 64u);
  EXPECT_EQ(e.samples[2].size(), 2u);
}

ConvergeOutcome run_small(const ConvergeScenario& s, const ConvergeOptions& o) {
  ConvergeOutcome out;
  std::ostringstream progress;
  comm::run_threads(s.pool(), [&](comm::Communicator& w) {
    ConvergeOutcome r = run_converge(w, s, o, progress);
    if (w.rank() == 0) out = std::move(r);
  });
  return out;
}

TEST(ConvergeRun, EveryStrategyAgreesWithTheReference) {
  const ConvergeScenario s = load_tmp(small(), "run");
  for (const char* dtype : {"f64", "f32"}) {
    SCOPED_TRACE(dtype);
    ConvergeOptions o;
    o.quiet = true;
    o.dtype = dtype;
    const ConvergeOutcome out = run_small(s, o);
    for (const auto& f : out.failures) ADD_FAILURE() << f;
    const json& r = out.report;
    EXPECT_NO_THROW(validate_converge_report(r, "report"));
    EXPECT_EQ(r["steps"], 4);
    EXPECT_EQ(r["dtype"], dtype);
    for (const char* name : {"packing", "megatron-dev", "dcp"}) {
      const json& st = r["strategies"][name];
      EXPECT_TRUE(st["pass"].get<bool>()) << name;
      EXPECT_TRUE(st["bitwise_repeat"].get<bool>()) << name;
      EXPECT_LE(st["max_rel_grad_diff"].get<double>(), st["bound"]["grad_rel"].get<double>());
      EXPECT_EQ(st["losses"].size(), 4u);
    }
    // The MTP loss is compared too (the scenario has the head), within its own bound.
    for (const char* name : {"packing", "megatron-dev", "dcp"}) {
      const json& st = r["strategies"][name];
      ASSERT_TRUE(st.contains("dmtp_loss_rel")) << name;
      EXPECT_EQ(st["dmtp_loss_rel"].size(), 4u);
      EXPECT_LE(st["max_rel_dmtp_loss"].get<double>(), st["bound"]["mtp_loss_rel"].get<double>());
      EXPECT_EQ(st["grad_worst_tensor"].size(), 4u);
    }
    const std::string table = converge_table(r);
    const json& b = r["bounds"];
    ASSERT_EQ(b["loss_rel_per_step"].size(), 4u);
    ASSERT_EQ(b["grad_rel_per_step"].size(), 4u);
    ASSERT_EQ(b["mtp_loss_rel_per_step"].size(), 4u);
    if (std::string(dtype) == "f32") {
      // Each step's float32 bound is 2 x that step's measured drift from float64 + the floor; the
      // drift is real; the reported scalars are the largest of the per-step ones.
      EXPECT_GT(b["f32_drift_loss_rel"].get<double>(), 0.0);
      double largest_loss = 0;
      for (int i = 0; i < 4; ++i) {
        SCOPED_TRACE(i);
        for (const char* q : {"loss", "grad", "mtp_loss"}) {
          const double drift = b[std::string("f32_drift_") + q + "_rel_per_step"][i].get<double>();
          EXPECT_NEAR(b[std::string(q) + "_rel_per_step"][i].get<double>(), 2 * drift + kConvergeFloorF32, 1e-15) << q;
        }
        largest_loss = std::max(largest_loss, b["loss_rel_per_step"][i].get<double>());
      }
      EXPECT_EQ(b["loss_rel"].get<double>(), largest_loss);
      EXPECT_NEAR(b["loss_rel"].get<double>(), 2 * b["f32_drift_loss_rel"].get<double>() + kConvergeFloorF32, 1e-15);
      EXPECT_TRUE(r["strategies"].contains("reference_f64"));
      // The same-parameter comparison: each step's bound is 2 x the float64 run's drift at the
      // float32 reference's parameters of that step + the floor, and every strategy is within it.
      // At step 0 and at the edge case a strategy starts from the initial model in both runs, so its
      // losses and differences are bitwise those of the trajectory comparison. (The float64 drift
      // there is not: its same-parameter run starts from the float32 reference's rounded initial
      // values, its own run from the float64 ones.)
      for (int i = 0; i < 4; ++i) {
        SCOPED_TRACE(i);
        for (const char* q : {"loss", "grad", "mtp_loss"}) {
          const double drift = b[std::string("f32_same_params_drift_") + q + "_rel_per_step"][i].get<double>();
          EXPECT_NEAR(b[std::string("same_params_") + q + "_rel_per_step"][i].get<double>(), 2 * drift + kConvergeFloorF32,
                      1e-15)
              << q;
        }
      }
      for (const char* name : {"packing", "megatron-dev", "dcp"}) {
        SCOPED_TRACE(name);
        const json& st = r["strategies"][name];
        ASSERT_TRUE(st.contains("same_params"));
        const json& sp = st["same_params"];
        for (int i = 0; i < 4; ++i) {
          SCOPED_TRACE(i);
          EXPECT_LE(sp["grad_rel_diff"][i].get<double>(), b["same_params_grad_rel_per_step"][i].get<double>());
          EXPECT_LE(sp["dloss_rel"][i].get<double>(), b["same_params_loss_rel_per_step"][i].get<double>());
          EXPECT_LE(sp["dmtp_loss_rel"][i].get<double>(), b["same_params_mtp_loss_rel_per_step"][i].get<double>());
          if (i == 0 || i == 3) {
            EXPECT_EQ(sp["losses"][i].dump(), st["losses"][i].dump());
            EXPECT_EQ(sp["grad_rel_diff"][i].dump(), st["grad_rel_diff"][i].dump());
          }
        }
        // The gradient is judged tensor by tensor: the largest share of a tensor's own bound is at
        // least the largest difference over the loosest tensor's bound, and at most 1 (a pass).
        EXPECT_TRUE(sp["pass"].get<bool>());
        ASSERT_EQ(sp["grad_bound_use"].size(), 4u);
        for (int i = 0; i < 4; ++i) {
          const double use = sp["grad_bound_use"][i].get<double>();
          EXPECT_LE(use, 1.0) << i;
          EXPECT_GE(use * (1 + 1e-12), sp["grad_rel_diff"][i].get<double>() / b["same_params_grad_rel_per_step"][i].get<double>()) << i;
        }
      }
      // The per-tensor drifts: one per tensor and step, the per-step drift their largest.
      const json& per_tensor = b["f32_same_params_drift_grad_rel_per_tensor"];
      ASSERT_EQ(per_tensor.size(), 4u);
      for (int i = 0; i < 4; ++i) {
        ASSERT_EQ(per_tensor[i].size(), b["tensors"].size());
        double most = 0;
        for (const auto& d : per_tensor[i]) most = std::max(most, d.get<double>());
        EXPECT_EQ(most, b["f32_same_params_drift_grad_rel_per_step"][i].get<double>()) << i;
      }
      EXPECT_NE(table.find("same parameters (each step from the float32 reference's parameters"), std::string::npos)
          << table;
    } else {
      for (const char* name : {"packing", "megatron-dev", "dcp"})
        EXPECT_FALSE(r["strategies"][name].contains("same_params")) << name << ": float64 has no same-parameter run";
      EXPECT_EQ(b["grad_rel"].get<double>(), kConvergeBoundF64);
      for (const auto& x : b["grad_rel_per_step"]) EXPECT_EQ(x.get<double>(), kConvergeBoundF64);
    }
    EXPECT_NE(table.find("every strategy within its bound"), std::string::npos) << table;
    // The loss column is the loss after the main steps (3 here), not the edge case's, which
    // starts again from the initial model; the header and the report say so.
    EXPECT_EQ(r["edge_case_start"], "initial_model");
    EXPECT_NE(table.find("1 edge-case, each from the initial model"), std::string::npos) << table;
    char main_loss[32];
    std::snprintf(main_loss, sizeof main_loss, "%9.5f", r["strategies"]["reference"]["losses"][2].get<double>());
    const size_t row = table.find("\nreference ");
    ASSERT_NE(row, std::string::npos);
    EXPECT_EQ(table.substr(row + 1, table.find('\n', row + 1) - row - 1).find(main_loss), 17u) << table;
    EXPECT_LT(table.find("\nreference "), table.find("\npacking ")) << "reference first, then the scenario's order";
  }
}

TEST(ConvergeRun, PlanningOneStepAheadTrainsBitwiseTheSameAsPlanningInTheLoop) {
  const ConvergeScenario s = load_tmp(small(), "async");
  ConvergeOptions o;
  o.quiet = true;
  const ConvergeOutcome a = run_small(s, o);
  o.sync_planning = true;
  const ConvergeOutcome b = run_small(s, o);
  for (const auto& f : a.failures) ADD_FAILURE() << f;
  EXPECT_NO_THROW(validate_converge_report(a.report, "async"));
  EXPECT_NO_THROW(validate_converge_report(b.report, "sync"));
  const int steps = a.report["steps"].get<int>();
  for (const char* name : {"packing", "megatron-dev", "dcp"}) {
    SCOPED_TRACE(name);
    const json& x = a.report["strategies"][name];
    const json& y = b.report["strategies"][name];
    // JSON doubles carry 17 significant digits: equal text <=> equal bits.
    for (const char* k : {"losses", "mtp_losses", "grad_norms", "grad_hashes"}) EXPECT_EQ(x[k].dump(), y[k].dump()) << k;
    EXPECT_EQ(x["planning"]["mode"], "async");
    EXPECT_EQ(y["planning"]["mode"], "sync");
    ASSERT_EQ(x["planning"]["plan_ms"].size(), static_cast<size_t>(steps));
    ASSERT_EQ(y["planning"]["wait_ms"].size(), static_cast<size_t>(steps));
    // In the loop, the wait brackets the planner's call (same clock): nothing is hidden.
    for (int i = 0; i < steps; ++i)
      EXPECT_GE(y["planning"]["wait_ms"][i].get<double>(), y["planning"]["plan_ms"][i].get<double>()) << i;
    EXPECT_EQ(y["planning"]["hidden_ms_total"].get<double>(), 0.0);
  }
  EXPECT_NE(converge_table(a.report).find("planning (measured wall clock"), std::string::npos);
  json broken = a.report;
  broken["strategies"]["dcp"]["planning"]["wait_ms"] = json::array({1.0});
  EXPECT_THROW(validate_converge_report(broken, "r"), InputError);
}

// Each edge case trains from the initial model in every run (Executor::restart): its losses and
// gradients do not depend on how many main steps, or which edge case, came before it. An edge
// case's batch depends only on its own lengths and position, so a different first edge case
// leaves the second's batch as it was.
TEST(ConvergeRun, EachEdgeCaseTrainsFromTheInitialModel) {
  json base = small();
  base["edge_cases"] = json::array({json{{"name", "tied"}, {"lengths", {20, 20, 20, 20}}},
                                    json{{"name", "short"}, {"lengths", {10, 12, 14}}}});
  json other_first = base;
  other_first["edge_cases"][0] = json{{"name", "other"}, {"lengths", {30, 5, 25}}};
  const ConvergeScenario a = load_tmp(base, "fresh_a");
  const ConvergeScenario b = load_tmp(other_first, "fresh_b");
  ConvergeOptions o;
  o.quiet = true;
  o.dtype = "f32";
  const ConvergeOutcome three = run_small(a, o);  // 3 main steps, tied, short
  o.steps = 1;
  const ConvergeOutcome one = run_small(a, o);    // 1 main step, tied, short
  const ConvergeOutcome swapped = run_small(b, o);  // 1 main step, other, short
  for (const auto& f : three.failures) ADD_FAILURE() << f;
  // One main step cannot show the reference's loss drop; nothing else may fail.
  for (const ConvergeOutcome* out : {&one, &swapped}) {
    ASSERT_EQ(out->failures.size(), 1u);
    EXPECT_NE(out->failures[0].find("loss fell by"), std::string::npos) << out->failures[0];
  }
  ASSERT_EQ(three.report["steps"], 5);
  ASSERT_EQ(one.report["steps"], 3);
  for (const char* name : {"reference", "reference_f64", "packing", "megatron-dev", "dcp"}) {
    SCOPED_TRACE(name);
    const json& x = three.report["strategies"][name];
    const json& y = one.report["strategies"][name];
    const json& z = swapped.report["strategies"][name];
    for (const char* k : {"losses", "mtp_losses", "grad_norms", "grad_hashes"}) {
      SCOPED_TRACE(k);
      // JSON doubles carry 17 significant digits: equal text <=> equal bits.
      EXPECT_EQ(x[k][3].dump(), y[k][1].dump()) << "tied after 3 main steps vs after 1";
      EXPECT_EQ(x[k][4].dump(), y[k][2].dump()) << "short after 3 main steps vs after 1";
      EXPECT_EQ(y[k][2].dump(), z[k][2].dump()) << "short after tied vs after another edge case";
      EXPECT_NE(y[k][1].dump(), z[k][1].dump()) << "the first edge cases differ";
    }
    // The main steps train on: the last main step is not the first one again.
    EXPECT_NE(x["losses"][2].dump(), y["losses"][0].dump());
  }
  // In float32 an edge case's bounds are those of one step from the initial model: its
  // reference's drift from float64 is not the main steps' accumulated one.
  const json& bd = three.report["bounds"];
  for (const int i : {3, 4}) {
    SCOPED_TRACE(i);
    EXPECT_LT(bd["f32_drift_grad_rel_per_step"][i].get<double>(),
              10 * bd["f32_drift_grad_rel_per_step"][0].get<double>() + 1e-7);
  }
}

// float32's same-parameter comparison (converge.cpp): each step of the float64 run and of every
// strategy starts from the float32 reference's parameters of that step. So its drift from the
// float32 reference stays that of one step's arithmetic, as at step 0, while along the two
// trajectories the drift grows with the steps (the AdamW updates diverge): were the parameters not
// loaded, the float64 run would follow its own trajectory and both drifts would be the same.
TEST(ConvergeRun, TheSameParameterRunComparesEachStepAtTheReferencesParameters) {
  json j = small();
  j["training"]["steps"] = 10;
  j["strategies"] = {"dcp"};
  const ConvergeScenario s = load_tmp(j, "same_params");
  ConvergeOptions o;
  o.quiet = true;
  o.dtype = "f32";
  const ConvergeOutcome out = run_small(s, o);
  for (const auto& f : out.failures) ADD_FAILURE() << f;
  const json& b = out.report["bounds"];
  const json& traj = b["f32_drift_grad_rel_per_step"];
  const json& same = b["f32_same_params_drift_grad_rel_per_step"];
  const json& st = out.report["strategies"]["dcp"];
  const json& sp = st["same_params"];
  const double same0 = same[0].get<double>(), diff0 = sp["grad_rel_diff"][0].get<double>();
  ASSERT_GT(same0, 0.0);
  ASSERT_GT(diff0, 0.0);
  // Measured at this commit (gradient, per tensor): the trajectories' drift grows from 9.0e-7 at
  // step 0 to 7.3e-4 at step 9, the same-parameter drift stays within 0.9e-6 to 1.3e-5; dcp's
  // differences 1.2e-6 to 1.6e-4 along its trajectory, 1.0e-6 to 1.9e-5 at the same parameters.
  for (int i = 1; i < 10; ++i) {
    SCOPED_TRACE(i);
    EXPECT_LT(same[i].get<double>(), traj[i].get<double>());
    EXPECT_LT(same[i].get<double>(), 50 * same0) << "one step's drift, not the trajectories'";
    EXPECT_LT(sp["grad_rel_diff"][i].get<double>(), 50 * diff0);
  }
  EXPECT_GT(traj[9].get<double>(), 10 * same[9].get<double>()) << "the trajectories have diverged by step 9";
  // At step 0 the strategy starts from the initial model in both of its runs: bitwise the same.
  EXPECT_EQ(sp["losses"][0].dump(), st["losses"][0].dump());
  EXPECT_EQ(sp["grad_rel_diff"][0].dump(), st["grad_rel_diff"][0].dump());
  // And its bound is the tighter one: below the trajectory's from step 1 on.
  for (int i = 1; i < 10; ++i)
    EXPECT_LT(b["same_params_grad_rel_per_step"][i].get<double>(), b["grad_rel_per_step"][i].get<double>()) << i;
}

// Without the floor (--bound 1e-300 replaces it in float32), the same-parameter comparison cannot
// hold: at some step a strategy's loss, reduced in another order, differs from the reference's by
// more than twice the float64 drift at the same parameters (as small as ~1e-11 there). The run
// fails naming that comparison, and the strategy's same_params says it failed.
TEST(ConvergeRun, AnImpossibleFloat32BoundFailsTheSameParameterComparisonToo) {
  json j = small();
  j["strategies"] = {"packing"};
  const ConvergeScenario s = load_tmp(j, "fail_f32");
  ConvergeOptions o;
  o.quiet = true;
  o.dtype = "f32";
  o.bound = 1e-300;
  const ConvergeOutcome out = run_small(s, o);
  ASSERT_FALSE(out.pass());
  // Measured at this commit: the gradient at step 2 (blocks.1.norm2.weight, 3.72e-7 against its own
  // bound of 3.39e-7) fails only at the same parameters, judged tensor by tensor.
  bool named = false;
  for (const auto& f : out.failures)
    named = named || (f.rfind("packing step ", 0) == 0 &&
                      f.find(" at the float32 reference's parameters: relative gradient difference ") != std::string::npos &&
                      f.find(" > its bound ") != std::string::npos &&
                      f.find("(2 x that tensor's float64 drift + floor)") != std::string::npos);
  EXPECT_TRUE(named) << "failures: " << out.report["failures"].dump();
  const json& st = out.report["strategies"]["packing"];
  EXPECT_FALSE(st["same_params"]["pass"].get<bool>());
  // Judged tensor by tensor, some step fails whose largest difference is within the loosest
  // tensor's bound: what the worst tensor's bound alone would have passed.
  const json& sp = st["same_params"];
  const json& loosest = out.report["bounds"]["same_params_grad_rel_per_step"];
  bool only_per_tensor = false;
  for (size_t i = 0; i < sp["grad_bound_use"].size(); ++i)
    only_per_tensor = only_per_tensor || (sp["grad_bound_use"][i].get<double>() > 1 &&
                                          sp["grad_rel_diff"][i].get<double>() <= loosest[i].get<double>());
  EXPECT_TRUE(only_per_tensor) << sp.dump();
  EXPECT_GT(sp["max_grad_bound_use"].get<double>(), 1.0);
  EXPECT_FALSE(st["pass"].get<bool>());
  const std::string table = converge_table(out.report);
  const size_t block = table.find("same parameters (");
  ASSERT_NE(block, std::string::npos) << table;
  EXPECT_NE(table.find("FAIL", block), std::string::npos) << table;
}

TEST(ConvergeRun, AnImpossibleBoundFailsNamingStrategyStepAndQuantity) {
  const ConvergeScenario s = load_tmp(small(), "fail");
  ConvergeOptions o;
  o.quiet = true;
  o.bound = 1e-300;  // below any rounding difference
  o.steps = 2;
  const ConvergeOutcome out = run_small(s, o);
  ASSERT_FALSE(out.pass());
  bool named = false;
  for (const auto& f : out.failures)
    named = named || (f.rfind("packing step ", 0) == 0 && f.find("relative gradient difference") != std::string::npos &&
                      f.find("> bound") != std::string::npos);
  EXPECT_TRUE(named) << "failures: " << out.report["failures"].dump();
  EXPECT_FALSE(out.report["pass"].get<bool>());
  EXPECT_NE(converge_table(out.report).find("FAIL"), std::string::npos);
}

// nvidia-prototype returns megatron-dev's plan where its search holds no m (deviation 7 of
// sched/nvidia_prototype.h): the report names those steps (planner_notes), they train exactly as
// megatron-dev's (bitwise), and a batch it can plan is not among them.
TEST(ConvergeRun, PlannerNotesNameTheStepsWherePrototypeFellBack) {
  json j = small();
  j["strategies"] = {"megatron-dev", "nvidia-prototype"};
  // Three samples for four slots' buckets: the prototype raises, the port falls back. Twelve
  // short ones: it plans them itself.
  j["edge_cases"] = json::array({json{{"name", "three"}, {"lengths", {60, 3, 3}}},
                                 json{{"name", "twelve"}, {"lengths", {5, 6, 7, 8, 9, 10, 5, 6, 7, 8, 9, 10}}}});
  const ConvergeScenario s = load_tmp(j, "notes");
  ConvergeOptions o;
  o.quiet = true;
  const ConvergeOutcome out = run_small(s, o);
  EXPECT_TRUE(out.pass()) << out.report["failures"].dump();
  const json& proto = out.report["strategies"]["nvidia-prototype"];
  const json& dev = out.report["strategies"]["megatron-dev"];
  ASSERT_TRUE(proto.contains("planner_notes")) << proto.dump();
  std::set<int> noted;
  for (const json& n : proto["planner_notes"]) {
    EXPECT_NE(n["note"].get<std::string>().find("megatron-dev's plan used (deviation 7)"), std::string::npos);
    for (int step : n["steps"]) noted.insert(step);
  }
  // The three main steps (6 documents for 4 slots' buckets in each micro-batch) and 'three' fall
  // back; 'twelve' (step 4) is the prototype's own plan.
  EXPECT_EQ(noted, (std::set<int>{0, 1, 2, 3}));
  for (int step : noted) EXPECT_EQ(proto["grad_hashes"][step], dev["grad_hashes"][step]) << "step " << step;
  EXPECT_NE(proto["grad_hashes"][4], dev["grad_hashes"][4]);
  EXPECT_FALSE(dev.contains("planner_notes"));
  EXPECT_NE(converge_table(out.report).find("planner note: nvidia-prototype, " + std::to_string(noted.size()) + " of 5 steps"),
            std::string::npos)
      << converge_table(out.report);
}

// The gradient is compared tensor by tensor: a tensor whose gradients are 1e-7 of the largest
// one's (Mamba's A_log, dt_bias beside the embedding) may not be wholly wrong and pass, as it did
// over the flat buffer (max |g - g_ref| / max |g_ref| = 1e-7 there, under the float32 floor).
TEST(ConvergeCompare, AWrongSmallTensorIsSeenTensorByTensor) {
  std::vector<model::ParamInfo> tensors(3);
  tensors[0] = {"embedding", {5}, 0, 5, {}};
  tensors[1] = {"mamba.A_log", {3}, 5, 3, {}};
  tensors[2] = {"empty_grad", {2}, 8, 2, {}};
  const std::vector<double> ref = {1.0, -0.5, 0.25, 0.75, -1.0, 1e-7, -2e-7, 3e-8, 0.0, 0.0};
  std::vector<float> got(ref.begin(), ref.end());
  TensorDiff d = tensor_rel_diff<float>(got, ref, tensors);
  EXPECT_LT(d.rel, 1e-6);
  got[6] = 0;  // A_log's largest gradient lost
  d = tensor_rel_diff<float>(got, ref, tensors);
  EXPECT_EQ(d.tensor, 1);
  EXPECT_NEAR(d.rel, 1.0, 1e-6);
  const attn::Comparison flat = attn::compare_to_ref<float>(ref, got, 0);
  EXPECT_LT(flat.rel_err, kConvergeFloorF32) << "the flat measure cannot see it";
  got[6] = static_cast<float>(ref[6]);
  got[9] = 1e-3f;  // a tensor whose reference gradient is all zero: the absolute difference
  d = tensor_rel_diff<float>(got, ref, tensors);
  EXPECT_EQ(d.tensor, 2);
  EXPECT_NEAR(d.rel, 1e-3, 1e-9);
  got[9] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isinf(tensor_rel_diff<float>(got, ref, tensors).rel));
  const std::vector<float> short_got(4, 0.0f);
  EXPECT_THROW(tensor_rel_diff<float>(short_got, ref, tensors), Error);
}

// A reference whose loss, MTP loss or gradient is not finite at some step is found at that step,
// naming which: run_converge fails the run there (with an inf float32 drift that step's bounds
// would be inf, and two equal infinities compare equal, so a strategy failing alike passed).
TEST(ConvergeCompare, TheFirstNonFiniteReferenceStepIsFound) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const std::vector<std::vector<double>> grads = {{1.0, 2.0}, {0.5, -0.5}, {0.25, 0.0}};
  NonFiniteStep none = first_nonfinite_step({3.0, 2.5, 2.0}, {3.1, 2.6, 2.1}, grads);
  EXPECT_EQ(none.step, -1);
  NonFiniteStep l = first_nonfinite_step({3.0, 2.5, nan}, {3.1, 2.6, 2.1}, grads);
  EXPECT_EQ(l.step, 2);
  EXPECT_EQ(l.what, "loss");
  NonFiniteStep m = first_nonfinite_step({3.0, 2.5, 2.0}, {3.1, -inf, 2.1}, grads);
  EXPECT_EQ(m.step, 1);
  EXPECT_EQ(m.what, "MTP loss");
  auto bad = grads;
  bad[0][1] = inf;  // one element of step 0's gradient
  NonFiniteStep g = first_nonfinite_step({3.0, 2.5, nan}, {3.1, 2.6, 2.1}, bad);
  EXPECT_EQ(g.step, 0) << "the first step, whichever quantity";
  EXPECT_EQ(g.what, "gradient");
  // The converge runs above pass: a finite reference is not flagged there (no "not finite").
}

// A reference that cannot train (learning rate 0: its loss moves only with the batches, well under
// 10%) fails the loss-drop check; a run shorter than the scenario says so in the same line, a run
// of the scenario's length does not.
TEST(ConvergeRun, AReferenceThatDoesNotTrainFailsAndAShortRunSaysItMayBeTooShort) {
  json j = small();
  j["training"]["lr"] = 0.0;
  const ConvergeScenario s = load_tmp(j, "lr0");
  for (const int steps : {2, 3}) {
    SCOPED_TRACE(steps);
    ConvergeOptions o;
    o.quiet = true;
    o.steps = steps;
    const ConvergeOutcome out = run_small(s, o);
    ASSERT_FALSE(out.pass());
    std::string drop;
    for (const auto& f : out.failures)
      if (f.rfind("reference step " + std::to_string(steps - 1) + " (main): loss fell by ", 0) == 0) drop = f;
    ASSERT_FALSE(drop.empty()) << "failures: " << out.report["failures"].dump();
    EXPECT_NE(drop.find("less than the 10% required"), std::string::npos) << drop;
    const bool short_note = drop.find("a run of 2 of the scenario's 3 steps may be too short") != std::string::npos;
    EXPECT_EQ(short_note, steps == 2) << drop;
  }
}

// A strategy that cannot plan under the scenario's config is a scenario error (InputError, exit 2)
// before anything trains, naming the strategy; it used to train the reference first and then
// report the strategy as FAILED (exit 1, "a bound is broken").
TEST(ConvergeRun, AStrategyThatCannotPlanTheScenarioIsAnInputErrorBeforeTraining) {
  json j = small();
  j["model"]["mixers"] = {"attention"};
  j["pool"] = {{"dp", 1}, {"cp", 3}};  // bshd needs max_seqlen 64 to be a multiple of 2 x cp = 6
  j["training"]["max_seqlen_per_rank"] = 32;
  j["strategies"] = {"packing", "bshd", "dcp"};
  const ConvergeScenario s = load_tmp(j, "cannot-plan");
  try {
    check_strategies_plan(s);
    FAIL() << "no error";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("strategy \"bshd\" cannot plan the first step"), std::string::npos) << msg;
    EXPECT_NE(msg.find("2 x cp"), std::string::npos) << msg;
  }
}

TEST(ConvergeReport, SchemaCheckRejectsBrokenReports) {
  json r = {{"schema", "dcpbench.converge.v1"}, {"context", json::object()}, {"dtype", "f64"}, {"steps", 2},
            {"bounds", {{"loss_rel", 1e-12}, {"loss_rel_per_step", {1e-12, 1e-12}}, {"why", "float64"}}},
            {"step_kinds", {"main", "edge:one"}}, {"strategy_order", {"reference", "dcp"}},
            {"strategies",
             {{"reference", {{"losses", {1.0, 0.9}}}},
              {"dcp",
               {{"losses", {1.0, nullptr}}, {"dloss_rel", {0.0, nullptr}}, {"grad_rel_diff", {0.0, 1e-15}},
                {"max_abs_dloss", 0.0}, {"max_rel_grad_diff", 1e-15}, {"bitwise_repeat", true}, {"bound", 1e-12},
                {"pass", false}}}}}};
  EXPECT_NO_THROW(validate_converge_report(r, "r"));
  // Each broken field is refused with its name (what plot_converge.py would have crashed on or
  // drawn wrong, helper-20).
  const auto refused = [&](const std::function<void(json&)>& mutate, const std::string& says) {
    json bad = r;
    mutate(bad);
    try {
      validate_converge_report(bad, "r");
      ADD_FAILURE() << "accepted; expected: " << says;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  refused([](json& b) { b["strategies"]["reference"]["losses"] = {1.0}; }, "\"losses\" array of 2");
  refused([](json& b) { b["strategies"]["dcp"].erase("pass"); }, "has no \"pass\"");
  refused([](json& b) { b["schema"] = "dcpbench.results.v1"; }, "\"schema\"");
  refused([](json& b) { b.erase("bounds"); }, "no \"bounds\" object");
  refused([](json& b) { b["bounds"]["loss_rel"] = "x"; }, "\"bounds.loss_rel\" is not a number");
  refused([](json& b) { b["bounds"]["floor"] = "1e-5"; }, "\"bounds.floor\" is not a number");
  // A key this project does not write is ignored, whatever its type (DESIGN.md: readers ignore
  // unknown fields; a string one had been refused).
  EXPECT_NO_THROW(validate_converge_report(
      [&] {
        json b = r;
        b["bounds"]["added_later"] = {{"note", "x"}};
        return b;
      }(),
      "r"));
  refused([](json& b) { b["bounds"]["loss_rel_per_step"] = {1e-12}; }, "\"bounds.loss_rel_per_step\" is not an array of 2");
  refused([](json& b) { b["step_kinds"] = 5; }, "\"step_kinds\" is not an array of 2 strings");
  refused([](json& b) { b["step_kinds"] = {"main", 1}; }, "\"step_kinds\" is not an array of 2 strings");
  refused([](json& b) { b["edge_case_start"] = "after_main_steps"; },
          "\"edge_case_start\" is \"after_main_steps\", not \"initial_model\"");
  refused([](json& b) { b["strategy_order"] = {"reference", "foo"}; }, "\"strategy_order\" names \"foo\"");
  refused([](json& b) { b["strategies"]["dcp"].erase("dloss_rel"); }, "has no \"dloss_rel\"");
  refused([](json& b) { b["strategies"]["dcp"]["grad_rel_diff"] = {"x", 0.0}; }, "has no \"grad_rel_diff\"");
  refused([](json& b) { b["strategies"]["dcp"]["dloss_rel"] = {true, 0.0}; }, "has no \"dloss_rel\"");
  refused([](json& b) { b["pool"] = "x"; }, "\"pool\" is not an object");
  // float32's same-parameter run (strategies.*.same_params): optional, checked when present.
  const json same = {{"losses", {1.0, 0.9}}, {"dloss_rel", {0.0, 1e-7}}, {"grad_rel_diff", {1e-6, 2e-6}},
                     {"max_rel_grad_diff", 2e-6}};
  EXPECT_NO_THROW(validate_converge_report(
      [&] {
        json b = r;
        b["strategies"]["dcp"]["same_params"] = same;
        b["strategies"]["reference"]["same_params"] = {{"losses", {1.0, 0.9}}};
        b["bounds"]["same_params_grad_rel"] = 1e-5;
        return b;
      }(),
      "r"));
  refused(
      [&](json& b) {
        b["strategies"]["dcp"]["same_params"] = same;
        b["strategies"]["dcp"]["same_params"].erase("grad_rel_diff");
      },
      "has a \"same_params\" that is not");
  refused(
      [&](json& b) {
        b["strategies"]["dcp"]["same_params"] = same;
        b["strategies"]["dcp"]["same_params"]["losses"] = {1.0};
      },
      "has a \"same_params\" that is not");
  refused([](json& b) { b["strategies"]["reference"]["same_params"] = json::array(); }, "has a \"same_params\" that is not");
  refused(
      [&](json& b) {
        b["strategies"]["dcp"]["same_params"] = same;
        b["strategies"]["dcp"]["same_params"]["grad_bound_use"] = {0.5, "x"};  // plot_converge.py would crash
      },
      "has a \"same_params\" that is not");
  refused(
      [&](json& b) {
        b["strategies"]["dcp"]["same_params"] = same;
        b["strategies"]["dcp"]["same_params"]["pass"] = "yes";
      },
      "has a \"same_params\" that is not");
  refused([](json& b) { b["bounds"]["same_params_grad_rel"] = "x"; }, "\"bounds.same_params_grad_rel\" is not a number");
  refused([](json& b) { b["bounds"]["same_params_grad_rel_per_step"] = {1e-5}; },
          "\"bounds.same_params_grad_rel_per_step\" is not an array of 2");
  EXPECT_NO_THROW(validate_converge_report(
      [&] {
        json b = r;
        b["strategies"]["dcp"]["planner_notes"] = {{{"note", "n"}, {"steps", {0, 1}}}};
        return b;
      }(),
      "r"));
  refused([](json& b) { b["strategies"]["dcp"]["planner_notes"] = {{{"note", "n"}, {"steps", {1, 0}}}}; },
          "has a \"planner_notes\" that is not");
  refused([](json& b) { b["strategies"]["dcp"]["planner_notes"] = {{{"note", "n"}, {"steps", {2}}}}; },
          "increasing step indices below 2");
  refused([](json& b) { b["strategies"]["dcp"]["planner_notes"] = {{{"steps", {0}}}}; },
          "has a \"planner_notes\" that is not");
}

}  // namespace
}  // namespace dcp::harness
