// The registry of every built-in planner: the static baselines ("packing", "bshd") and the
// dynamic planners of impl/sched ("megatron-pr2000", "megatron-dev", "nvidia-prototype", "dcp").
#pragma once

#include "plan/planner.h"

#include <string>

namespace dcp::harness {

const plan::PlannerRegistry& builtin_planners();

// Their names joined by `separator`, in the registry's order, for help texts and messages.
std::string builtin_planner_list(const std::string& separator = " | ");

// The names of the planners that search (Planner::searches(): a --time-budget-ms applies to them),
// joined by ", ", for the message that refuses a budget no planner of the command would use.
std::string searching_planner_list();

}  // namespace dcp::harness
