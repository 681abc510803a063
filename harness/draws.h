// `dcpbench run --draws K`: how much a speedup depends on which global batches were drawn.
//
// A scenario's speedups are measured on `steps` sampled global batches (3 for the Llama-13B
// scenarios; Megatron's example replays the 20 it measured, whose 8 samples per DP replica make a
// step's time swing with its few long samples). Another draw of the same distribution gives another number; a
// published measurement is itself one draw. --draws K re-runs each scenario on K - 1 further
// draws: draw d is steps [d * steps, (d + 1) * steps) of the scenario's data stream (each step's
// batch depends only on its step number and the seed, data/dataset.h; a replayed pool's,
// megatron-mock, on its step number alone: the pool's later batches, i.i.d. draws of its
// distribution), so the draws are independent and draw 0 is the run's own rows. Every strategy
// runs at the published setting and, with --tune, at its tuned setting held fixed (not
// re-searched per draw), as --sensitivity does.
//
// Per scenario, setting and strategy the section reports the speedup over the reference strategy
// of every draw ("values", one entry per draw in draw order, null where the draw has none) and
// the spread of the values it has: nominal (draw 0's; absent when draw 0 has none; equal to the
// aggregate's), median, p5, p95 (linear interpolation between order statistics, numpy's default
// rule), min and max; for the speedup of summed step times ("speedup", aggregate.h) and of
// Megatron's 10%-trimmed mean ("trimmed_speedup"). A draw where the strategy or the reference has
// an invalid or oom step gives no value; "oom_draws" and "invalid_draws" count the draws where the
// strategy had such a step (a tuned setting picked on the selection batches may not fit other batches).
// "ranking_held" counts the draws whose ranking by total step time (summarize_speedups, tune.h;
// exact ties by name) equals draw 0's, "first_held" those whose fastest strategy is draw 0's;
// both count draw 0 itself (the table prints them as "of the K - 1 other draws", one less).
// "without_numbers" lists draw 0's strategies with an oom or invalid step (ranked by name only:
// the table prints them apart), "reference_without_numbers_draws" the draws where the reference
// has no numbers (oom, invalid, or not in the run), so that no strategy has a speedup there.
// The tuned settings were picked on held-out selection batches (tune.h), so no draw favours them
// (until 2026-12-06 they were picked on draw 0's batches, which favoured them there).
// Cost: about K times the published run, plus K - 1 runs at the tuned settings with --tune (not
// K searches); memory: one draw's batches at a time (the run frees draw 0's before the draws).
// An ordered source (data::SourceKind::sequence, megatron-mock) reads its pool's later batches,
// and refuses (exit 2) a K whose batches would reach the ones --tune holds out (runner.cpp).
#pragma once

#include "harness/runner.h"

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace dcp::harness {

// {"values", "nominal", "median", "p5", "p95", "min", "max"} of one value per draw (nullopt: the
// draw has none; "values" keeps them, as null); "nominal" is draw 0's, absent when it has none;
// the statistics are over the values present, absent when there are none.
nlohmann::json spread_of(const std::vector<std::optional<double>>& per_draw);

// Quantile q in [0, 1] of sorted values by linear interpolation between order statistics.
double quantile_sorted(const std::vector<double>& sorted, double q);

// The study of one scenario at one choice of settings from its rows, one vector per draw (draw 0
// first): "strategies" (per strategy "speedup", "trimmed_speedup", "oom_draws", "invalid_draws"),
// "ranking" (draw 0's), "without_numbers", "ranking_held", "first_held",
// "reference_without_numbers_draws", "draws".
nlohmann::json draw_study(const std::vector<std::vector<ResultRow>>& rows_per_draw,
                          const std::vector<std::string>& strategies, const std::string& reference);

// The draws of one scenario: `own_rows` are the run's rows of this scenario (draw 0), `tuned`
// each strategy's tuned setting (empty without --tune). `p` is copied: its batches are redrawn.
nlohmann::json run_draws(const PreparedScenario& p, const RunOptions& options, const plan::PlannerRegistry& registry,
                         const std::vector<ResultRow>& own_rows, const std::map<std::string, Setting>& tuned);

// Reading a draws section back (the table, evaluate): the study of one scenario element at a
// setting ("published": the element itself; "tuned": its "tuned" member), null if it has none.
const nlohmann::json* draw_study_at(const nlohmann::json& scenario_element, const std::string& setting);
// One strategy's value of every draw of a study ("speedup" or "trimmed_speedup"), nullopt where
// the draw has none; empty when the study has no such strategy.
std::vector<std::optional<double>> draw_values(const nlohmann::json& study, const std::string& strategy,
                                               const char* which);

// The results file's "draws" section around the per-scenario elements.
nlohmann::json draws_section(int draws, const nlohmann::json& scenarios);

}  // namespace dcp::harness
