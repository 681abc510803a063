// Aggregation of result rows per (scenario, strategy) and the fixed-width table printed by
// `dcpbench run` (units in a second header row, as nccl-tests does). Reads only ResultsFile, so
// the table of a committed results file can be reprinted without re-running anything.
//
// Aggregates over the steps of one (scenario, strategy):
//   tflops_per_gpu     = sum(tflops_i * t_i) / sum(t_i)   (= total useful FLOPs / total time / GPUs)
//   speedup_vs_packing = sum(t_packing) / sum(t)        over steps where both plans are valid
//   the other metrics are means over valid steps.
// A (scenario, strategy) with any invalid step is reported as invalid with its first error.
#pragma once

#include "harness/results.h"

#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace dcp::harness {

struct Aggregate {
  std::string scenario;
  std::string strategy;
  int steps = 0;
  int invalid_steps = 0;
  std::string first_error;
  std::string source;
  double step_time_s = 0;
  double tflops_per_gpu = 0;
  double tokens_per_s_per_gpu = 0;
  std::optional<double> speedup_vs_packing;
  double microbatches = 0;
  double balance = 0;
  double bubble_frac = 0;
  double comm_frac = 0;
  double plan_efficiency = 0;
  double solve_ms = 0;
  bool valid() const { return invalid_steps == 0 && steps > 0; }
};

// In first-appearance order of scenarios, then strategies.
std::vector<Aggregate> aggregate(const ResultsFile& results);

// Prints the table: one block per scenario, a line saying how the numbers were obtained, and the
// published numbers (from results.scenarios[*].published) beside ours, each with its source.
void print_table(std::ostream& os, const ResultsFile& results);

}  // namespace dcp::harness
