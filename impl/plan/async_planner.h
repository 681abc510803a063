// Async planning: plans global batch i+1 on a background thread while the caller runs batch i,
// and hands the plans back in step order.
//
// Why: a planner that searches (dcp, the prototype port) costs milliseconds to seconds per step;
// run inside the training step, as upstream Megatron does (its scheduler is called synchronously
// in train_step), that time adds to every step. NVIDIA's research prototype instead plans one
// step ahead in a background process (reference/landscape.md §3.3 "Async / zero overhead").
// Planning is deterministic, so running it earlier changes only *when* it runs, never the plan.
//
// Contract of AsyncPlanner:
//   - The source is called once per step, in increasing step order (0, 1, 2, ...), one call at a
//     time, until it returns nullopt (the end). In async mode it runs on the background thread,
//     so it must not touch state the caller changes meanwhile (the harness hands it immutable,
//     pre-built batches); in sync mode it runs inside next().
//   - next() returns the PlannedStep of step i (blocking, without busy waiting, until it is ready)
//     and, before returning, lets the background thread start step i+1. Step 0 starts at
//     construction. The last call returns nullopt, and so does every call after it.
//   - Bounded: at most ONE step ahead. The background thread plans step i+1 only after next() has
//     handed out step i, so besides the step the caller holds, at most one PlannedStep (its batch
//     and plan) exists: memory is O(one global batch + one plan).
//   - Errors: an exception thrown by the source or the planner for step i (dcp::InputError for a
//     batch that cannot be planned) is rethrown by the next() call that would have returned step
//     i, after the background thread was allowed to go on with step i+1; steps keep their order.
//   - Destruction, at any time (even while a plan is being computed): asks the thread to stop,
//     waits for the plan in flight to finish (Planner::plan cannot be interrupted; its result is
//     discarded) and joins. No step after it is started.
//   - Timing (PlanTiming, wall clock, std::chrono::steady_clock, on the machine that runs it):
//     plan_s = duration of the planner's plan() call; wait_s = time the caller was blocked in
//     next() for this step, the exposed part. hidden_s = plan_s - wait_s (clamped at 0): the
//     part of planning that overlapped the caller's work. In sync mode next() runs the source
//     and the planner itself, so wait_s >= plan_s and nothing is hidden.
#pragma once

#include "plan/planner.h"

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

namespace dcp::plan {

enum class PlanningMode { async, sync };

// What the source hands over for one step: the batch, its config and the planner to use.
struct PlanRequest {
  Batch batch;
  PlanConfig config;
  std::shared_ptr<const Planner> planner;  // must not be null
};

struct PlanTiming {
  double plan_s = 0;  // the planner's plan() call, wall clock
  double wait_s = 0;  // the caller blocked in next() for this step, wall clock (the exposed part)
  double hidden_s() const { return plan_s > wait_s ? plan_s - wait_s : 0.0; }
};

struct PlannedStep {
  int64_t step = 0;
  Batch batch;        // the batch the plan is for (as the source gave it)
  PlanConfig config;
  Plan plan;
  PlanTiming timing;
};

class AsyncPlanner {
 public:
  using BatchSource = std::function<std::optional<Batch>(int64_t step)>;
  using RequestSource = std::function<std::optional<PlanRequest>(int64_t step)>;

  // One planner and config for every step; `planner` must outlive this object.
  AsyncPlanner(const Planner& planner, const PlanConfig& config, BatchSource source,
               PlanningMode mode = PlanningMode::async);
  // Each step names its own config and planner (e.g. a planner whose options depend on the batch).
  explicit AsyncPlanner(RequestSource source, PlanningMode mode = PlanningMode::async);
  ~AsyncPlanner();
  AsyncPlanner(const AsyncPlanner&) = delete;
  AsyncPlanner& operator=(const AsyncPlanner&) = delete;

  // The next step in order (see the contract above); nullopt once the source has ended.
  std::optional<PlannedStep> next();

  PlanningMode mode() const { return mode_; }
  // Steps handed out by next() so far, failed ones included (thread-safe).
  int64_t steps_returned() const;

 private:
  // The outcome of one step: a plan, an exception, or the end of the source.
  struct Outcome {
    std::optional<PlannedStep> planned;
    std::exception_ptr error;
  };
  static Outcome run_step(const RequestSource& source, int64_t step);
  void worker(std::stop_token stop);

  RequestSource source_;
  PlanningMode mode_;
  mutable std::mutex mu_;
  std::condition_variable_any cv_;
  int64_t allowed_ = 1;                 // the worker may plan steps < allowed_ (one ahead)
  int64_t returned_ = 0;                // steps handed out by next()
  bool ended_ = false;                  // next() has returned nullopt
  std::optional<Outcome> ready_;        // the finished step not yet handed out (at most one)
  std::jthread thread_;                 // last: stopped and joined before the members above go
};

}  // namespace dcp::plan
