// Registration of this module's planners under their CLI names (planners.h). Each planner is a
// thin adapter over a free function, so tests and benchmarks can call the function directly.
#include "sched/planners.h"

#include "sched/dcp_solver.h"
#include "sched/megatron_dev.h"
#include "sched/megatron_pr2000.h"
#include "sched/nvidia_prototype.h"

#include <memory>

namespace dcp::sched {

namespace {

using PlanFn = plan::Plan (*)(const plan::Batch&, const plan::PlanConfig&);

class FunctionPlanner : public plan::Planner {
 public:
  FunctionPlanner(std::string name, PlanFn fn) : name_(std::move(name)), fn_(fn) {}
  std::string name() const override { return name_; }
  bool dynamic() const override { return true; }
  plan::Plan plan(const plan::Batch& batch, const plan::PlanConfig& config) const override {
    return fn_(batch, config);
  }

 private:
  std::string name_;
  PlanFn fn_;
};

}  // namespace

void register_sched_planners(plan::PlannerRegistry& registry) {
  registry.add("megatron-pr2000", [] { return std::make_unique<FunctionPlanner>("megatron-pr2000", &megatron_pr2000_plan); });
  registry.add("megatron-dev", [] { return std::make_unique<FunctionPlanner>("megatron-dev", &megatron_dev_plan); });
  registry.add("nvidia-prototype", plan::PlannerRegistry::Factory([](const plan::PlannerOptions& options) {
                                     return std::make_unique<NvidiaPrototypePlanner>(options);
                                   }));
  registry.add("dcp", plan::PlannerRegistry::Factory(
                          [](const plan::PlannerOptions& options) { return std::make_unique<DcpPlanner>(options); }));
}

}  // namespace dcp::sched
