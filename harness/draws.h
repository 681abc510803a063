// `dcpbench run --draws K`: how much a speedup depends on which global batches were drawn.
//
// A scenario's speedups are measured on `steps` sampled global batches (3 for the Llama-13B
// scenarios, 20 for Megatron's example, whose 8 samples per DP replica make a step's time swing
// with its few long samples). Another draw of the same distribution gives another number; a
// published measurement is itself one draw. --draws K re-runs each scenario on K - 1 further
// draws: draw d is steps [d * steps, (d + 1) * steps) of the scenario's data stream (each step's
// batch depends only on its step number and the seed, data/dataset.h), so the draws are
// independent and draw 0 is the run's own rows. Every strategy runs at the published setting and,
// with --tune, at its tuned setting held fixed (not re-searched per draw), as --sensitivity does.
//
// Per scenario, setting and strategy the section reports the speedup over the reference strategy
// of every draw ("values", draw order) and their spread: nominal (draw 0, equal to the
// aggregate's), median, p5, p95 (linear interpolation between order statistics, numpy's default
// rule), min and max; for the speedup of summed step times ("speedup", aggregate.h) and of
// Megatron's 10%-trimmed mean ("trimmed_speedup"); a draw where the strategy or the reference has
// an invalid or oom step gives no value. "ranking_held" counts the draws whose ranking by total
// step time (summarize_speedups, tune.h) equals draw 0's, "first_held" those whose fastest
// strategy is draw 0's.
// Cost: K times the published run (twice that with --tune); memory: one draw's batches at a time.
#pragma once

#include "harness/runner.h"

#include <map>
#include <nlohmann/json.hpp>
#include <vector>

namespace dcp::harness {

inline constexpr int kMaxDraws = 1000;

// {"nominal", "median", "p5", "p95", "min", "max", "values"} of the values (draw order kept in
// "values"); "nominal" is values[0]. Empty input: {"values": []}.
nlohmann::json spread_of(const std::vector<double>& values);

// Quantile q in [0, 1] of sorted values by linear interpolation between order statistics.
double quantile_sorted(const std::vector<double>& sorted, double q);

// The draws of one scenario: `own_rows` are the run's rows of this scenario (draw 0), `tuned`
// each strategy's tuned setting (empty without --tune). `p` is copied: its batches are redrawn.
nlohmann::json run_draws(const PreparedScenario& p, const RunOptions& options, const plan::PlannerRegistry& registry,
                         const std::vector<ResultRow>& own_rows, const std::map<std::string, Setting>& tuned);

// The results file's "draws" section around the per-scenario elements.
nlohmann::json draws_section(int draws, const nlohmann::json& scenarios);

}  // namespace dcp::harness
