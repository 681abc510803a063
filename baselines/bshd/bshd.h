// "bshd": static CP without packing. Every sample is padded to max_seqlen (--max-seqlen, or the
// longest sample when not given) and runs alone on one CP group of size cp: micro-batch i gives
// DP replica d sample i*dp + d, in the original order. This is the padded [b, s, h, d] layout of
// classic Megatron CP training with micro-batch size 1.
//
// Requirements (InputError otherwise, naming the value): max_seqlen/cp <= M (the padded sample
// must fit a rank's budget) and the sample count a multiple of dp*V (no DP replica may idle).
// The plan's token-budget check uses real lengths; Plan::pad_to carries the padded length, which
// the simulator charges for compute, memory and communication (useful FLOPs stay on real lengths).
#pragma once

#include "plan/planner.h"

namespace dcp::baselines {

class BshdPlanner : public plan::Planner {
 public:
  std::string name() const override { return "bshd"; }
  bool dynamic() const override { return false; }
  plan::Plan plan(const plan::Batch& batch, const plan::PlanConfig& config) const override;
};

// The padded length bshd charges for every sample.
int64_t bshd_padded_length(const plan::Batch& batch, const plan::PlanConfig& config);

}  // namespace dcp::baselines
