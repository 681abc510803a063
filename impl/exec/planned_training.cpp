// See planned_training.h.
#include "exec/planned_training.h"

#include "core/error.h"
#include "core/nvtx.h"

namespace dcp::exec {

template <typename T>
PlannedRun train_planned(Executor<T>& executor, plan::AsyncPlanner& planner,
                         const std::function<const GlobalBatch&(int64_t step)>& batch_of,
                         const AfterPlannedStep& after_step) {
  DCP_NVTX_RANGE();
  PlannedRun run;
  for (;;) {
    std::optional<plan::PlannedStep> p;
    try {
      p = planner.next();  // returning lets the background thread start the next step
    } catch (const Error& e) {
      run.failure = PlanFailure{run.steps_trained, e.what()};
      return run;
    }
    if (!p) return run;
    DCP_CHECK(p->step == run.steps_trained, "train_planned: planner returned step ", p->step, ", expected ",
              run.steps_trained);
    const StepStats st = executor.step(p->plan, batch_of(p->step));
    ++run.steps_trained;
    if (after_step) after_step(*p, st);
  }
}

template PlannedRun train_planned<float>(Executor<float>&, plan::AsyncPlanner&,
                                         const std::function<const GlobalBatch&(int64_t)>&, const AfterPlannedStep&);
template PlannedRun train_planned<double>(Executor<double>&, plan::AsyncPlanner&,
                                          const std::function<const GlobalBatch&(int64_t)>&, const AfterPlannedStep&);

}  // namespace dcp::exec
