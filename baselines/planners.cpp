// Registers the static-CP baselines under their CLI names.
#include "baselines/planners.h"

#include "baselines/bshd/bshd.h"
#include "baselines/packing/packing.h"

namespace dcp::baselines {

void register_baseline_planners(plan::PlannerRegistry& registry) {
  registry.add("packing", [] { return std::make_unique<PackingPlanner>(); });
  registry.add("bshd", [] { return std::make_unique<BshdPlanner>(); });
}

}  // namespace dcp::baselines
