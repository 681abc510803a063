// `dcpbench converge`: proof that every strategy trains the same model.
//
// The same model (config.h) from the same seed trains on the same global batches (converge_data.h)
// under a single-rank reference (one rank, one micro-batch, no CP) and under every strategy's
// plan on the DP x CP pool (exec/executor.h), for the scenario's steps plus one extra step per
// scheduler edge case. After every step the per-token loss and the reduced gradient of each
// strategy are compared with the reference's at the same step. Each edge case's step starts from
// the initial model (parameters and AdamW state of step 0, Executor::restart) in every run: it
// is judged as one step from the same parameters, so in float32 its bounds are not widened by
// the main steps' drift, and a fault in it is not passed on to the next edge case. (Until
// 2026-12-06 the edge cases trained on from the main steps: float32 gradient bounds ~50-80x
// step 0's.)
//
// Bounds (README "Convergence"; the numbers used are written into the output), per step:
//   float64: relative loss difference, relative MTP-loss difference (when the model has the head)
//     and relative gradient difference <= 1e-10: CP and packing only reorder sums (DESIGN.md).
//     The gradient difference is taken per tensor (max |g - g_ref| / max |g_ref| within each of
//     the model's parameters, the largest over them): over the whole flat gradient the embedding
//     and output tensors set the scale, and a tensor 10^-7 of it (Mamba's A_log, dt_bias) could
//     be wholly wrong and still pass.
//   float32: <= 2 x the drift of the single-rank float32 run from the single-rank float64 run
//     (same quantity, at the same step) + a floor of 1e-5 (DESIGN.md's float32 CP tolerance),
//     the FlashAttention-3 rule: a fast path may be at most twice as far from the exact result
//     as the naive algorithm in the same precision. (Until 2026-11-28 the bound took the largest
//     drift over all steps at every step, ~10^4 too loose at step 0, the gradient over the flat
//     buffer, and the MTP loss was not compared.)
//   float32, at the same parameters: each strategy trains its plans once more, every step started
//     from the float32 reference's parameters of that step (the update is overwritten before the
//     next step), and its loss, MTP loss and gradient there are held to 2 x the drift of a float64
//     single-rank run at the same parameters + floor, the gradient tensor by tensor, each by 2 x its
//     own drift + floor (under the worst tensor's drift, output.weight's, a fault in a quiet
//     tensor such as A_log would pass: helper-63). Along the trajectories the drift grows with
//     the diverging AdamW steps (bounds up to 2.8e-2 late in converge-moby), so a fault below ~1%
//     of a gradient that only late steps trigger passed; at the same parameters the bound stays
//     that of one step's arithmetic (helper-58's review, 2026-12-07).
//   every strategy and the reference: a second run of the first repeat_steps steps is bitwise
//     identical (losses and gradients);
//   the reference loss falls by at least 10% over the main steps (a backward that produces zeros
//     would otherwise pass every comparison).
// Any broken bound fails the run (exit 1) with one line per failure naming the strategy, the step
// and the quantity.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "harness/converge_scenario.h"
#include "model/params.h"

namespace dcp::harness {

struct ConvergeOptions {
  std::string backend = "threads";       // threads | mpi (recorded in the output)
  std::optional<std::string> dtype;      // overrides training.dtype
  std::optional<int> steps;              // overrides training.steps
  std::optional<double> bound;           // overrides the float64 bound / float32 floor
  std::string command;                   // the command line, for the context
  bool quiet = false;                    // no progress lines
  // Plan each step inside the training loop instead of one step ahead on a background thread
  // (plan/async_planner.h). The losses are bitwise the same; only the measured wait changes.
  bool sync_planning = false;
};

inline constexpr double kConvergeBoundF64 = 1e-10;
inline constexpr double kConvergeFloorF32 = 1e-5;
inline constexpr double kConvergeMinLossDrop = 0.10;

struct ConvergeOutcome {
  nlohmann::json report;               // dcpbench.converge.v1 (rank 0 only; null elsewhere)
  std::vector<std::string> failures;   // one line each (rank 0 only)
  bool pass() const { return failures.empty(); }
};

// Bytes rank 0 keeps of the references for every step (main steps and edge cases): the
// reference's gradient, one float64 per parameter; with float32 also the float64 drift run's
// gradient (float64) and the float32 reference's parameters before the step (float32, for the
// same-parameter comparison): 8 or 20 bytes per parameter and step, 452 KB per step on
// converge-moby (56,472 parameters), 1.13 MB in float32. Checked before anything trains
// (cmd_converge: exit 2 naming steps x parameters), so a run cannot grow past it.
inline constexpr double kConvergeMaxReferenceGradBytes = 8.0 * 1024 * 1024 * 1024;
struct ReferenceGradients {
  int64_t steps = 0;   // main steps + edge cases
  int64_t params = 0;
  bool f32 = false;
  double bytes = 0;
  int bytes_per_param() const { return f32 ? 2 * 8 + 4 : 8; }
};
ReferenceGradients reference_gradients(const ConvergeScenario& s, const ConvergeOptions& o);

// Collective over `world` (its size must be the scenario's pool). Every rank trains; rank 0 also
// runs the references, compares, and returns the report. `progress`: rank 0's progress lines.
ConvergeOutcome run_converge(comm::Communicator& world, const ConvergeScenario& s,
                             const ConvergeOptions& o, std::ostream& progress);

// Throws InputError naming the strategy when one of the scenario's strategies cannot plan its first
// step or an edge case under its config (bshd with max_seqlen not a multiple of 2 x cp, a static CP
// group too small for the longest document, ...): a scenario error, checked by `dcpbench converge`
// before any backend starts (exit 2 on every process), not a FAIL after the reference has trained.
void check_strategies_plan(const ConvergeScenario& s);

// The reference's first step (-1: none) whose loss, MTP loss or gradient is not finite, and which.
// Such a step proves nothing: a float32 drift of inf makes that step's bounds inf, and two equal
// infinities compare as equal, so a strategy that failed the same way would pass there
// (helper-58's review). run_converge fails the run instead, in either precision's reference.
struct NonFiniteStep {
  int step = -1;
  std::string what;  // "loss", "MTP loss" or "gradient"
};
NonFiniteStep first_nonfinite_step(const std::vector<double>& loss, const std::vector<double>& mtp_loss,
                                   const std::vector<std::vector<double>>& grads);

// Per-tensor relative difference of two flat gradient buffers (model/params.h).
using model::TensorDiff;
using model::tensor_rel_diff;

// The fixed-width agreement table of a report.
std::string converge_table(const nlohmann::json& report);

// Throws InputError unless `j` is a dcpbench.converge.v1 report (schema, context, dtype, steps,
// strategies with losses, reference first).
void validate_converge_report(const nlohmann::json& j, const std::string& what);

}  // namespace dcp::harness
