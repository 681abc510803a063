// Faithful port of Megatron-LM PR #2000's Dynamic-CP scheduler ("megatron-pr2000"):
// DefaultDynamicCPScheduler.get_groups_and_subsamples looping next_hdp_group (bucket-based),
// NVIDIA/Megatron-LM commit 2d6e946bab (dev, 2026-04-07), megatron/core/datasets/
// data_schedule_utils.py L602-869 and data_schedule.py (reference §2.1, §2.2).
// The part-1 class version (BalancedCPScheduler in pipeline_parallel/hybrid_cp_schedule.py)
// makes the same decisions.
//
// Same micro-batches, groups and pack order as Megatron wherever Megatron returns a valid plan.
// Where it does not (reference §7), one call's micro-batch is replaced by DEV's
// fill_with_full_dpxcp_group on that call's input (all selected samples on the whole pool), which
// is always valid; see megatron_pr2000.cpp for the exact triggers.
#pragma once

#include "plan/plan.h"
#include "sched/megatron_common.h"

#include <cstdint>
#include <vector>

namespace dcp::sched {

// dcp_make_buckets_equal on a descending-sorted input: the buckets as [begin, end) index ranges
// of `input`, in order.
struct BucketRange {
  int begin = 0;
  int end = 0;
};
std::vector<BucketRange> megatron_pr2000_buckets(const std::vector<megatron::SeqItem>& input,
                                                 int64_t max_seqlen_per_rank, int min_cp);

// One next_hdp_group call on `input` (sorted descending, as Megatron passes it).
megatron::CallResult megatron_pr2000_next_group(const std::vector<megatron::SeqItem>& input,
                                                const plan::PlanConfig& config, const plan::Batch& batch);

// The whole scheduler: check_config, check_fits, the call loop, VPP alignment; a valid plan.
plan::Plan megatron_pr2000_plan(const plan::Batch& batch, const plan::PlanConfig& config);

}  // namespace dcp::sched
