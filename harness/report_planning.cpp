// The "planning off the step" section of the results table (report.h): per scenario, strategy and
// setting, the planner's measured wall time per step (solve_ms, on this host's CPU) split into the
// part hidden behind the previous step and the exposed part. Hidden is MODELLED in `run` (the step
// is simulated): min(plan of step i, simulated step time of step i-1), step 0 never hidden
// (results.h RowPlanning; README "Async planning"). Printed only for rows that carry planning.
#include <cstdio>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "harness/report.h"

namespace dcp::harness {

namespace {
struct PlanningSum {
  std::string mode;
  int steps = 0;
  double solve_ms = 0, hidden_ms = 0, exposed_ms = 0, wait_ms = 0, step_ms = 0;
};
}  // namespace

void print_planning_summary(std::ostream& os, const ResultsFile& results) {
  using Key = std::tuple<std::string, std::string, std::string>;  // scenario, strategy, setting
  std::map<Key, PlanningSum> sums;
  std::vector<Key> order;
  for (const auto& r : results.rows) {
    if (r.planning.empty()) continue;
    const Key k{r.scenario, r.strategy, r.setting};
    auto [it, fresh] = sums.try_emplace(k);
    if (fresh) order.push_back(k);
    PlanningSum& s = it->second;
    s.mode = s.mode.empty() || s.mode == r.planning ? r.planning : "mixed";
    ++s.steps;
    s.solve_ms += r.solve_ms;
    s.hidden_ms += r.plan_hidden_ms;
    s.exposed_ms += r.plan_exposed_ms;
    s.wait_ms += r.plan_wait_ms;
    if (r.has_metrics()) s.step_ms += 1e3 * r.step_time_s;
  }
  if (order.empty()) return;
  os << "\n## Planning off the step: solve = planner wall time measured on this host; hidden = MODELLED as\n"
     << "#   min(solve of step i, simulated step time of step i-1) when planned async (step 0 never hidden);\n"
     << "#   exposed = solve - hidden, the planning a step would wait for; waited = measured time the host\n"
     << "#   run waited for the plan while it simulated the previous step. Per-step means.\n";
  char line[300];
  std::snprintf(line, sizeof line, "%-26s %-26s %6s %11s %11s %11s %11s %11s\n", "scenario", "strategy (setting)", "mode",
                "solve", "hidden", "exposed", "hidden", "waited");
  os << line;
  std::snprintf(line, sizeof line, "%-26s %-26s %6s %11s %11s %11s %11s %11s\n", "", "", "", "(ms, host)", "(ms, model)",
                "(ms, model)", "(% solve)", "(ms, host)");
  os << line;
  for (const Key& k : order) {
    const PlanningSum& s = sums[k];
    const double n = s.steps;
    const std::string label = std::get<2>(k) == "published" ? std::get<1>(k) : std::get<1>(k) + " (" + std::get<2>(k) + ")";
    std::snprintf(line, sizeof line, "%-26s %-26s %6s %11.2f %11.2f %11.2f %11.1f %11.2f\n", std::get<0>(k).c_str(),
                  label.c_str(), s.mode.c_str(), s.solve_ms / n, s.hidden_ms / n, s.exposed_ms / n,
                  s.solve_ms > 0 ? 100.0 * s.hidden_ms / s.solve_ms : 0.0, s.wait_ms / n);
    os << line;
  }
}

}  // namespace dcp::harness
