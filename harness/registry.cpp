// See registry.h. Built once, on first use; registration is explicit (no static initialisers).
#include "harness/registry.h"

#include "baselines/planners.h"
#include "sched/planners.h"

namespace dcp::harness {

const plan::PlannerRegistry& builtin_planners() {
  static const plan::PlannerRegistry registry = [] {
    plan::PlannerRegistry r;
    baselines::register_baseline_planners(r);
    sched::register_sched_planners(r);
    return r;
  }();
  return registry;
}

std::string builtin_planner_list(const std::string& separator) {
  std::string out;
  for (const std::string& n : builtin_planners().names()) out += (out.empty() ? "" : separator) + n;
  return out;
}

std::string searching_planner_list() {
  std::string out;
  for (const std::string& n : builtin_planners().names())
    if (builtin_planners().make(n)->searches()) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace dcp::harness
