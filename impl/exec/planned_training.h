// Training with plans computed one step ahead: the executor's loop over an AsyncPlanner
// (plan/async_planner.h). While step i trains on this rank, the planner's background thread plans
// step i+1 (every rank plans for itself, deterministically, as Megatron replicates its schedule),
// so only the part of planning longer than a training step is exposed. Planning is deterministic
// and the plans arrive in step order, so the losses and gradients are bitwise those of planning
// every step synchronously (test_exec checks it).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "exec/executor.h"
#include "plan/async_planner.h"

namespace dcp::exec {

// A step whose plan could not be made (the planner or the source threw a dcp::Error).
struct PlanFailure {
  int64_t step = 0;
  std::string message;
};

struct PlannedRun {
  int64_t steps_trained = 0;
  std::optional<PlanFailure> failure;  // set: training stopped before this step
};

// Called after each trained step with its plan (and timing) and its stats.
using AfterPlannedStep = std::function<void(const plan::PlannedStep&, const StepStats&)>;

// Trains, in order, every step `planner` hands out until its source ends: step i's plan goes to
// Executor::step with batch_of(i) (whose lengths must be the planned batch; the executor checks).
// A dcp::Error from the planner or its source stops the loop at that step and is returned (every
// rank gets the same one: planning is deterministic); errors of the training step itself
// propagate as exceptions. `after_step` may be empty.
template <typename T>
PlannedRun train_planned(Executor<T>& executor, plan::AsyncPlanner& planner,
                         const std::function<const GlobalBatch&(int64_t step)>& batch_of,
                         const AfterPlannedStep& after_step);

}  // namespace dcp::exec
