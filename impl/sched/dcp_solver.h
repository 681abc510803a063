// "dcp": our Dynamic-CP solver. Free to do better than Megatron's greedy (DESIGN.md "Our solver").
//
// Objective: the simulated step time under the caller's cost model, within its memory model
// (PlannerOptions::estimate: step time + fits; else step_time_s; else the built-in 1F1B estimate
// below). A plan that does not fit is never returned when a fitting candidate was found.
//
// Algorithm (dcp_solver.cpp orchestrates; dcp_search.{h,cpp} hold packing and local search):
//   1. Time per rank t(L, k) of a sample of L tokens on a CP group of k ranks: the harness's
//      marginal time per rank (PlannerOptions::sample_time_s) or the built-in FLOP ratio below;
//      memoised per distinct length and group size.
//   2. Micro-batch counts m: candidates from the token lower bound m_lo = ceil(sum L / (N cap))
//      ({1, 1.1, 1.25, 1.5, 2, 3, 4} x m_lo) and the pipeline-aware counts {1, 2, 4, 8, 16} x pp,
//      rounded up to multiples of vpp_group and at most G; a count that cannot hold the batch is
//      skipped and counts grow until one does.
//   3. Per count: CP size per sample by marginal step time: the level k >= kmin (the smallest
//      group holding L within the token cap) minimising k t(L,k) / (N m) (its share of the
//      balanced micro-batch time) + max(0, t(L,k) - target) (how far it alone exceeds that
//      target, a lower bound on its micro-batch's critical path); target = the balanced time
//      per micro-batch, and with a simulator also 2x and 4x it (fewer, smaller groups).
//   4. Longest-processing-time-first placement (by k t(L, k)): a sample opens a new aligned
//      group of its size in the first micro-batch with a free block of that size (long samples
//      together, short ones together: each micro-batch balanced within itself), or joins the
//      lightest existing group of a size in [kmin, k] with token room, whichever leaves the
//      smaller load per rank (ties: the new group); then smaller sizes down to kmin; as a last
//      resort a larger group with room. Buddy bookkeeping per micro-batch (used ranks per block
//      and level, forward-only cursors: blocks are only consumed), lazy heaps of groups per
//      level (the 4 lightest probed, those without room parked beside the heap: JoinProbe in
//      dcp_search.h; then the one with the most room). O(G log G + G levels log G + m N
//      levels). With a simulator, a second placement per count and target is also built
//      ("spread": the micro-batch with the least work, joins of any size >= kmin).
//   5. Empty ranks are covered by merging the groups of the smallest enclosing block that holds
//      work into one group (memory per rank only shrinks), so every state is a valid plan.
//   6. Finalists: the best 4 packings by the simulator when the caller gives one (every packed
//      count is simulated; with the memory model fitting plans rank first), else by the 1F1B
//      estimate (S + (pp-1) S / m) / pp of the surrogate S = sum over micro-batches of their
//      critical path (the largest time per rank of a group): the best 2 then. Megatron's own plans
//      (megatron-dev, megatron-pr2000: the portfolio) are scored as they are and join the
//      finalists as seeds of the local search.
//   7. Local search on each finalist (critical micro-batches first; in each, its critical group):
//      move one of its samples to another group (the 6 targets with the most slack per size),
//      swap it with one of the first 8 samples of such a group, split the group into its child
//      blocks (LPT), or merge its buddy block into one group. A step is applied only if it lowers
//      S, or keeps S and lowers sum(size x load^2) (plateaus: several groups share a critical
//      path); so the search never raises the surrogate, terminates, and the state is always a
//      valid plan (anytime for S; not for the simulated step the winner is picked by, which a
//      longer search can raise: README, helper-84's trial). Budget: --time-budget-ms, by
//      default 1 ms without a simulator and 25 ms with one (kDcpSimulatedDefaultBudgetUnits),
//      shared among the finalists and seeds of a token cap (each cap that memory forces, step
//      10, gets the whole budget again).
//   8. Pipeline-aware order (pp > 1 with a simulator): the order of micro-batches does not
//      change the surrogate but does change a 1F1B pipeline (it stalls on micro-batches of
//      unequal length). Candidates are simulated in pyramid order by critical path (light ...
//      heavy ... light); the finalists after the search and the winner are simulated in nine
//      orders (pyramid, descending, ascending, alternating, valley, and four tail-light
//      pyramids with 2, 3, 5 or 8 light micro-batches at the back per one at the front: the
//      fill is one micro-batch's forward, the drain the backwards, 2-3x a forward, of the last
//      pp - 1) and keep the best.
//   9. The best scored plan wins: the finalists before and after the search and the portfolio
//      plans, fitting ones first, so under the caller's scorer dcp is never worse than Megatron's
//      plans (whenever the portfolio runs, see below).
//  10. Memory: when no candidate fits, steps 2-9 rerun with a smaller token cap per rank
//      (0.75, 0.5, 0.375, 0.25, 0.125 x M, never below what the longest sample needs) until one
//      fits; if none does, the best non-fitting plan is returned (the harness reports oom).
//  11. Pipeline ramp on the winner (pp > 1, no VPP, with a simulator): a 1F1B pipeline's fill
//      and drain scale with its first and last micro-batch, so up to 6 rounds split one of the
//      3 lightest micro-batches whose groups all hold two or more samples (each group's samples
//      into two halves of near-equal load on the same ranks) and move the halves to the ends
//      (front and back, both front or both back), keeping a candidate only if the scorer rates
//      it better. 0 to -2.9% simulated step on the published vpp-1 scenarios (README); with VPP
//      it was slower (dcp_search.h, pipeline_ramp). Up to 54 more simulations per plan. The
//      ordering of step 8 also runs on the winner first.
//
// Portfolio cost: Megatron's greedy is O(G m) (one pass over the remaining samples per
// micro-batch: 4.9 s for both ports at G = 262144 on 64 ranks on the 2-core VM), so it runs when
// G x m_lo <= 2^25 (scaled up by a budget above the default of the mode, with or without a
// simulator); beyond, dcp relies on its own
// packing and search only.
// Budget and determinism: the local search counts work units (one candidate step evaluated; a
// re-sort of the slack lists counts groups/8). PlannerOptions::time_budget_ms converts to units
// by the fixed calibration kDcpUnitsPerMs (measured on the project's 2-core machine, see below),
// so the same input and budget give the same plan on any machine; the wall time of the search
// is only approximately the budget, and packing, scoring and the portfolio are outside it. A
// step started before the budget ran out is finished (overshoot: one step's evaluations).
// No randomness; ties broken by index.
//
// Any pool size N: group sizes follow plan/geometry.h (powers of two dividing N, and N).
#pragma once

