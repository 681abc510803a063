// Regression gate: pass within tolerance, fail on a drop beyond it, on a plan that became
// invalid, on a (scenario, strategy) missing from the current results, and step by step on what
// an average hides (other steps or batches, a changed plan, out of memory in one step).
#include "core/error.h"
#include "harness/gate.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace dcp::harness {
namespace {

ResultRow row(const std::string& scenario, const std::string& strategy, double tflops, bool valid = true) {
  ResultRow r;
  r.scenario = scenario;
  r.strategy = strategy;
  r.plan_valid = valid;
  r.source = "simulated:dcp-cost-v1@h100-sxm-public";
  r.step_time_s = 1.0;
  r.tflops_per_gpu = tflops;
  if (!valid) r.error = "invalid plan: rank 3 is empty in micro-batch 2";
  return r;
}

ResultsFile results(std::vector<ResultRow> rows) {
  ResultsFile f;
  f.rows = std::move(rows);
  return f;
}

const GateFinding& find(const GateReport& r, const std::string& strategy) {
  for (const auto& f : r.findings)
    if (f.strategy == strategy) return f;
  throw std::runtime_error("no finding for " + strategy);
}

TEST(Gate, PassesWithinTolerance) {
  const auto base = results({row("a", "packing", 100), row("a", "megatron-dev", 150)});
  const auto cur = results({row("a", "packing", 98.5), row("a", "megatron-dev", 151)});
  const GateReport r = run_gate(base, cur, 0.02);
  EXPECT_TRUE(r.passed());
  EXPECT_EQ(r.findings.size(), 2u);
}

TEST(Gate, FailsOnDropBeyondToleranceNamingThePair) {
  const auto base = results({row("a", "packing", 100), row("a", "megatron-dev", 150), row("b", "packing", 80)});
  const auto cur = results({row("a", "packing", 100), row("a", "megatron-dev", 140), row("b", "packing", 70)});
  const GateReport r = run_gate(base, cur, 0.02);
  EXPECT_FALSE(r.passed());
  EXPECT_FALSE(find(r, "packing").failed);
  const GateFinding& f = find(r, "megatron-dev");
  EXPECT_TRUE(f.failed);
  EXPECT_EQ(f.scenario, "a");
  EXPECT_NE(f.message.find("150.00 -> 140.00"), std::string::npos) << f.message;
  int failed = 0;
  for (const auto& x : r.findings) failed += x.failed;
  EXPECT_EQ(failed, 2);  // a/megatron-dev and b/packing
}

TEST(Gate, ToleranceIsRelative) {
  const auto base = results({row("a", "packing", 100)});
  EXPECT_TRUE(run_gate(base, results({row("a", "packing", 90.5)}), 0.10).passed());
  EXPECT_FALSE(run_gate(base, results({row("a", "packing", 89.5)}), 0.10).passed());
}

TEST(Gate, FailsWhenPlanBecomesInvalid) {
  const auto base = results({row("a", "megatron-dev", 150)});
  const auto cur = results({row("a", "megatron-dev", 0, false)});
  const GateReport r = run_gate(base, cur, 0.02);
  EXPECT_FALSE(r.passed());
  EXPECT_NE(find(r, "megatron-dev").message.find("plan invalid"), std::string::npos);
  EXPECT_NE(find(r, "megatron-dev").message.find("rank 3 is empty"), std::string::npos);
}

// A pair that had no numbers in the baseline and has now fails like a gain beyond the tolerance
// (a memory or validity rule the simulator lost looks like that), saying why it had none.
TEST(Gate, FailsWhereTheBaselineHadNoNumbersAndSaysWhy) {
  auto oom = row("a", "dcp", 0);
  oom.oom = true;
  oom.peak_memory_gib = 97.5;
  const auto cur = results({row("a", "dcp", 120), row("a", "packing", 100)});
  const GateReport r = run_gate(results({oom, row("a", "packing", 0, false)}), cur, 0.02);
  EXPECT_FALSE(r.passed());
  EXPECT_TRUE(find(r, "dcp").failed);
  EXPECT_NE(find(r, "dcp").message.find("step 0: fits now (the baseline was out of memory, peak 97.50"),
            std::string::npos)
      << find(r, "dcp").message;
  EXPECT_NE(find(r, "dcp").message.find("ci/gate.sh --update"), std::string::npos);
  EXPECT_NE(find(r, "packing").message.find("valid now (the baseline's plan was invalid)"), std::string::npos)
      << find(r, "packing").message;
  // Out of memory in both: passes, saying so.
  EXPECT_TRUE(run_gate(results({oom}), results({oom}), 0.02).passed());
  EXPECT_NE(run_gate(results({oom}), results({oom}), 0.02).findings.at(0).message.find("out of memory in 1/1 steps (as in the baseline)"),
            std::string::npos);
}

// Out of memory in one step of several where the baseline fit in it fails, whether or not the
// baseline was out of memory in another step (helper-33: a baseline oom in step 1 let step 0 halve).
TEST(Gate, ComparesStepsOfAPairOutOfMemoryInSomeSteps) {
  auto s0 = row("a", "dcp", 100);
  auto s1 = row("a", "dcp", 0);
  s1.step = 1;
  s1.oom = true;
  const auto base = results({s0, s1});
  EXPECT_TRUE(run_gate(base, base, 0.02).passed());
  auto half = s0;
  half.tflops_per_gpu = 50;
  const GateReport slower = run_gate(base, results({half, s1}), 0.02);
  EXPECT_FALSE(slower.passed());
  EXPECT_NE(slower.findings.at(0).message.find("step 0: TFLOPS/GPU dropped 100.00 -> 50.00"), std::string::npos)
      << slower.findings.at(0).message;
  auto s0_oom = s0;
  s0_oom.oom = true;
  const GateReport oom = run_gate(base, results({s0_oom, s1}), 0.02);
  EXPECT_FALSE(oom.passed());
  EXPECT_NE(oom.findings.at(0).message.find("step 0: out of memory"), std::string::npos) << oom.findings.at(0).message;
  // No new baseline is the remedy for a step that no longer fits (helper-76).
  EXPECT_EQ(oom.findings.at(0).message.find("new baseline"), std::string::npos) << oom.findings.at(0).message;
}

// What an average hides: one step slower and one faster, renumbered steps, another batch, a plan
// with more micro-batches, another tuned setting; and a result that is not a finite number.
TEST(Gate, ComparesEveryStepNotOnlyTheAverage) {
  auto s0 = row("a", "dcp", 100);
  s0.microbatches = 8;
  s0.tokens = 1000;
  s0.samples = 10;
  s0.useful_tflop = 5.0;
  auto s1 = s0;
  s1.step = 1;
  const auto base = results({s0, s1});
  ASSERT_TRUE(run_gate(base, base, 0.02).passed());
  const auto fails_with = [&](const ResultsFile& cur, const std::string& text) {
    const GateReport r = run_gate(base, cur, 0.02);
    EXPECT_FALSE(r.passed()) << text;
    EXPECT_NE(r.findings.at(0).message.find(text), std::string::npos) << r.findings.at(0).message;
  };
  auto slow = s0, fast = s1;
  slow.tflops_per_gpu = 97;
  fast.tflops_per_gpu = 103;
  fails_with(results({slow, fast}), "step 0: TFLOPS/GPU dropped 100.00 -> 97.00");
  auto r5 = s0, r6 = s1;
  r5.step = 5;
  r6.step = 6;
  fails_with(results({r5, r6}), "ran steps [5, 6], the baseline [0, 1]");
  auto other_batch = s1;
  other_batch.tokens = 2000;
  fails_with(results({s0, other_batch}), "not comparable: step 1: the batch differs (10 samples, 1000 tokens -> 10 "
                                         "samples, 2000 tokens");
  auto flops = s1;
  flops.useful_tflop = 10.0;
  fails_with(results({s0, flops}), "step 1: the batch differs");
  auto more = s0;
  more.microbatches = 11;
  fails_with(results({more, s1}), "step 0: the plan changed (8 -> 11 micro-batches)");
  auto knob = s0;
  knob.knobs = {{"max_seqlen_per_rank", 4096}};
  fails_with(results({knob, s1}), "step 0: the setting changed");
  // A new plan moves the peak memory and the rate with it: every reason of the first failing step,
  // the plan's first, how many steps fail, and no claim that the memory model changed (helper-75's
  // trial: 21 -> 23 micro-batches read as "the memory model changed" alone).
  auto p0 = s0, p1 = s1;
  s0.peak_memory_gib = s1.peak_memory_gib = 26.82;
  const auto base_mem = results({s0, s1});
  p0.microbatches = 10;
  p0.peak_memory_gib = 26.77;
  p0.tflops_per_gpu = 98.5;
  p1.peak_memory_gib = 26.82;
  p1.tflops_per_gpu = 97;
  const GateReport replanned = run_gate(base_mem, results({p0, p1}), GateTolerance{});
  ASSERT_FALSE(replanned.passed());
  EXPECT_EQ(replanned.findings.at(0).message,
            "step 0: the plan changed (8 -> 10 micro-batches); peak memory 26.82 -> 26.77 GiB/GPU (tolerance "
            "1e-07%), with the plan; TFLOPS/GPU dropped 100.00 -> 98.50 (-1.50%, tolerance -1e-07%) (2 of 2 steps "
            "differ); if the change is meant, write a new baseline (dcpbench's own suite: ci/gate.sh --update, "
            "saying why in the commit)");
  // The same plan size with another peak: the memory model or a plan of the same size.
  p0 = s0;
  p0.peak_memory_gib = 30;
  const GateReport memory = run_gate(base_mem, results({p0, s1}), 0.02);
  ASSERT_FALSE(memory.passed());
  EXPECT_NE(memory.findings.at(0).message.find("step 0: peak memory 26.82 -> 30.00 GiB/GPU (tolerance 2%): the memory "
                                               "model or the plan changed; if"),
            std::string::npos)
      << memory.findings.at(0).message;
  s0.peak_memory_gib = s1.peak_memory_gib = 0;
  auto inf = s1;
  inf.tflops_per_gpu = std::numeric_limits<double>::infinity();
  fails_with(results({s0, inf}), "is not a finite number");
  // Within the tolerance in every step: passes, with the range of the steps in the message.
  auto a = s0, b = s1;
  a.tflops_per_gpu = 99;
  b.tflops_per_gpu = 101.5;
  const GateReport ok = run_gate(base, results({a, b}), 0.02);
  EXPECT_TRUE(ok.passed());
  EXPECT_NE(ok.findings.at(0).message.find("steps -1.00% to +1.50%"), std::string::npos) << ok.findings.at(0).message;
}

// A gate that compared nothing passed (two empty files: "passed (0 pairs)").
TEST(Gate, FailsOnAnEmptyBaseline) {
  const GateReport r = run_gate(results({}), results({}), 0.02);
  EXPECT_FALSE(r.passed());
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_NE(r.findings[0].message.find("the baseline has no rows"), std::string::npos);
  // Printed without an empty pair (it was "FAIL   / : the baseline ..."); a pair's line names it.
  EXPECT_EQ(finding_line(r.findings[0]),
            "  FAIL  the baseline has no rows: it gates nothing (dcpbench's own suite: create it with ci/gate.sh --update)");
  EXPECT_EQ(finding_line({"a", "dcp", false, "steps +0.00%"}), "  ok    a / dcp: steps +0.00%");
}

// The current file must record the scenario's settings when the baseline does: without them a
// changed configuration could not be told apart from a regression.
TEST(Gate, FailsWhenTheCurrentFileLacksTheScenarioFacts) {
  auto base = results({row("a", "packing", 100)});
  base.scenarios = nlohmann::json::array({{{"name", "a"}, {"global_batch", 64}}});
  const GateReport r = run_gate(base, results({row("a", "packing", 100)}), 0.02);
  EXPECT_FALSE(r.passed());
  EXPECT_NE(r.findings.at(0).message.find("does not record the scenario's settings"), std::string::npos);
}

// A baseline of another configuration is not compared (a global batch of 1 read as a 97% drop);
// notes and other descriptive facts may change.
TEST(Gate, FailsWhenTheScenarioChanged) {
  auto base = results({row("a", "packing", 100)});
  auto cur = results({row("a", "packing", 100)});
  base.scenarios = nlohmann::json::array({{{"name", "a"}, {"global_batch", 64}, {"notes", {"x"}}}});
  cur.scenarios = nlohmann::json::array({{{"name", "a"}, {"global_batch", 64}, {"notes", {"y"}}}});
  EXPECT_TRUE(run_gate(base, cur, 0.02).passed());
  cur.scenarios[0]["global_batch"] = 1;
  const GateReport r = run_gate(base, cur, 0.02);
  EXPECT_FALSE(r.passed());
  EXPECT_NE(find(r, "packing").message.find("the scenario changed (global_batch 64 -> 1)"), std::string::npos)
      << find(r, "packing").message;
}

// The same two steps in both files, so it is the invalid step that fails (with a one-step baseline
// the step count failed first, and the test passed without the invalid-plan check).
TEST(Gate, FailsWhenOneStepOfManyIsInvalid) {
  auto good = row("a", "packing", 100);
  auto good1 = good;
  good1.step = 1;
  auto bad = row("a", "packing", 0, false);
  bad.step = 1;
  const GateReport r = run_gate(results({good, good1}), results({good, bad}), 0.02);
  EXPECT_FALSE(r.passed());
  EXPECT_NE(r.findings.at(0).message.find("plan invalid in 1/2 steps"), std::string::npos) << r.findings.at(0).message;
}

// A pair in one file only fails either way: missing now, or not in the baseline (an empty or
// partial baseline gated nothing for it until 2026-11-28).
TEST(Gate, FailsWhenMissingAndWhenNotInTheBaseline) {
  const auto base = results({row("a", "packing", 100)});
  const auto cur = results({row("a", "dcp", 200)});
  const GateReport r = run_gate(base, cur, 0.02);
  EXPECT_FALSE(r.passed());
  EXPECT_TRUE(find(r, "packing").failed);
  EXPECT_TRUE(find(r, "dcp").failed);
  EXPECT_NE(find(r, "dcp").message.find("not in the baseline"), std::string::npos);
  EXPECT_FALSE(run_gate(results({}), cur, 0.02).passed());
}

// A gain beyond the tolerance fails (a lost cost term looks like one; a meant gain regenerates
// the baseline); NaN fails; a simulated plan efficiency above 1 fails (a broken lower bound).
TEST(Gate, FailsOnAGainBeyondToleranceNaNAndEfficiencyAboveOne) {
  const auto base = results({row("a", "packing", 100)});
  EXPECT_TRUE(run_gate(base, results({row("a", "packing", 101.9)}), 0.02).passed());
  const GateReport up = run_gate(base, results({row("a", "packing", 102.1)}), 0.02);
  EXPECT_FALSE(up.passed());
  EXPECT_NE(up.findings.at(0).message.find("rose"), std::string::npos) << up.findings.at(0).message;
  EXPECT_NE(up.findings.at(0).message.find("ci/gate.sh --update"), std::string::npos);
  ResultRow nan_row = row("a", "packing", 100);
  nan_row.tflops_per_gpu = std::nan("");
  ResultsFile nan_file = results({nan_row});
  EXPECT_FALSE(run_gate(base, nan_file, 0.02).passed());
  ResultRow eff = row("a", "packing", 100);
  eff.plan_efficiency = 1.0 + 1e-12;  // rounding on a plan that meets the bound: passes
  EXPECT_TRUE(run_gate(base, results({eff}), 0.02).passed());
  eff.plan_efficiency = 1.03;
  const GateReport e = run_gate(base, results({eff}), 0.02);
  EXPECT_FALSE(e.passed());
  EXPECT_NE(e.findings.at(0).message.find("above 1"), std::string::npos) << e.findings.at(0).message;
  // One step above 1 beside one well below: their mean is under 1, the gate still fails.
  ResultRow low = row("a", "packing", 100);
  low.plan_efficiency = 0.90;
  low.step = 1;
  ResultRow base1 = row("a", "packing", 100);
  base1.step = 1;
  const GateReport two = run_gate(results({row("a", "packing", 100), base1}), results({eff, low}), 0.02);
  EXPECT_FALSE(two.passed());
  EXPECT_NE(two.findings.at(0).message.find("1.03 in a step"), std::string::npos) << two.findings.at(0).message;
}

TEST(Gate, RejectsBadTolerance) {
  EXPECT_THROW(run_gate(results({}), results({}), 1.5), InputError);
  EXPECT_THROW(run_gate(results({}), results({}), -0.1), InputError);
  EXPECT_THROW(run_gate(results({}), results({}), 1.0), InputError);
  EXPECT_THROW(run_gate(results({}), results({}), std::nan("")), InputError);  // would pass every step
  EXPECT_THROW(run_gate(results({}), results({}), GateTolerance{0.02, 1.0}), InputError);
  EXPECT_THROW(run_gate(results({}), results({}), GateTolerance{std::nan(""), 1e-9}), InputError);
}

// Under the default tolerances a simulated step is held to rounding (its numbers are
// deterministic): a 1e-6 change of TFLOPS/GPU or of peak memory fails, naming the change, where
// the 2% the kinds shared let it pass; a measured step keeps 2% for run-to-run noise.
TEST(Gate, SimulatedStepsAreHeldToRoundingMeasuredOnesTo2Percent) {
  ResultRow b = row("a", "packing", 100);
  b.peak_memory_gib = 40;
  ResultRow c = b;
  c.tflops_per_gpu = 100 * (1 - 1e-6);
  const GateReport slower = run_gate(results({b}), results({c}), GateTolerance{});
  EXPECT_FALSE(slower.passed());
  EXPECT_NE(slower.findings.at(0).message.find("dropped 100.00 -> 100.00 (-1.0e-04%, tolerance -1e-07%)"),
            std::string::npos)
      << slower.findings.at(0).message;
  EXPECT_TRUE(run_gate(results({b}), results({c}), 0.02).passed()) << "one tolerance of 2% for both: passes";
  c.tflops_per_gpu = 100 * (1 + 1e-12);  // rounding
  EXPECT_TRUE(run_gate(results({b}), results({c}), GateTolerance{}).passed());
  c.peak_memory_gib = 40 * (1 + 1e-6);
  const GateReport memory = run_gate(results({b}), results({c}), GateTolerance{});
  EXPECT_FALSE(memory.passed());
  EXPECT_NE(memory.findings.at(0).message.find("peak memory 40.00 -> 40.00 GiB/GPU"), std::string::npos)
      << memory.findings.at(0).message;
  // A row without peak memory (an optional key: it reads 0) is not compared on it.
  ResultRow none = b;
  none.peak_memory_gib = 0;
  EXPECT_TRUE(run_gate(results({none}), results({b}), GateTolerance{}).passed());
  // Steps out of memory in both files are compared on it too.
  ResultRow ob = row("a", "packing", 0, false), oc = ob;
  ob.error.clear();
  ob.oom = oc.oom = true;
  ob.plan_valid = oc.plan_valid = true;
  ob.peak_memory_gib = 90;
  oc.peak_memory_gib = 200;
  const GateReport oom = run_gate(results({ob}), results({oc}), GateTolerance{});
  EXPECT_FALSE(oom.passed());
  EXPECT_NE(oom.findings.at(0).message.find("peak memory 90.00 -> 200.00 GiB/GPU"), std::string::npos)
      << oom.findings.at(0).message;
  // Measured rows: 1% passes, 3% fails; their peak memory is not compared.
  ResultRow mb = b, mc = b;
  mb.source = mc.source = "measured:h100 replay";
  mc.tflops_per_gpu = 99;
  mc.peak_memory_gib = 60;
  EXPECT_TRUE(run_gate(results({mb}), results({mc}), GateTolerance{}).passed());
  mc.tflops_per_gpu = 97;
  const GateReport measured = run_gate(results({mb}), results({mc}), GateTolerance{});
  EXPECT_FALSE(measured.passed());
  // A measured step that moved: neither "deterministic" nor ci/gate.sh's simulated baseline applies.
  EXPECT_EQ(measured.findings.at(0).message, "step 0: TFLOPS/GPU dropped 100.00 -> 97.00 (-3.00%, tolerance -2%)");
  // A step measured in one file and simulated in the other is not compared at either tolerance
  // (the pair's kind had been read from its first row only).
  ResultRow m1 = mb, s1 = b;
  m1.step = s1.step = 1;
  const GateReport mixed = run_gate(results({b, m1}), results({b, s1}), GateTolerance{});
  EXPECT_FALSE(mixed.passed());
  EXPECT_NE(mixed.findings.at(0).message.find("not comparable: step 1: measured:h100 replay in the baseline"),
            std::string::npos)
      << mixed.findings.at(0).message;
}

}  // namespace
}  // namespace dcp::harness

namespace dcp::harness {
namespace {

TEST(Gate, FailsWhenTheCurrentRunHasOtherSteps) {
  // Averages over different batches are not comparable, even when the numbers look fine.
  ResultRow s0;
  s0.scenario = "a";
  s0.strategy = "dcp";
  s0.plan_valid = true;
  s0.source = "simulated:dcp-cost-v1@h100-sxm-public";
  s0.step_time_s = 1.0;
  s0.tflops_per_gpu = 100;
  ResultRow s1 = s0;
  s1.step = 1;
  ResultsFile base, cur;
  base.rows = {s0, s1};
  cur.rows = {s0};
  const GateReport r = run_gate(base, cur, 0.02);
  EXPECT_FALSE(r.passed());
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_NE(r.findings[0].message.find("ran steps [0], the baseline [0, 1]"), std::string::npos) << r.findings[0].message;
}

}  // namespace
}  // namespace dcp::harness
