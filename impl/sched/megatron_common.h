// Shared pieces of the two Megatron-LM Dynamic-CP scheduler ports (megatron_pr2000, megatron_dev):
// the CP-size rule and workload in Megatron's own float arithmetic, the per-call micro-batch
// representation, the full-pool fallback, and the per-micro-batch validity test that decides
// when a port must leave Megatron's result (reference §7).
//
// Reproduces (NVIDIA/Megatron-LM, megatron/core/datasets/data_schedule_utils.py):
//   dcp_gpus_needed(L, M, min_cp) = max(min_cp, max(1, 2 ** ceil(log2(L / M))))   (float L/M)
//   dcp_get_total_workload(L, M, k) = (L * L) / k                                 (exact int, true div)
//   fill_with_full_dpxcp_group (DEV): greedy over the sorted input while sum(L / N) <= M.
//
// Invariants of a CallResult (one next_hdp_group* call): `groups` are disjoint blocks of ranks in
// ascending first_rank order that cover [0, N) when `valid`; `leftovers` keep the order in which
// Megatron returns them (descending length, stable), so the next call sees Megatron's input.
#pragma once

#include "plan/plan.h"

#include <cstdint>
#include <string>
#include <vector>

namespace dcp::sched::megatron {

// One (global id, length) tuple of Megatron's sample_id_seqlens.
struct SeqItem {
  int id = 0;
  int64_t len = 0;
};

// Megatron's dcp_gpus_needed in its float arithmetic: L / M is a float division, the exponent is
// ceil(math.log2(.)) (std::log2 is the same libm call CPython's math.log2 makes). Requires L >= 1.
int64_t cp_min_float(int64_t len, int64_t max_seqlen_per_rank, int min_cp);

// (L * L) / k as Python computes it: the integer square (exact for L < 2^31, Megatron's int32
// lengths) divided with correct rounding.
inline double workload(int64_t len, int64_t k) {
  return static_cast<double>(len * len) / static_cast<double>(k);
}

// Python's built-in sum() of a list of floats as CPython <= 3.11 computes it: left to right from
// the integer 0. (CPython 3.12 switched sum() of floats to Neumaier-compensated summation; the two
// differ only in the last bits of a total and only matter when a bucket test lands within a few
// ulps of the 1.1 * target boundary. The reference environment here runs Python 3.11.)
double python_sum(const std::vector<double>& values);

// Stable sort by length, descending: Python's sorted(list, key=lambda x: x[1], reverse=True)
// (reverse=True keeps equal keys in their input order, i.e. ascending global id here).
std::vector<SeqItem> sorted_desc(const plan::Batch& batch);

// Result of one scheduler call (one micro-batch).
struct CallResult {
  std::vector<plan::Group> groups;  // ascending first_rank
  std::vector<SeqItem> leftovers;   // next call's input, in Megatron's order
  bool fallback = false;            // true if fill_with_full_dpxcp_group produced `groups`
};

// DEV's fill_with_full_dpxcp_group: takes samples of `input` in order while the running sum of
// L / N stays <= M, puts all of them on the one N-rank group; every other sample is a leftover.
// Always places input[0] when input[0].len <= N * M (guaranteed by plan::check_fits).
CallResult fill_with_full_dpxcp_group(const std::vector<SeqItem>& input, int n, int64_t max_seqlen_per_rank);

// True if `groups` is a micro-batch that plan::validate accepts under `config`
// (plan::find_microbatch_violation: the one validity check).
bool microbatch_valid(const std::vector<plan::Group>& groups, const plan::PlanConfig& config, const plan::Batch& batch);

// Per-rank lists of one micro-batch (Megatron's sample_ids_per_gpu) from its groups.
std::vector<std::vector<int>> to_rank_lists(const std::vector<plan::Group>& groups, int n);

// The input checks both ports make: plan::check_config, plan::check_fits, and Megatron's int32
// sample counts and lengths.
void check_inputs(const plan::Batch& batch, const plan::PlanConfig& config);

// get_groups_and_subsamples, the driver loop both ports share: the samples sorted by length
// (stable, descending), then one `next_group` call per micro-batch on the previous call's
// leftovers until none is left (re-sorted first when `resort` and they are out of order: DEV
// sorts inside every call, PR2000 only once), then VPP alignment and the validity check
// (assemble_plan). Every call must place at least one sample.
using NextGroupFn = CallResult (*)(const std::vector<SeqItem>& input, const void* context);
plan::Plan run_scheduler(const plan::Batch& batch, const plan::PlanConfig& config, const std::string& planner,
                         NextGroupFn next_group, const void* context, bool resort);

// Plan from the micro-batches of a run, followed by VPP alignment when config.vpp_group > 1
// (vpp_align.h). Checks the result with plan::validate (an invalid plan is an internal error).
plan::Plan assemble_plan(std::vector<std::vector<plan::Group>> microbatches, const std::string& planner,
                         const plan::Batch& batch, const plan::PlanConfig& config);

}  // namespace dcp::sched::megatron
