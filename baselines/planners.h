// Registration of the static-CP baselines: "packing" (Megatron dp_balanced, THD packing) and
// "bshd" (every sample padded to max_seqlen, one sample per CP group per micro-batch).
#pragma once

#include "plan/planner.h"

namespace dcp::baselines {

void register_baseline_planners(plan::PlannerRegistry& registry);

}  // namespace dcp::baselines
