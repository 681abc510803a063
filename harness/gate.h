// Regression gate over two results files (JSON only, never stdout), like nccl-tests'
// NCCL_TESTS_MIN_BW but read from a file. For every (scenario, strategy, setting) of the baseline
// (strategy shown as "name" or "name (tuned)"):
//   * fails if the current file has no rows for it ("missing");
//   * fails if any current step's plan is invalid ("plan invalid: <error>");
//   * fails if it ran out of memory where the baseline fit ("out of memory");
//   * fails if current TFLOPS/GPU < baseline TFLOPS/GPU * (1 - tolerance) (relative drop), or is
//     not a number;
//   * fails if current TFLOPS/GPU > baseline TFLOPS/GPU * (1 + tolerance): a gain that large is
//     either meant (regenerate the baseline and say why) or a cost the simulator lost;
//   * fails if a simulated pair's plan efficiency is above 1 (+1e-9 for rounding): the lower bound
//     is broken.
// (scenario, strategy) pairs that are only in the current file fail too: a partial or stale
// baseline would otherwise gate nothing for them. (Until 2026-11-28 gains, efficiencies above 1
// and new pairs all passed.)
// TFLOPS/GPU is the aggregate of aggregate.h (total useful FLOPs / total time / GPUs).
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

// tolerance: allowed relative drop (and gain), in [0, 1).
GateReport run_gate(const ResultsFile& baseline, const ResultsFile& current, double tolerance);

}  // namespace dcp::harness
