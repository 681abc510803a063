// Faithful port of Megatron-LM dev's Dynamic-CP scheduler ("megatron-dev"):
// DefaultDynamicCPScheduler.get_groups_and_subsamples looping next_hdp_group_packing_aware,
// NVIDIA/Megatron-LM PR #5154 (d2e7ec5b88) through dev head d48bd6be0a,
// megatron/core/datasets/data_schedule_utils.py (reference §2.1, §2.3).
//
// Same micro-batches, groups and pack order as Megatron wherever Megatron returns a valid plan;
// see megatron_dev.cpp for the non-power-of-two pools and the other §7 cases.
#pragma once

#include "plan/plan.h"
#include "sched/megatron_common.h"

#include <vector>

namespace dcp::sched {

// One next_hdp_group_packing_aware call on `input` (any order; it is stably sorted first).
megatron::CallResult megatron_dev_next_group(const std::vector<megatron::SeqItem>& input,
                                             const plan::PlanConfig& config, const plan::Batch& batch);

// The whole scheduler: check_config, check_fits, the call loop, VPP alignment; a valid plan.
plan::Plan megatron_dev_plan(const plan::Batch& batch, const plan::PlanConfig& config);

}  // namespace dcp::sched
