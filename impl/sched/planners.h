// Registration of the dynamic-CP planners of this module:
//   "megatron-pr2000" (faithful port of next_hdp_group, Megatron-LM PR #2000),
//   "megatron-dev"    (faithful port of next_hdp_group_packing_aware, Megatron-LM dev),
//   "dcp"             (our solver, when present).
#pragma once

#include "plan/planner.h"

namespace dcp::sched {

void register_sched_planners(plan::PlannerRegistry& registry);

}  // namespace dcp::sched
