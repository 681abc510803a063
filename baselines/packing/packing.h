// "packing": static CP with THD packing, Megatron's DpBalancedScheduler.get_groups_and_subsamples
// (megatron/core/datasets/data_schedule.py, dev d48bd6be0a; reference §2.5).
//
// Megatron's decisions, reproduced:
//   1. next-fit in the original sample order: a pack takes samples while its token sum stays
//      <= cp*M (and, optionally, its sample count < max_num_seqs), else a new pack starts;
//   2. the pack count is made a multiple of dp*V (V = vpp_group or 1) by popping the LAST sample
//      of the latest pack holding more than one sample into a new single-sample pack at the end,
//      repeatedly (the same pack gives samples until it has one left, then the scan moves left);
//   3. micro-batch i, pool rank j gets pack i*dp + j/cp: DP replica d = j/cp, group of size cp.
// Megatron defects avoided (each has a test): a first sample longer than cp*M gives an EMPTY
// first pack and an over-budget pack (here: InputError naming the sample); running out of
// samples to move is a bare assert (here: InputError saying how many samples are needed).
// Where Megatron's `assert i >= 0` stops before splitting pack 0, this port may split pack 0
// too when that is what makes the count reachable, and returns a valid plan.
#pragma once

#include "plan/planner.h"

#include <optional>

namespace dcp::baselines {

class PackingPlanner : public plan::Planner {
 public:
  explicit PackingPlanner(std::optional<int> max_num_seqs = std::nullopt) : max_num_seqs_(max_num_seqs) {}
  std::string name() const override { return "packing"; }
  bool dynamic() const override { return false; }
  plan::Plan plan(const plan::Batch& batch, const plan::PlanConfig& config) const override;

 private:
  std::optional<int> max_num_seqs_;
};

}  // namespace dcp::baselines
