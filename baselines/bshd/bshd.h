// "bshd": static CP without packing. Every sample is padded to max_seqlen (--max-seqlen, or the
// longest sample when not given) and runs alone on one CP group of size cp: micro-batch i gives
// DP replica d sample i*dp + d, in the original order. This is the padded [b, s, h, d] layout of
// classic Megatron CP training with micro-batch size 1.
//
// Without --max-seqlen the longest sample is rounded up to a multiple of 2 x cp (cp > 1).
// Requirements (InputError otherwise, naming the value): max_seqlen/cp <= M (the padded sample
// must fit a rank's budget), max_seqlen a multiple of 2 x cp when cp > 1 (zigzag chunks) and the
// sample count a multiple of dp*V (no DP replica may idle). Plan::pad_to carries the padded
// length: the validity rules count it (plan/validate.h rule 7), the simulator charges it for
// compute, memory and communication (useful FLOPs stay on real lengths), the executor lays out
// pad_to rows per sample.
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
