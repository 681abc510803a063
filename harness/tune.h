// `dcpbench run --tune` and `--sensitivity` (issue 8: "best against best" and how far the
// uncertain parameters move the answer).
//
// --tune: for every strategy, search its own knobs under the memory model and keep the setting
// with the smallest total step time over the scenario's steps whose every step has a valid plan
// that fits the GPU's memory. Knobs (tune_space()):
//   max_seqlen_per_rank M: powers of two from max(512, M0/8) to max(2*M0, max_seqlen), plus M0
//                          (the published value);
//   static CP size (static planners only; dp = pool / cp): powers of two dividing the pool with
//                          global_batch a multiple of dp;
//   VPP: 1 and every v > 1 with layers a multiple of pp*v (pp > 1);
//   only settings that hold a sample of max_seqlen tokens (padded as the planner sees it): cp * M
//   for static planners, DP x CP x M for dynamic ones (the published setting is always tried);
//   then, for each (cp, VPP), at the best M of those, M times 5/8, 3/4, 7/8 (steps of M/8 in the
//   octave below) and 5/4, 3/2, 7/4 (steps of M/4 in the octave above) (tune_refinement(), within
//   the range and the rule above), and the best of all is kept. Megatron takes any integer M; the
//   baselines' micro-batch counts and group sizes move with it, so a factor-2 grid alone left
//   packing up to 10%, megatron-pr2000 14% and megatron-dev 4% behind their best on Megatron's
//   example, while dcp falls with M to a plateau the powers of two reach.
//   Not searched: min_cp (Megatron's MIN_DYNAMIC_CONTEXT_PARALLEL_SIZE stays the scenario's).
//   The setting is picked on held-out batches: as many steps as the run, drawn from the stream
//   of another seed (tune_selection_seed), or, for a source that replays a pool in order
//   (megatron-mock, data::SourceKind::sequence, which has no seed), the `steps` batches before
//   the run's, and then run on the run's own batches, whose rows are
//   reported. Until 2026-12-06 it was picked on the steps it was reported on; a minimum over
//   40-80 settings of a noisy total is optimistic (the winner's curse), most for the strategies
//   whose step time moves most with the knobs and for scenarios with few steps (3 for
//   Llama-13B). A pick without numbers on a step of the run's batches (out of memory, no valid
//   plan) is reported so, as `--draws` reports the pick on further draws.
//   M's resolution: on Megatron's example at 32 / 64 GPUs packing at CP 4 picked on a 128-token
//   grid of M over the same selection batches is 1.2% faster / 0.7% slower on the run's batches
//   than its tuned row, dcp 0.1% faster at 32 (2026-12-06; in-sample the grid had read 2.4% / 3.2%
//   for packing, helper-18).
// The picked setting's rows on the run's batches are added with setting "tuned" and its knobs
// (results context "tune_pick": "held-out"); speedups of tuned rows are against the reference
// strategy's tuned rows. A strategy with no setting that has numbers on every selection batch
// gets its published-setting rows labelled tuned.
//
// --sensitivity: every uncertain cost-model parameter (sensitivity_parameters()) is scaled by 0.8
// and by 1.2, one at a time (efficiencies capped at 1), and the scenario re-simulated at the
// published setting under the variant, each strategy planning with the scenario's own model (a
// planner on the real cluster knows the calibration, not how far the hardware is from it: until
// 2026-11-28 dcp and nvidia-prototype planned with the variant, which favoured them, helper-32);
// the section reports, per strategy, the nominal speedup and its range over the
// variants, the parameter that moves it most, the variants where it has no number (oom, no valid
// plan), and whether the ranking of strategies by step time, or the set without numbers, changes
// (and which variants change it).
#pragma once

