// Regression gate over two results files (JSON only, never stdout), like nccl-tests'
// NCCL_TESTS_MIN_BW but read from a file. For every (scenario, strategy, setting) of the baseline
// (strategy shown as "name" or "name (tuned)"):
//   * fails if the current file has no rows for it ("missing");
//   * fails if the scenario's settings changed, or the current file does not record them while the
//     baseline does ("not comparable");
//   * fails if any current step's plan is invalid ("plan invalid: <error>");
//   * fails if a simulated pair's plan efficiency is above 1 (+1e-9 for rounding): the lower bound
//     is broken;
//   * step by step (the simulated numbers are deterministic, so an average would only hide a
//     change): fails if the steps differ, if a step's batch differs (samples, tokens, useful
//     FLOPs), if a step runs out of memory where the baseline fit, or fits or is valid where the
//     baseline had no numbers, if a step's setting (knobs) or micro-batch count changed, if a
//     step's TFLOPS/GPU is not finite, or below its baseline x (1 - tolerance) (a drop) or above
//     its baseline x (1 + tolerance): a gain or a change that large is either meant (regenerate
//     the baseline and say why) or a cost or rule the simulator lost; a simulated step also fails
//     if its peak memory moved beyond the tolerance (GateTolerance: the simulated rows' own).
// (scenario, strategy) pairs that are only in the current file fail too: a partial or stale
// baseline would otherwise gate nothing for them, and so does a baseline without rows.
// (Until 2026-11-28 gains, efficiencies above 1 and new pairs all passed; until 2026-11-28 (evening) the
// gate compared only the step count and the mean over steps, helper-33.)
// TFLOPS/GPU of the message is the aggregate of aggregate.h (total useful FLOPs / total time / GPUs).
#pragma once

#include "harness/results.h"

#include <string>
#include <vector>

namespace dcp::harness {

struct GateFinding {
  std::string scenario;
  std::string strategy;
  bool failed = false;
  std::string message;  // one line: what changed, with both numbers
};

struct GateReport {
  std::vector<GateFinding> findings;  // one per (scenario, strategy) in baseline or current
  bool passed() const {
    for (const auto& f : findings)
      if (f.failed) return false;
    return true;
  }
};

inline constexpr double kGateMaxPlanEfficiency = 1.0 + 1e-9;

// The report's line of one finding: "  FAIL  scenario / strategy: message", or without the pair for
// a finding about a whole file (an empty baseline), which had printed "FAIL   / : ..." (stop 44).
std::string finding_line(const GateFinding& f);

// Allowed relative change of a step's TFLOPS/GPU (down or up), each in [0, 1). Simulated rows are
// deterministic (the same sources give the same numbers to the bit: the gate's pairs have stayed at
// +0.00% across fresh clones), so any change beyond rounding is a change of the model or a planner
// that needs a new baseline and a commit saying why; under the 2% that both kinds shared until
// 2026-12-07 a planner or cost change of 1-2% passed unseen (helper-61's review). Measured rows
// keep 2% for run-to-run noise. Simulated steps' peak memory is held to the simulated tolerance too
// (only a change into or out of memory had been seen).
struct GateTolerance {
  double measured = 0.02;
  double simulated = 1e-9;
};
GateReport run_gate(const ResultsFile& baseline, const ResultsFile& current, GateTolerance tolerance);
// The same tolerance for both kinds of rows (tests, the fuzzer).
inline GateReport run_gate(const ResultsFile& baseline, const ResultsFile& current, double tolerance) {
  return run_gate(baseline, current, GateTolerance{tolerance, tolerance});
}
// "2%", "0.015%" or, below 0.01%, "1e-07%".
std::string tolerance_pct(double tolerance);

}  // namespace dcp::harness
