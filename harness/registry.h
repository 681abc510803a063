// The registry of every built-in planner: the static baselines ("packing", "bshd") and the
// dynamic planners of impl/sched ("megatron-pr2000", "megatron-dev", "nvidia-prototype", "dcp").
#pragma once

#include "plan/planner.h"

namespace dcp::harness {

const plan::PlannerRegistry& builtin_planners();

}  // namespace dcp::harness