#include "plan/planner.h"

#include <cstdint>

namespace dcp::sched {

// Work units per millisecond of local search. Measured with `dcpbench schedule --time-budget-ms`
// (RelWithDebInfo, this project's 2-core VM, idle): the search on 2048 log-normal samples on 64
// ranks ran 500k units in 3.5-4 ms (~125k-140k units/ms); with another job on the cores, about
// half as fast.
inline constexpr double kDcpUnitsPerMs = 125000;
// Default budget when PlannerOptions::time_budget_ms is 0 and no simulator scores the plans:
// 1 ms of search by the calibration above, small enough for the scale targets (2048 samples on
// 64 ranks in <= 10 ms in total).
inline constexpr int64_t kDcpDefaultBudgetUnits = static_cast<int64_t>(1 * kDcpUnitsPerMs);
// Default budget when a simulator scores the candidates (PlannerOptions::estimate or
// step_time_s, as `dcpbench run` gives them): 25 ms. There the simulations already take 5 ms
// (Megatron's example) to ~0.9 s (Llama-13B at PP 8) per plan, and async planning hides every
// plan but the first step's behind the previous step (seconds), so the 1 ms default only cut the
// search short: measured with `dcpbench run --time-budget-ms B --strategies dcp` on every shipped
// scenario (published settings, 2026-11-27, 2 finalists), B = 25 and B = 100 gave the same mean
// step within 0.03%, while B = 1 was up to 1.1% slower (prose-pydoc-llama3-8b 6.506 s -> 6.448 s,
// llama13b-github 20.26 -> 20.07 s, prose-sotu 9.44 -> 9.34 s).
inline constexpr int64_t kDcpSimulatedDefaultBudgetUnits = static_cast<int64_t>(25 * kDcpUnitsPerMs);
// Units for a budget in milliseconds (<= 0: the default, kDcpSimulatedDefaultBudgetUnits when
// `simulated`, else kDcpDefaultBudgetUnits).
int64_t dcp_budget_units(double time_budget_ms, bool simulated = false);

class DcpPlanner : public plan::Planner {
 public:
  explicit DcpPlanner(plan::PlannerOptions options = {}) : options_(std::move(options)) {}
  std::string name() const override { return "dcp"; }
  bool dynamic() const override { return true; }
  bool searches() const override { return true; }  // its local search (time_budget_ms)
  plan::Plan plan(const plan::Batch& batch, const plan::PlanConfig& config) const override;

 private:
  plan::PlannerOptions options_;
};

// Built-in time model when no cost model is given: t(L, k) = (L + L^2 / 62000) / k + comm, in
// units of "one token's linear work". 62000 is where Llama-13B's per-token attention FLOPs
// (6*n_l*q*L, Megatron formula) equal its linear FLOPs per token (6*n_l*(h*(q+2kv)+q*h+3*h*F)):
// 317M / 5120 ~ 62k. comm = 0.02 * L / k per extra rank step when k > 1 (ring KV traffic not
// hidden for short local chunks), a small bias toward small groups.
double dcp_default_sample_time(int64_t length_tokens, int cp_size);

}  // namespace dcp::sched
