// Internals of `dcpbench converge` (converge.h): what one run, the reference's or a strategy's,
// trains and records. Its steps (main steps, then one per edge case), the planned and the fixed-plan
// training loops over exec::Executor, the trace of each step, and the trace's JSON. converge.cpp
// compares the traces and writes the report; only it and converge_runs.cpp include this.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "comm/group_registry.h"
#include "core/rng.h"
#include "exec/executor.h"
#include "exec/planned_training.h"
#include "harness/converge_data.h"
#include "harness/converge_scenario.h"
#include "model/kernels.h"
#include "model/model.h"
#include "plan/async_planner.h"
#include "plan/validate.h"

namespace dcp::harness::converge_detail {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct StepSpec {
  std::string kind;              // "main" or "edge:<name>"
  std::optional<int> vpp_group;  // edge cases only
  // An edge case trains from the initial model (Executor::restart) in every run, reference and
  // strategies alike: each is judged as one step from the same parameters, so it neither
  // inherits the main steps' float32 drift nor passes a fault on to the next edge case.
  bool fresh() const { return kind != "main"; }
};

// What one run (reference or strategy) records per step.
struct Trace {
  std::vector<double> loss, mtp_loss, grad_norm;
  std::vector<uint64_t> grad_hash;
  std::vector<int> microbatches;
  std::map<int, int> group_sizes;  // CP size -> groups, summed over steps
  std::vector<double> grad_rel;  // per-tensor gradient difference from the reference (strategies)
  std::vector<int> grad_tensor;  // the tensor of grad_rel (strategies)
  // Same-parameter runs (float32): per step, the largest over the tensors of (difference / that
  // tensor's bound), its tensor and that tensor's difference.
  std::vector<double> grad_use, use_diff;
  std::vector<int> use_tensor;
  std::vector<double> plan_s, wait_s;  // per step, this rank's planner (strategies' first run)
};

// Progress lines on rank 0 (stderr): one at the start of each run and about every 10 s.
class Progress {
 public:
  Progress(std::ostream& os, bool on) : os_(os), on_(on) {}
  void start(const std::string& label, int steps) {
    label_ = label;
    steps_ = steps;
    t0_ = last_ = Clock::now();
    if (on_) os_ << "converge: " << label << ": " << steps << " steps\n" << std::flush;
  }
  void step(int i, double loss) {
    const auto now = Clock::now();
    if (!on_ || (i + 1 < steps_ && now - last_ < std::chrono::seconds(10))) return;
    last_ = now;
    const double s = std::chrono::duration<double>(now - t0_).count();
    char line[200];
    std::snprintf(line, sizeof line, "converge: %s: step %d/%d loss %.4f (%.2f s/step)\n",
                  label_.c_str(), i + 1, steps_, loss, s / (i + 1));
    os_ << line << std::flush;
  }

 private:
  std::ostream& os_;
  bool on_;
  std::string label_;
  int steps_ = 0;
  Clock::time_point t0_, last_;
};

template <typename T>
using StepHook = std::function<void(int step, std::span<const T> grads)>;

// Appends one trained step to the trace and runs the hook and the progress line.
template <typename T>
void record(Trace& t, int i, const exec::StepStats& st, exec::Executor<T>& ex, const StepHook<T>& hook,
            Progress* progress) {
  t.loss.push_back(st.loss);
  t.mtp_loss.push_back(st.mtp_loss);
  t.grad_norm.push_back(st.grad_norm);
  t.grad_hash.push_back(fnv1a(ex.last_grads().data(), ex.last_grads().size_bytes()));
  t.microbatches.push_back(st.microbatches);
  for (const auto& [size, n] : st.group_sizes) t.group_sizes[size] += n;
  if (hook) hook(i, ex.last_grads());
  if (progress) progress->step(i, st.loss);
}

// What runs just before each step of train() with the model's parameter values: reads them (the
// float32 reference keeps each step's parameters) or overwrites them (a same-parameter run).
template <typename T>
using BeforeStep = std::function<void(int step, std::span<T> values)>;

// Trains plans[0..steps) on `pool` (every rank of the pool calls it); returns the trace. A step
// whose spec is fresh() starts from the initial model. before_step (may be empty) runs before every
// step, after that restart; after_step (may be empty) after every step: the references' heartbeat.
template <typename T>
Trace train(comm::Communicator& pool, const ConvergeScenario& s, const std::vector<plan::Plan>& plans,
            const std::vector<exec::GlobalBatch>& batches, const std::vector<StepSpec>& specs, int steps,
            const StepHook<T>& hook, Progress* progress, const std::function<void()>& after_step = {},
            const BeforeStep<T>& before_step = {}) {
  comm::GroupRegistry reg(pool);
  auto k = model::make_cpu_kernels<T>();
  model::Model<T> m(s.model, *k);
  exec::Executor<T> ex(m, pool, reg, s.adam);
  Trace t;
  for (int i = 0; i < steps; ++i) {
    if (specs[i].fresh()) ex.restart();
    if (before_step) before_step(i, m.params().values());
    const exec::StepStats st = ex.step(plans[i], batches[i]);
    record(t, i, st, ex, hook, progress);
    if (after_step) after_step();
  }
  return t;
}

// A planner whose plans are checked against their batch and config (plan::validate) before they
// are handed out: an invalid plan is a planning error of its step, never trained.
class CheckedPlanner : public plan::Planner {
 public:
  explicit CheckedPlanner(std::unique_ptr<plan::Planner> inner) : inner_(std::move(inner)) {}
  std::string name() const override { return inner_->name(); }
  bool dynamic() const override { return inner_->dynamic(); }
  plan::Plan plan(const plan::Batch& b, const plan::PlanConfig& c) const override {
    plan::Plan p = inner_->plan(b, c);
    plan::validate(p, b, c);
    return p;
  }

