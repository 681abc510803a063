// Aggregation of result rows per (scenario, strategy, setting): computed once, in C++, written into
// the results file ("aggregates") and read by the table, the gate and the charts.
//
// Over the steps of one (scenario, strategy, setting):
//   tflops_per_gpu       = sum(tflops_i * t_i) / sum(t_i)   (= total useful FLOPs / total time / GPUs)
//   speedup_vs_reference = sum(t_reference) / sum(t)       when both have numbers on every step
//                          (else none); the reference is the row's "reference" strategy (scenario
//                          field reference_strategy, default packing) in the same setting
//   trimmed_step_time_s  = the 10%-trimmed mean of the step times, computed as Megatron's
//                          examples/dynamic_context_parallel/benchmark_dcp.sh:190-197 does (sort,
//                          drop int(0.1 n) from each end), and trimmed_speedup_vs_reference its
//                          ratio, for comparisons with numbers measured that way
//   bubble_frac          = mean bubble_s / mean step_time_s, comm_frac = mean comm_s / mean
//                          step_time_s, plan_efficiency = mean lower_bound_s / mean step_time_s:
//                          fractions of the mean step, so they agree with the seconds beside
//                          them and efficiency + busiest idle + busy above the bound = 1
//   balance and the other metrics are means over the valid steps (balance is max / mean rank
//                          busy time of each step; the rows keep no per-rank sums for a ratio).
// A (scenario, strategy, setting) with any invalid step is reported as invalid with its first
// error; one with any step out of memory is reported as oom.
#pragma once

#include "harness/results.h"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace dcp::harness {

// How a (strategy, setting) pair is named in tables and the gate: "name", or "name (tuned)".
inline std::string strategy_label(const std::string& strategy, const std::string& setting) {
  return setting == "published" ? strategy : strategy + " (" + setting + ")";
}

struct Aggregate {
  std::string scenario;
  std::string strategy;
  std::string setting = "published";
  std::string reference = "packing";
  int steps = 0;
  int invalid_steps = 0;
  int oom_steps = 0;
  std::string first_error;
  std::string source;
  double step_time_s = 0;
  double tflops_per_gpu = 0;
  double tokens_per_s_per_gpu = 0;
  std::optional<double> speedup_vs_reference;
  double trimmed_step_time_s = 0;
  std::optional<double> trimmed_speedup_vs_reference;
  double microbatches = 0;
  double balance = 0;
  double bubble_frac = 0;
  double comm_frac = 0;
  double plan_efficiency = 0;
  double solve_ms = 0;
  double compute_s = 0;
  double comm_s = 0;
  double overhead_s = 0;
  double bubble_s = 0;
  double imbalance_s = 0;
  double lower_bound_s = 0;   // mean over steps; these two are not written to the file's
  double busiest_idle_s = 0;  // "aggregates" (plan_efficiency is the first over step_time_s)
  double peak_memory_gib = 0;  // max over steps
  nlohmann::json knobs;        // of the first step (a setting's knobs are the same every step)
  bool valid() const { return invalid_steps == 0 && oom_steps == 0 && steps > 0; }
  bool measured() const { return source.rfind("measured:", 0) == 0; }  // results.h "Measured rows"
  std::string label() const { return strategy_label(strategy, setting); }
};

// Megatron's benchmark statistic: mean after dropping int(0.1 n) values from each end.
double trimmed_mean(std::vector<double> values);

// In first-appearance order of (scenario, setting, strategy).
std::vector<Aggregate> aggregate(const ResultsFile& results);

nlohmann::json aggregate_to_json(const Aggregate& a);

// "simulated", "measured" or "simulated and measured": how the rows' numbers were obtained.
std::string how_obtained(const ResultsFile& results);

}  // namespace dcp::harness
