// The benchmark loop behind `dcpbench run`: for each scenario and step, sample a global batch
// (impl/data), plan it with every strategy (planner registry), check each plan with
// plan::find_violation (an invalid plan or a planner error is recorded in its row, never
// hidden), simulate the valid ones (impl/sim over impl/cost) and collect result rows.
//
// Every row of one (scenario, step) sees the same batch, so the strategies' useful FLOPs are
// equal and speedup_vs_packing (packing step time / this step time) is a speed ratio.
// This file is the only place that maps scenario structs onto the impl/ modules.
#pragma once

#include "cost/time_model.h"
#include "data/dataset.h"
#include "harness/results.h"
#include "harness/scenario.h"
#include "plan/planner.h"

#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace dcp::harness {

struct RunOptions {
  std::optional<int> steps;             // overrides every scenario's training.steps
  std::vector<std::string> strategies;  // non-empty: only these (each must be in the scenario)
  std::ostream* progress = nullptr;     // one line per (scenario, step), e.g. std::cerr
  std::string command;                  // recorded in the context
  bool detail = true;                   // step 0 rows keep rank_busy_s and the plan picture
};

// Scenario -> impl/ configuration. Each throws InputError naming the scenario file and key.
cost::CostModel cost_model_of(const Scenario& s);
data::LengthSource length_source_of(const Scenario& s);
data::SamplerConfig sampler_config_of(const Scenario& s);
plan::PlanConfig plan_config_of(const Scenario& s);

// Strategies of the scenario after the RunOptions filter, each checked against the registry.
std::vector<std::string> strategies_of(const Scenario& s, const RunOptions& options,
                                       const plan::PlannerRegistry& registry);

// Runs every scenario; rows in (scenario, step, strategy) order.
ResultsFile run_scenarios(const std::vector<Scenario>& scenarios, const RunOptions& options,
                          const plan::PlannerRegistry& registry);

}  // namespace dcp::harness
