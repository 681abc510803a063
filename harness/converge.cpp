// See converge.h. Rank 0 of the pool runs the single-rank references on a communicator of its
// own (split off the world) while the other ranks wait in the first strategy's collectives;
// then every rank trains every strategy, and rank 0 compares each step with the reference.
#include "harness/converge.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <type_traits>

#include "attn/compare.h"
#include "core/error.h"
#include "exec/executor.h"
#include "harness/converge_data.h"
#include "harness/converge_runs.h"
#include "harness/registry.h"
#include "harness/results.h"
#include "plan/async_planner.h"

namespace dcp::harness {

// converge_detail (converge_runs.h): the runs' internals, and here the comparison.
namespace converge_detail {

double rel(double a, double ref) {
  if (!std::isfinite(a) || !std::isfinite(ref)) return a == ref ? 0.0 : std::numeric_limits<double>::infinity();
  return ref != 0 ? std::abs(a - ref) / std::abs(ref) : std::abs(a - ref);
}

// The largest of `v` (0 if empty), infinity once one is not finite.
double largest(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::isfinite(x) && std::isfinite(m) ? std::max(m, x) : std::numeric_limits<double>::infinity();
  return m;
}

}  // namespace converge_detail

NonFiniteStep first_nonfinite_step(const std::vector<double>& loss, const std::vector<double>& mtp_loss,
                                   const std::vector<std::vector<double>>& grads) {
  const auto finite = [](double x) { return std::isfinite(x); };
  const size_t n = std::max({loss.size(), mtp_loss.size(), grads.size()});
  for (size_t i = 0; i < n; ++i) {
    const char* what = i < loss.size() && !finite(loss[i])           ? "loss"
                       : i < mtp_loss.size() && !finite(mtp_loss[i]) ? "MTP loss"
                       : i < grads.size() && !std::all_of(grads[i].begin(), grads[i].end(), finite) ? "gradient"
                                                                                                   : nullptr;
    if (what) return {static_cast<int>(i), what};
  }
  return {};
}

namespace converge_detail {

std::string fmt(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3g", x);
  return b;
}

template <typename T>
ConvergeOutcome run_typed(comm::Communicator& world, const ConvergeScenario& s, const ConvergeOptions& o,
                          std::ostream& os) {
  const bool root = world.rank() == 0;
  const bool f32 = std::is_same_v<T, float>;
  Progress progress(os, root && !o.quiet);
  const int main_steps = o.steps.value_or(s.steps);

  // Data and the step list: main steps, then one step per edge case.
  const TextCorpus corpus = load_text_corpus(s);
  const StepList list = step_list(corpus, s, main_steps);
  const std::vector<exec::GlobalBatch>& batches = list.batches;
  const std::vector<StepSpec>& specs = list.specs;
  const int steps = static_cast<int>(batches.size());
  const int repeat = s.repeat_steps > 0 ? std::min(s.repeat_steps, steps) : steps;

  // Every strategy's planner (an unknown name is an InputError before anything trains). Plans are
  // made while the strategy trains, one step ahead (train_planned), on every rank: deterministic,
  // as Megatron replicates its schedule. A planning error stops that strategy at its step.
  const plan::PlannerRegistry& reg = builtin_planners();
  std::map<std::string, std::shared_ptr<const plan::Planner>> planners;
  for (const auto& name : s.strategies) planners[name] = std::make_shared<CheckedPlanner>(reg.make(name));
  const plan::PlanningMode mode = o.sync_planning ? plan::PlanningMode::sync : plan::PlanningMode::async;
  std::vector<plan::Plan> ref_plans;
  for (const auto& b : batches) ref_plans.push_back(reference_plan(b));

  // The parameter tensors (the same layout in every run of this scenario, float or double).
  std::vector<model::ParamInfo> tensors;
  int64_t params = 0;
  {
    auto k = model::make_cpu_kernels<double>();
    const model::Model<double> m(s.model, *k);
    tensors = m.params().infos();
    params = m.params().total();
  }

  ConvergeOutcome out;
  // --- references, on rank 0 alone ---
  std::vector<std::vector<double>> ref_grads(root ? steps : 0), ref64_grads(root && f32 ? steps : 0);
  // float32: the reference's parameters before each step (what its step i is computed at), and the
  // float64 drift there (same_drift_*): the same-parameter comparison's bounds.
  std::vector<std::vector<T>> ref_params(root && f32 ? steps : 0);
  std::vector<double> same_drift_grad(steps, 0.0);
  std::vector<std::vector<double>> same_drift_tensor(root && f32 ? steps : 0);  // per tensor
  Trace ref, ref64, ref64_same;
  int ref_repeat_diff = -1;
  {
    // While rank 0 trains the references alone, the others wait for its heartbeat: one message
    // per reference step (1) and a last one (0), so every wait is bounded by one step's time
    // (CommOptions::deadline), however many steps the run has.
    constexpr int kTagHeartbeat = 31;
    std::unique_ptr<comm::Communicator> solo = world.split(root ? 0 : -1, 0);
    auto beat = [&](int32_t alive) {
      for (int r = 1; r < world.size(); ++r) world.send(std::span<const int32_t>(&alive, 1), r, kTagHeartbeat);
    };
    if (root) {
      const std::function<void()> alive = [&] { beat(1); };
      progress.start(std::string("reference (1 rank, ") + (f32 ? "float32" : "float64") + ")", steps);
      BeforeStep<T> keep_params;
      if (f32) keep_params = [&](int i, std::span<T> v) { ref_params[i].assign(v.begin(), v.end()); };
      ref = train<T>(*solo, s, ref_plans, batches, specs, steps,
                     [&](int i, std::span<const T> g) { ref_grads[i].assign(g.begin(), g.end()); }, &progress,
                     alive, keep_params);
      progress.start("reference repeat (bitwise check)", repeat);
      const Trace again = train<T>(*solo, s, ref_plans, batches, specs, repeat, nullptr, &progress, alive);
      ref_repeat_diff = first_bitwise_difference(ref, again, repeat);
      if (f32) {
        progress.start("reference (1 rank, float64: the float32 drift)", steps);
        ref64 = train<double>(*solo, s, ref_plans, batches, specs, steps,
                              [&](int i, std::span<const double> g) { ref64_grads[i].assign(g.begin(), g.end()); },
                              &progress, alive);
        // The same single-rank run in float64, but each step from the float32 reference's
        // parameters of that step (the optimizer's update is overwritten before the next step):
        // the drift of one step's arithmetic, without the trajectories' divergence.
        progress.start("reference (1 rank, float64, at the float32 reference's parameters)", steps);
        ref64_same = train<double>(
            *solo, s, ref_plans, batches, specs, steps,
            [&](int i, std::span<const double> g) {
              same_drift_tensor[i] = tensor_rel_diffs<double>(ref_grads[i], g, tensors);
              same_drift_grad[i] = largest(same_drift_tensor[i]);
            },
            &progress, alive,
            [&](int i, std::span<double> v) { std::copy(ref_params[i].begin(), ref_params[i].end(), v.begin()); });
      }
      beat(0);
    } else {
      int32_t alive = 1;
      while (alive) world.recv(std::span<int32_t>(&alive, 1), 0, kTagHeartbeat);
    }
  }

  // Drift of the float32 reference from the float64 one at each step, and the bounds of each step:
  // along the two runs' own trajectories (drift_*), and at the float32 reference's parameters of
  // the step (same_drift_*: the float64 run from those parameters, one step's arithmetic).
  const bool mtp = s.model.mtp;
  std::vector<double> drift_loss(steps, 0.0), drift_mtp(steps, 0.0), drift_grad(steps, 0.0);
  std::vector<double> same_drift_loss(steps, 0.0), same_drift_mtp(steps, 0.0);
  if (root && f32) {
    for (int i = 0; i < steps; ++i) {
      drift_loss[i] = rel(ref.loss[i], ref64.loss[i]);
      drift_mtp[i] = rel(ref.mtp_loss[i], ref64.mtp_loss[i]);
      drift_grad[i] = tensor_rel_diff<double>(ref_grads[i], ref64_grads[i], tensors).rel;
      same_drift_loss[i] = rel(ref.loss[i], ref64_same.loss[i]);
      same_drift_mtp[i] = rel(ref.mtp_loss[i], ref64_same.mtp_loss[i]);
    }
  }
  // A reference step that is not finite fails the run (first_nonfinite_step, converge.h).
  NonFiniteStep ref_nonfinite;
  if (root) {
    ref_nonfinite = first_nonfinite_step(ref.loss, ref.mtp_loss, ref_grads);
    if (ref_nonfinite.step < 0 && f32) {
      ref_nonfinite = first_nonfinite_step(ref64.loss, ref64.mtp_loss, ref64_grads);
      if (ref_nonfinite.step >= 0) ref_nonfinite.what = "float64 " + ref_nonfinite.what;
    }
    if (ref_nonfinite.step < 0 && f32) {
      // Its gradients are not kept, only their drift, which is infinite where one is not finite
      // while the float32 reference's is (tensor_rel_diff).
      ref_nonfinite = first_nonfinite_step(ref64_same.loss, ref64_same.mtp_loss, {});
      for (int i = 0; i < steps; ++i)
        if (!std::isfinite(same_drift_grad[i]) && (ref_nonfinite.step < 0 || i < ref_nonfinite.step))
          ref_nonfinite = {i, "gradient"};
      if (ref_nonfinite.step >= 0) ref_nonfinite.what = "float64 (at the float32 parameters) " + ref_nonfinite.what;
    }
  }
  const double floor = o.bound.value_or(f32 ? kConvergeFloorF32 : kConvergeBoundF64);
  const auto bounds_of = [&](const std::vector<double>& drift) {
    std::vector<double> b(steps);
    for (int i = 0; i < steps; ++i) b[i] = f32 ? 2 * drift[i] + floor : floor;
    return b;
  };
  struct StepBounds {
    std::vector<double> loss, mtp, grad;
  };
  const StepBounds bounds{bounds_of(drift_loss), bounds_of(drift_mtp), bounds_of(drift_grad)};
  const StepBounds same_bounds{bounds_of(same_drift_loss), bounds_of(same_drift_mtp), bounds_of(same_drift_grad)};
  // The same-parameter bound of tensor t at step i: 2 x that tensor's float64 drift there + floor.
  const auto same_bound_of = [&](int i, int t) { return 2 * same_drift_tensor[i][static_cast<size_t>(t)] + floor; };
  // Per strategy: the largest bound of the run (each step is judged by its own, bounds_json below).
  json strategy_bound = {{"loss_rel", largest(bounds.loss)}, {"grad_rel", largest(bounds.grad)}};
  if (mtp) strategy_bound["mtp_loss_rel"] = largest(bounds.mtp);
  if (f32) {
    strategy_bound["same_params_loss_rel"] = largest(same_bounds.loss);
    strategy_bound["same_params_grad_rel"] = largest(same_bounds.grad);
    if (mtp) strategy_bound["same_params_mtp_loss_rel"] = largest(same_bounds.mtp);
  }

  // One run's differences from the reference, step by step, each judged by its step's bound
  // (`got` holds its losses and, from the comparison hook, its gradient differences): written into
  // `j`, with one failure line per quantity at its first step over the bound (`where` follows the
  // step in that line). True when every step is within. Where `got` has grad_use (the same-
  // parameter runs), the gradient is judged tensor by tensor instead, each by its own bound
  // (grad_use <= 1), and b.grad is only the loosest of them.
  const auto judge = [&](const std::string& name, const std::string& where, const Trace& got, const StepBounds& b,
                         json& j) {
    std::vector<double> dl_rel, dl_abs, dm_rel;
    double max_dl_rel = 0, max_dl_abs = 0, max_dm = 0, max_g = 0;
    int worst_l = 0, worst_g = 0;
    // Each quantity's first step over its own bound (-1: none); NaN or inf once a run diverges is
    // never within a bound (!(x <= b)) and never dropped by a max that skips NaN.
    int over_l = -1, over_m = -1, over_g = -1;
    const auto bigger = [](double x, double m) { return x > m || !std::isfinite(x); };
    for (int i = 0; i < steps; ++i) {
      const double dr = rel(got.loss[i], ref.loss[i]);
      dl_rel.push_back(dr);
      dl_abs.push_back(std::abs(got.loss[i] - ref.loss[i]));
      dm_rel.push_back(rel(got.mtp_loss[i], ref.mtp_loss[i]));
      if (bigger(dr, max_dl_rel)) { max_dl_rel = dr; worst_l = i; }
      if (bigger(dl_abs.back(), max_dl_abs)) max_dl_abs = dl_abs.back();
      if (bigger(dm_rel[i], max_dm)) max_dm = dm_rel[i];
      if (bigger(got.grad_rel[i], max_g)) { max_g = got.grad_rel[i]; worst_g = i; }
      if (over_l < 0 && !(dr <= b.loss[i])) over_l = i;
      if (over_m < 0 && mtp && !(dm_rel[i] <= b.mtp[i])) over_m = i;
      if (over_g < 0 && !(got.grad_use.empty() ? got.grad_rel[i] <= b.grad[i] : got.grad_use[i] <= 1.0)) over_g = i;
    }
    const auto tensor_name = [&](int i) {
      const int t = got.grad_tensor[i];
      return t >= 0 && t < static_cast<int>(tensors.size()) ? tensors[t].name : std::string("?");
    };
    j["dloss_rel"] = dl_rel;
    j["dloss_abs"] = dl_abs;
    if (mtp) j["dmtp_loss_rel"] = dm_rel;
    j["grad_rel_diff"] = got.grad_rel;
    json worst_tensors = json::array();
    for (int i = 0; i < steps; ++i) worst_tensors.push_back(tensor_name(i));
    j["grad_worst_tensor"] = worst_tensors;
    j["max_abs_dloss"] = max_dl_abs;
    j["max_rel_dloss"] = max_dl_rel;
    if (mtp) j["max_rel_dmtp_loss"] = max_dm;
    j["max_rel_grad_diff"] = max_g;
    j["worst_loss_step"] = worst_l;
    j["worst_grad_step"] = worst_g;
    if (!got.grad_use.empty()) {
      j["grad_bound_use"] = got.grad_use;
      json use_tensors = json::array();
      for (int i = 0; i < steps; ++i) {
        const int t = got.use_tensor[i];
        use_tensors.push_back(t >= 0 && t < static_cast<int>(tensors.size()) ? tensors[t].name : std::string("?"));
      }
      j["grad_bound_use_tensor"] = use_tensors;
      j["max_grad_bound_use"] = largest(got.grad_use);  // inf once a step is not finite (null in JSON)
    }
    const auto at = [&](int i) { return name + " step " + std::to_string(i) + " (" + specs[i].kind + ")" + where + ": "; };
    if (over_l >= 0)
      out.failures.push_back(at(over_l) + "relative loss difference " + fmt(dl_rel[over_l]) + " > bound " +
                             fmt(b.loss[over_l]));
    if (over_m >= 0)
      out.failures.push_back(at(over_m) + "relative MTP loss difference " + fmt(dm_rel[over_m]) + " > bound " +
                             fmt(b.mtp[over_m]));
    if (over_g >= 0 && got.grad_use.empty())
      out.failures.push_back(at(over_g) + "relative gradient difference " + fmt(got.grad_rel[over_g]) + " in " +
                             tensor_name(over_g) + " > bound " + fmt(b.grad[over_g]));
    if (over_g >= 0 && !got.grad_use.empty()) {
      const int t = got.use_tensor[over_g];
      const bool known = t >= 0 && t < static_cast<int>(tensors.size());
      out.failures.push_back(at(over_g) + "relative gradient difference " + fmt(got.use_diff[over_g]) + " in " +
                             (known ? tensors[t].name : std::string("?")) + " > its bound " +
                             (known ? fmt(same_bound_of(over_g, t)) : std::string("?")) +
                             " (2 x that tensor's float64 drift + floor)");
    }
    const bool pass = over_l < 0 && over_m < 0 && over_g < 0;
    j["pass"] = pass;
    return pass;
  };

  // --- strategies, on every rank ---
  json strategies = json::object();
  if (root) {
    json r = trace_json(ref);
    r["bitwise_repeat"] = ref_repeat_diff < 0;
    r["repeat_steps"] = repeat;
    r["pass"] = ref_repeat_diff < 0 && ref_nonfinite.step < 0;
    strategies["reference"] = r;
    if (ref_repeat_diff >= 0)
      out.failures.push_back("reference step " + std::to_string(ref_repeat_diff) + " (" +
                             specs[ref_repeat_diff].kind + "): repeat run not bitwise identical");
    if (ref_nonfinite.step >= 0)
      out.failures.push_back("reference step " + std::to_string(ref_nonfinite.step) + " (" +
                             specs[ref_nonfinite.step].kind + "): " + ref_nonfinite.what +
                             " not finite, so no strategy can be compared there (the reference diverged or a "
                             "kernel gave NaN/inf)");
    if (f32) {
      strategies["reference_f64"] = trace_json(ref64);
      json same = {{"losses", ref64_same.loss}, {"mtp_losses", ref64_same.mtp_loss}};
      strategies["reference_f64"]["same_params"] = same;
    }
  }
  // A hook that records each step's per-tensor gradient difference from the reference in `t`.
  const auto gradient_differences = [&](Trace& t) -> StepHook<T> {
    return [&](int i, std::span<const T> g) {
      const TensorDiff d = tensor_rel_diff<T>(g, ref_grads[i], tensors);
      t.grad_rel.push_back(d.rel);
      t.grad_tensor.push_back(d.tensor);
    };
  };
  for (const auto& name : s.strategies) {
    Trace diffs;
    if (root) progress.start(name + " (" + std::to_string(world.size()) + " ranks)", steps);
    PlannedTrace first = train_strategy<T>(world, s, planners[name], specs, batches, mode,
                                            root ? gradient_differences(diffs) : StepHook<T>{},
                                            root ? &progress : nullptr);
    json j;
    if (first.failure) {
      const int es = static_cast<int>(first.failure->step);
      const std::string& msg = first.failure->message;
      if (root) {
        j["error"] = "step " + std::to_string(es) + " (" + specs[es].kind + "): " + msg;
        j["pass"] = false;
        j["bitwise_repeat"] = false;
        j["bound"] = strategy_bound;
        strategies[name] = j;
        out.failures.push_back(name + " step " + std::to_string(es) + " (" + specs[es].kind +
                               "): planner error: " + msg);
      }
      continue;
    }
    Trace got = std::move(first.trace);
    // The repeat trains the same plans again (planning is deterministic; the repeat checks training).
    if (root) progress.start(name + " repeat (bitwise check)", repeat);
    const Trace again = train<T>(world, s, first.plans, batches, specs, repeat, nullptr, root ? &progress : nullptr);
    // float32: the same plans once more, each step from the float32 reference's parameters of that
    // step (sent by rank 0; the step's update is overwritten before the next), so that each step is
    // compared with the reference's at the same parameters, within 2 x the float64 drift there +
    // floor, instead of after two trajectories have diverged (bounds up to ~3e-2 late in
    // converge-moby's run, helper-58's review).
    Trace same, same_diffs;
    // Per step: the per-tensor differences, the largest (grad_rel) and the largest use of a
    // tensor's own bound (grad_use).
    const StepHook<T> same_differences = [&](int i, std::span<const T> g) {
      const std::vector<double> d = tensor_rel_diffs<T>(g, ref_grads[i], tensors);
      double worst = 0, use = 0;
      int worst_t = -1, use_t = -1;
      for (size_t t = 0; t < d.size(); ++t) {
        const double u = d[t] / same_bound_of(i, static_cast<int>(t));
        if (worst_t < 0 || d[t] > worst || !std::isfinite(d[t])) { worst = d[t]; worst_t = static_cast<int>(t); }
        if (use_t < 0 || u > use || !std::isfinite(u)) { use = u; use_t = static_cast<int>(t); }
      }
      same_diffs.grad_rel.push_back(worst);
      same_diffs.grad_tensor.push_back(worst_t);
      same_diffs.grad_use.push_back(use);
      same_diffs.use_tensor.push_back(use_t);
      same_diffs.use_diff.push_back(use_t >= 0 ? d[static_cast<size_t>(use_t)] : 0.0);
    };
    if (f32) {
      constexpr int kTagParams = 32;
      const BeforeStep<T> load = [&](int i, std::span<T> v) {
        if (root) {
          std::copy(ref_params[i].begin(), ref_params[i].end(), v.begin());
          for (int r = 1; r < world.size(); ++r) world.send(std::span<const T>(v.data(), v.size()), r, kTagParams);
        } else {
          world.recv(v, 0, kTagParams);
        }
      };
      if (root) progress.start(name + " at the float32 reference's parameters", steps);
      same = train<T>(world, s, first.plans, batches, specs, steps, root ? same_differences : StepHook<T>{},
                      root ? &progress : nullptr, {}, load);
    }
    if (!root) continue;
    got.grad_rel = diffs.grad_rel;
    got.grad_tensor = diffs.grad_tensor;
    const int rep = first_bitwise_difference(got, again, repeat);
    j = trace_json(got);
    bool pass = judge(name, "", got, bounds, j);
    if (f32) {
      same.grad_rel = same_diffs.grad_rel;
      same.grad_tensor = same_diffs.grad_tensor;
      same.grad_use = same_diffs.grad_use;
      same.use_tensor = same_diffs.use_tensor;
      same.use_diff = same_diffs.use_diff;
      json sp = {{"losses", same.loss}, {"mtp_losses", same.mtp_loss}};
      pass = judge(name, " at the float32 reference's parameters", same, same_bounds, sp) && pass;
      j["same_params"] = sp;
    }
    j["bitwise_repeat"] = rep < 0;
    j["repeat_steps"] = repeat;
    j["bound"] = strategy_bound;
    j["planning"] = planning_json(got, mode);
    // The planners' notes on the plans trained (plan::Plan::note), each with the steps that carry
    // it: e.g. nvidia-prototype returning megatron-dev's plan where its search holds no m
    // (deviation 7 of sched/nvidia_prototype.h), so that those steps are not read as its own.
    std::map<std::string, std::vector<int>> notes;
    for (size_t i = 0; i < first.plans.size(); ++i)
      if (!first.plans[i].note.empty()) notes[first.plans[i].note].push_back(static_cast<int>(i));
    if (!notes.empty()) {
      json pn = json::array();
      for (const auto& [note, with] : notes) pn.push_back({{"note", note}, {"steps", with}});
      j["planner_notes"] = pn;
    }
    j["pass"] = pass && rep < 0;
    if (rep >= 0)
      out.failures.push_back(name + " step " + std::to_string(rep) + " (" + specs[rep].kind +
                             "): repeat run not bitwise identical (loss or gradient)");
    strategies[name] = j;
  }
  if (!root) return out;

  // The reference must train: its loss falls by >= 10% over the main steps.
  const double first = ref.loss.front(), last = ref.loss[std::max(0, main_steps - 1)];
  const double drop = first > 0 ? (first - last) / first : 0;
  if (!(drop >= kConvergeMinLossDrop))
    out.failures.push_back("reference step " + std::to_string(main_steps - 1) + " (main): loss fell by " +
                           fmt(100 * drop) + "% over the run (" + fmt(first) + " -> " + fmt(last) +
                           "), less than the " + fmt(100 * kConvergeMinLossDrop) + "% required" +
                           (main_steps < s.steps
                                ? " (a run of " + std::to_string(main_steps) + " of the scenario's " +
                                      std::to_string(s.steps) + " steps may be too short to train that far)"
                                : ""));

  json rep;
  rep["schema"] = "dcpbench.converge.v1";
  rep["context"] = make_context(std::string("cpu, ") + o.backend + " backend, " + std::to_string(world.size()) + " ranks",
                                "none (executed, not simulated)", "none", o.command);
  rep["scenario"] = s.name;
  rep["dtype"] = f32 ? "f32" : "f64";
  rep["steps"] = steps;
  rep["main_steps"] = main_steps;
  json kinds = json::array();
  for (const auto& sp : specs) kinds.push_back(sp.kind);
  rep["step_kinds"] = kinds;
  json edges = json::array();
  for (const auto& e : s.edge_cases)
    edges.push_back({{"name", e.name}, {"why", e.why}, {"lengths", e.lengths},
                     {"vpp_group", e.vpp_group ? json(*e.vpp_group) : json()}});
  rep["edge_cases"] = edges;
  rep["edge_case_start"] = "initial_model";  // each edge case: one step from the initial model (StepSpec::fresh)
  json mixers = json::array();
  for (auto m : s.model.mixers) mixers.push_back(model::mixer_name(m));
  rep["model"] = {{"vocab", s.model.vocab}, {"hidden", s.model.hidden}, {"ffn", s.model.ffn},
                  {"heads", s.model.heads}, {"kv_heads", s.model.kv_heads}, {"head_dim", s.model.head_dim},
                  {"mixers", mixers}, {"mtp", s.model.mtp}, {"parameters", params},
                  {"attention", attn::cp_algo_name(s.model.attn_algo)}};
  rep["pool"] = {{"dp", s.dp}, {"cp", s.cp}, {"ranks", s.pool()}, {"backend", o.backend},
                 {"max_seqlen_per_rank", s.max_seqlen_per_rank}, {"max_seqlen", s.max_seqlen}};
  rep["data"] = {{"text_dir", s.text_dir_as_written}, {"files", corpus.files}, {"bytes", corpus.bytes},
                 {"documents", corpus.documents.size()}, {"global_batch", s.global_batch}};
  // "loss_rel", "grad_rel" (and "mtp_loss_rel"): the largest bound of the run; "*_per_step": the
  // bound each step is judged by (float64: all the same), except same_params_grad_rel_per_step,
  // the loosest tensor's bound (each tensor is judged by its own, 2 x its drift + floor).
  json bj = strategy_bound;
  bj["loss_rel_per_step"] = bounds.loss;
  bj["grad_rel_per_step"] = bounds.grad;
  if (mtp) bj["mtp_loss_rel_per_step"] = bounds.mtp;
  bj["grad_measure"] = "per tensor: max |g - g_ref| / max |g_ref| within each parameter, the largest over them";
  if (f32) {
    bj["f32_drift_loss_rel"] = largest(drift_loss);
    bj["f32_drift_grad_rel"] = largest(drift_grad);
    bj["f32_drift_loss_rel_per_step"] = drift_loss;
    bj["f32_drift_grad_rel_per_step"] = drift_grad;
    if (mtp) bj["f32_drift_mtp_loss_rel_per_step"] = drift_mtp;
    // The same-parameter comparison's: the float64 run's drift at the float32 reference's
    // parameters of each step, and the bounds 2 x that + floor.
    bj["same_params_loss_rel_per_step"] = same_bounds.loss;
    bj["same_params_grad_rel_per_step"] = same_bounds.grad;
    if (mtp) bj["same_params_mtp_loss_rel_per_step"] = same_bounds.mtp;
    bj["f32_same_params_drift_loss_rel_per_step"] = same_drift_loss;
    bj["f32_same_params_drift_grad_rel_per_step"] = same_drift_grad;
    if (mtp) bj["f32_same_params_drift_mtp_loss_rel_per_step"] = same_drift_mtp;
    bj["f32_same_params_drift_grad_rel"] = largest(same_drift_grad);
    bj["floor"] = floor;
    bj["why"] = "per step, 2 x the drift of the single-rank float32 run from the single-rank float64 run at that "
                "step + floor (FlashAttention-3's rule)";
    bj["same_params_why"] = "per step, each strategy's loss and gradient at the float32 reference's parameters of "
                            "that step (strategies.*.same_params), within 2 x the drift of the single-rank float64 "
                            "run at those parameters + floor; the gradient tensor by tensor, each within 2 x its own "
                            "drift + floor (same_params_grad_rel_per_step: the loosest tensor's bound)";
    json per_tensor = json::array();
    for (const auto& d : same_drift_tensor) per_tensor.push_back(d);
    bj["f32_same_params_drift_grad_rel_per_tensor"] = per_tensor;  // [step][tensor], tensors in model order
    json names = json::array();
    for (const auto& t : tensors) names.push_back(t.name);
    bj["tensors"] = names;
  } else {
    // (It cited DESIGN.md, which a clone does not have: helper-77's trial.)
    bj["why"] = "float64: CP and packing only reorder sums (README.md, \"What 'the same model' means here\")";
  }
  rep["bounds"] = bj;
  rep["reference_loss_drop"] = {{"first", first}, {"last", last}, {"drop", drop}, {"required", kConvergeMinLossDrop}};
  json order = json::array({"reference"});
  if (f32) order.push_back("reference_f64");
  for (const auto& n : s.strategies) order.push_back(n);
  rep["strategy_order"] = order;  // table and chart order (JSON objects are unordered)
  rep["strategies"] = strategies;
  rep["failures"] = out.failures;
  rep["pass"] = out.failures.empty();
  out.report = std::move(rep);
  return out;
}

}  // namespace converge_detail

void check_strategies_plan(const ConvergeScenario& s) {
  using converge_detail::CheckedPlanner, converge_detail::StepList, converge_detail::StepSpec, converge_detail::step_list,
      converge_detail::step_config;
  const StepList list = step_list(load_text_corpus(s), s, 1);  // the first main step, every edge case
  const plan::PlannerRegistry& reg = builtin_planners();
  for (const auto& name : s.strategies) {
    const CheckedPlanner planner(reg.make(name));
    for (size_t i = 0; i < list.batches.size(); ++i) {
      const StepSpec& spec = list.specs[i];
      try {
        planner.plan(list.batches[i].lengths(), step_config(s, spec));
      } catch (const Error& e) {
        throw InputError(s.file + ": strategy \"" + name + "\" cannot plan " +
                         (i == 0 ? std::string("the first step") : "edge case \"" + spec.kind.substr(5) + "\"") +
                         " of this scenario: " + e.what());
      }
    }
  }
}

ReferenceGradients reference_gradients(const ConvergeScenario& s, const ConvergeOptions& o) {
  auto k = model::make_cpu_kernels<double>();
  const model::Model<double> m(s.model, *k);
  ReferenceGradients r;
  r.steps = o.steps.value_or(s.steps) + static_cast<int64_t>(s.edge_cases.size());
  r.params = m.params().total();
  r.f32 = o.dtype.value_or(s.dtype) == "f32";
  r.bytes = static_cast<double>(r.steps) * static_cast<double>(r.params) * static_cast<double>(r.bytes_per_param());
  return r;
}

ConvergeOutcome run_converge(comm::Communicator& world, const ConvergeScenario& s, const ConvergeOptions& o,
                             std::ostream& progress) {
  DCP_REQUIRE(world.size() == s.pool(), s.file, ": the pool has ", s.pool(), " ranks (dp ", s.dp, " x cp ",
              s.cp, ") but the run has ", world.size(), o.backend == "mpi" ? " processes (mpirun -np)" : " ranks");
  const std::string dtype = o.dtype.value_or(s.dtype);
  return dtype == "f32" ? converge_detail::run_typed<float>(world, s, o, progress)
                        : converge_detail::run_typed<double>(world, s, o, progress);
}

}  // namespace dcp::harness
