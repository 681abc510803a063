// The planner evaluation (issue 13, "Evaluation"): one strategy (the focus, default `dcp`) against
// its peers on every scenario of a results file, in each setting (published, tuned), with a
// breakdown of where the step-time difference comes from. Reads only the results file's
// aggregates (aggregate.h), so it reports exactly what `run` simulated and says how it was obtained.
//
// Breakdown. The simulator splits each step time exactly into
//     step = compute + comm + overhead + bubble + imbalance
// (sim/simulator.h: compute incl. recompute, exposed CP and DP communication, host floors and
// per-micro-batch/iteration costs, pipeline bubble, and the rest = waiting for slower ranks). The
// difference peer - focus of the mean step times is therefore the sum of the differences of the
// five means, each printed in ms and as % of the peer's step: a positive entry is time the focus
// saves in that component.
//
// Targets (the project's for its planner, issue 13), checked from the same aggregates and printed as met / not met:
//   * focus step time >= 10% below each of `strong_peers` on the scenarios named in `headline`
//     at their tuned settings;
//   * focus never slower than any peer on any scenario and setting (1e-9 relative slack for
//     rounding; a peer out of memory or with an invalid plan: met where the focus runs);
//   * focus plan efficiency (lower bound / step time) >= 0.90 on every scenario and setting.
#pragma once

#include "harness/results.h"

#include <ostream>
#include <string>
#include <vector>

namespace dcp::harness {

struct EvaluationOptions {
  std::string focus = "dcp";
  // Strategies the focus is compared with (those present in each scenario are used, in this order;
  // one with no rows anywhere in the file is an unmet target).
  std::vector<std::string> peers = {"nvidia-prototype", "megatron-dev", "megatron-pr2000", "packing"};
  // Peers of the 10% target and the scenarios it applies to (substring match on the name).
  std::vector<std::string> strong_peers = {"nvidia-prototype", "megatron-dev"};
  std::vector<std::string> headline = {"llama13b-github", "llama13b-commoncrawl"};
  double headline_gain = 0.10;
  double plan_efficiency_target = 0.90;
};

struct TargetCheck {
  std::string what;    // e.g. "llama13b-github (tuned): dcp vs megatron-dev >= 10% faster"
  bool met = false;
  std::string detail;  // the numbers
};

// Evaluates the targets (empty when the focus is absent from the file).
std::vector<TargetCheck> evaluate_targets(const ResultsFile& results, const EvaluationOptions& options);

// The evaluation explains simulated step times (the simulator's breakdown and lower bound); a
// measured row (`run --backend cuda`) is one GPU's busy time of a rank's share with neither:
// InputError naming `path` and the row.
void require_simulated(const ResultsFile& results, const std::string& path);

// Every scenario of the file at `path` has rows of the focus strategy: the report compares the
// focus with its peers, so a scenario (or a whole file) without it would be left out without a word
// (stop 44: `evaluate A B` dropped a file of peer rows). InputError naming `path` and the scenario.
void require_focus_rows(const ResultsFile& results, const std::string& path, const std::string& focus);

// Appends the rows and draws studies of `more` (read from `path`) to `into`, for an evaluation
// over several results files: a scenario may come from one file only (InputError naming `path`),
// and the context's git_sha, date, cost_model and calibration list every distinct value, joined
// by " + " (the header names them all, not the first file's only).
void merge_results(ResultsFile& into, ResultsFile more, const std::string& path);

// Writes the report as Markdown: provenance, one comparison table and one breakdown table per
// (scenario, setting), then the target checks. Throws InputError when the focus strategy has no
// rows in the file.
void write_evaluation_markdown(std::ostream& os, const ResultsFile& results, const EvaluationOptions& options);

}  // namespace dcp::harness