 private:
  std::unique_ptr<plan::Planner> inner_;
};

// What a strategy's first run returns besides its trace: the plans it trained (for the bitwise
// repeat) and the planning error that stopped it, if any.
struct PlannedTrace {
  Trace trace;
  std::vector<plan::Plan> plans;
  std::optional<exec::PlanFailure> failure;
};

// The plan config of one step (the scenario's pool, budget and longest length; an edge case's VPP
// group).
plan::PlanConfig step_config(const ConvergeScenario& s, const StepSpec& spec);

// The step list of a run: `main_steps` main steps, then one step per edge case (batches[i] with
// its specs[i]).
struct StepList {
  std::vector<exec::GlobalBatch> batches;
  std::vector<StepSpec> specs;
};
StepList step_list(const TextCorpus& corpus, const ConvergeScenario& s, int main_steps);

// Trains a strategy with its plans computed one step ahead (exec/planned_training.h): the plan of
// step i+1 is made on a background thread while step i trains (sync: inside the loop, before the
// step). Every rank plans for itself; the trace records this rank's planning and wait times.
template <typename T>
PlannedTrace train_strategy(comm::Communicator& pool, const ConvergeScenario& s,
                           const std::shared_ptr<const plan::Planner>& planner, const std::vector<StepSpec>& specs,
                           const std::vector<exec::GlobalBatch>& batches, plan::PlanningMode mode,
                           const StepHook<T>& hook, Progress* progress) {
  PlannedTrace out;
  // Made first, so that step 0 is planned while the groups and the model are set up. The source
  // runs on the planner's thread: it reads only the immutable batches and specs.
  plan::AsyncPlanner ap(
      [&](int64_t i) -> std::optional<plan::PlanRequest> {
        if (i >= static_cast<int64_t>(batches.size())) return std::nullopt;
        return plan::PlanRequest{batches[static_cast<size_t>(i)].lengths(), step_config(s, specs[static_cast<size_t>(i)]),
                                 planner};
      },
      mode);
  comm::GroupRegistry reg(pool);
  auto k = model::make_cpu_kernels<T>();
  model::Model<T> m(s.model, *k);
  exec::Executor<T> ex(m, pool, reg, s.adam);
  const exec::PlannedRun run = exec::train_planned<T>(
      ex, ap, [&](int64_t i) -> const exec::GlobalBatch& { return batches[static_cast<size_t>(i)]; },
      [&](const plan::PlannedStep& p, const exec::StepStats& st) {
        record(out.trace, static_cast<int>(p.step), st, ex, hook, progress);
        out.trace.plan_s.push_back(p.timing.plan_s);
        out.trace.wait_s.push_back(p.timing.wait_s);
        out.plans.push_back(p.plan);
        const size_t next = static_cast<size_t>(p.step) + 1;
        if (next < specs.size() && specs[next].fresh()) ex.restart();  // as train() does
      });
  out.failure = run.failure;
  return out;
}

// One micro-batch with every sample on one rank: the single-rank reference's plan.
plan::Plan reference_plan(const exec::GlobalBatch& b);

json trace_json(const Trace& t);

// Bitwise comparison of the first `n` steps of two runs; returns the first differing step or -1.
int first_bitwise_difference(const Trace& a, const Trace& b, int n);

// Measured planning times of a strategy's first run (rank 0's planner): per step and in total.
json planning_json(const Trace& t, plan::PlanningMode mode);

}  // namespace dcp::harness::converge_detail
