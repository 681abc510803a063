// "dcp": our Dynamic-CP solver. Free to do better than Megatron's greedy (DESIGN.md "Our solver"):
//   * full cost per sample: a time per rank t(L, k) for a sample of L tokens on a CP group of k
//     ranks, from the harness's cost model (linear GEMM work + quadratic attention + exposed CP
//     communication, PlannerOptions::sample_time_s), or a built-in Llama-13B FLOP ratio;
//   * micro-batch count searched, not an accident of packing: candidates from the memory lower
//     bound up, scored by the simulator when given (PlannerOptions::step_time_s) or by a 1F1B
//     estimate (pipeline awareness: (sum of per-micro-batch critical paths + (pp-1) x their
//     mean) / pp);
//   * per candidate count m: a sample's CP size starts at the smallest that fits memory and
//     doubles while its time per rank exceeds the balanced target per micro-batch (and doubling
//     helps); then longest-processing-time-first placement over all micro-batches: a sample opens
//     a new aligned group in the least-loaded micro-batch that has a free block of its size
//     (buddy first-fit, lowest block first), or joins the existing group of any size >= its
//     minimum with memory room that leaves the smaller load per rank (ties: the new group);
//     a sample that fits nowhere at its chosen size retries the smaller sizes down to its
//     minimum; a count that still cannot hold the batch is skipped;
//   * ranks left empty are covered by merging the nearest non-empty buddy block into one group
//     (memory per rank only shrinks), so every plan is valid;
//   * portfolio: Megatron's own plans (megatron-dev, megatron-pr2000) are scored the same way and
//     kept if better, so under the caller's cost model dcp is never worse than them;
//   * any pool size N: group sizes follow plan/geometry.h (powers of two dividing N, and N).
// Deterministic: no randomness, ties broken by index.
#pragma once

#include "plan/planner.h"

namespace dcp::sched {

class DcpPlanner : public plan::Planner {
 public:
  explicit DcpPlanner(plan::PlannerOptions options = {}) : options_(std::move(options)) {}
  std::string name() const override { return "dcp"; }
  bool dynamic() const override { return true; }
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