#include "harness/runner.h"

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace dcp::harness {

// The settings --tune tries for a strategy (dynamic: whether its planner is dynamic-CP).
std::vector<Setting> tune_space(const Scenario& s, int layers, bool dynamic);
// The second pass: M of `best` times each factor below (rounded), at its cp and VPP, within
// tune_space's range of M and its max_seqlen rule.
inline constexpr double kTuneRefineFactors[] = {0.625, 0.75, 0.875, 1.25, 1.5, 1.75};
std::vector<Setting> tune_refinement(const Scenario& s, const Setting& best, bool dynamic);

// The seed of the selection batches: steps 0 .. steps - 1 of this seed's data stream are
// independent of every step of the scenario's own seed (data/dataset.h: step t of seed x draws
// from Rng(hash_u64(x, t))), so of the run's batches and of every draw of --draws.
inline constexpr uint64_t kTuneSelectionSalt = 0x74756e652d73656cull;  // "tune-sel"
uint64_t tune_selection_seed(uint64_t seed);

// Tuned rows of every strategy of the prepared scenario (speedups not filled): each strategy's
// setting picked on the selection batches, run on p's batches. p.batches holds the selection
// batches during the search (one scenario's batches at a time, as the limits assume) and p's own
// again on return, also when it throws.
std::vector<ResultRow> run_tuned(PreparedScenario& p, const RunOptions& options,
                                 const plan::PlannerRegistry& registry);
// Draws the selection batches into p.batches (steps 0 .. p.steps - 1 of the selection seed's
// stream); an error names them.
void sample_selection_batches(PreparedScenario& p);
// The results context's "tune_pick" of a run with --tune, and of one without (no tuned rows).
inline constexpr const char* kTunePickHeldOut = "held-out";
inline constexpr const char* kTunePickNone = "none";
// How a results context's tuned settings were picked, as the table and the evaluation say it
// ("picked on held-out ..."): held-out, in-sample (no "tune_pick": written before 2026-12-06),
// not searched (a run without --tune, since 2026-12-07: its legend had said "in-sample"), or
// several of them (merged files: the values joined by " + ").
std::string tune_pick_phrase(const nlohmann::json& context);
// The same for a results file: "not searched" when it has no tuned row, whatever its context says
// (an old file without "tune_pick" and without --tune had read as in-sample).
std::string tune_pick_phrase(const ResultsFile& results);
// A results context value split into its parts, empty ones dropped: merged files join their values
// with " + ", and run's own lists (one calibration per scenario) with ",".
std::vector<std::string> context_value_parts(const std::string& v);

struct SensitivityParameter {
  std::string name;
  std::function<void(cost::CostModel&, double factor)> scale;
};
std::vector<SensitivityParameter> sensitivity_parameters();

inline constexpr double kSensitivityLow = 0.8;
inline constexpr double kSensitivityHigh = 1.2;

// The sensitivity of one scenario (one element of the section's "scenarios"): at the published
// setting ("speedups", "ranking", ...) and, when `tuned` names a setting per strategy (after
// --tune), at those settings held fixed ("tuned": the same fields; settings are not re-searched
// per variant).
nlohmann::json run_sensitivity(const PreparedScenario& p, const RunOptions& options,
                               const plan::PlannerRegistry& registry,
                               const std::map<std::string, Setting>& tuned = {});
// The setting each strategy's tuned rows were run at (from their knobs).
std::map<std::string, Setting> tuned_settings(const std::vector<ResultRow>& rows);
// The results file's "sensitivity" section around the per-scenario elements.
nlohmann::json sensitivity_section(const nlohmann::json& scenarios);

// Speedup of every strategy over the reference, mean and trimmed, as aggregate() gives them (the
// rows' reference must be `reference`; a speedup only where both have numbers on every step), and
// the ranking by total step time, from rows of one scenario and setting. Exposed for tests.
struct SpeedupSummary {
  std::map<std::string, double> speedup;  // strategies with numbers on every step (none without the reference's)
  std::map<std::string, double> trimmed;  // the same with Megatron's 10%-trimmed mean step time (aggregate.h)
  std::map<std::string, double> total_s;  // summed step time of the strategies with numbers on every step
  std::vector<std::string> ranking;       // fastest first; strategies without numbers last
  std::vector<std::string> without_numbers;  // oom or no valid plan on some step, in strategy order
};
SpeedupSummary summarize_speedups(const std::vector<ResultRow>& rows, const std::vector<std::string>& strategies,
                                  const std::string& reference);

// One study (the published or the tuned settings) from the nominal summary and each variant's
// ("gemm_efficiency x0.8", ...), in order: per strategy of `strategies`, "nominal" (null where it
// has no number nominally), "min"/"max" over the nominal and the variants where it has one (null
// if none), the same of the trimmed speedup ("trimmed_nominal", "trimmed_min", "trimmed_max":
// the statistic of Megatron's benchmark, which the table of its example compares),
// "widest_parameter", and "no_number_in": the variants (or "nominal") where it has none (itself
// or the reference oom or without a valid plan: a memory parameter shows only there).
// The ranking changes where a variant leaves a different set without numbers, or puts a strategy
// ahead of one the nominal ranking had before it by more than kRankingTolerance of their summed
// step times (a swap of strategies within it is a tie, not a change: three whose plans were the
// same differed by 7.5e-7 s and "changed" the ranking, helper-32); "ranking_swaps" names, per
// variant that has any, those pairs ({"ahead", "behind"}: who is now ahead of whom), so a reader
// of the study can say which strategies a parameter reorders. `reference_run`: whether the
// reference strategy is among `strategies` (false: "reference_missing", and no speedups exist).
// Exposed for tests.
inline constexpr double kRankingTolerance = 1e-3;
nlohmann::json merge_study(const SpeedupSummary& nominal,
                           const std::vector<std::pair<std::string, SpeedupSummary>>& variants,
                           const std::vector<std::string>& strategies, bool reference_run = true);

}  // namespace dcp::harness
