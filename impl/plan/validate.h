// One validity check for every plan (DESIGN.md "Plan validity"), used by every test, by
// `dcpbench schedule`/`check`/`conform`, the Python module, and inside the planners (the Megatron
// ports and VPP alignment test each micro-batch with find_microbatch_violation before keeping
// Megatron's result; dcp drops candidate plans that find_violation rejects):
//   1. config sane: dp, cp >= 1, M >= 1, min_cp a power of two <= N, V >= 1;
//   2. every sample id in [0, G) appears in exactly one group of exactly one micro-batch;
//   3. groups of one micro-batch are disjoint aligned blocks [a*k, (a+1)*k) that cover every
//      rank, listed in ascending rank order, no group empty of samples (no empty rank);
//   4. each group size k is allowed: min_cp <= k, and k is a power of two, the whole pool N,
//      or the static cp (static-CP baselines);
//   5. tokens per rank of each group: sum(L)/k <= M (exact: sum(L) <= M*k);
//   6. with a VPP group V the micro-batch count is a multiple of V (Megatron's planners' rule;
//      vpp_group_violation below);
//   7. a padded plan (pad_to > 0, bshd) has pad_to a multiple of 2 x cp when cp > 1 (zigzag
//      chunks: the executor lays out exactly pad_to rows), pad_to = max_seqlen when max_seqlen is
//      set and no sample longer than pad_to, and rule 5 counts every sample at pad_to tokens.
// Reports the first violation, precisely (micro-batch, group, rank or sample). The happy path
// builds no strings (the ports call it once per micro-batch).
#pragma once

#include "plan/plan.h"

#include <optional>
#include <string>
#include <vector>

namespace dcp::plan {

// Empty if valid, else a one-line description of the first violation.
// The VPP micro-batch rule (Megatron's microbatch_group_size_per_vp_stage G): the count must be a
// multiple of G, as Megatron's packing schedulers make it (align_sample_id_groups,
// data_schedule.py:439-445 at d48bd6be0a), and, where the pipeline depth is known (pp > 0: the
// simulator; a plan does not know pp), G >= pp, as the interleaved schedule requires
// (schedules.py:1254-1262). The schedule itself also runs a count with a remainder >= pp (a short
// last group, schedules.py:1264-1275); no planner here makes one, so none is accepted. The one
// place the rule is written: validity (rule 6) and the simulator call it.
std::optional<std::string> vpp_group_violation(int64_t microbatches, int group, int pp = 0);

std::optional<std::string> find_violation(const Plan& plan, const Batch& batch);

// The same, and first that the plan was made for the `requested` config (a planner must not
// drop the VPP group or loosen M or min_cp and then pass its own checks).
std::optional<std::string> find_violation(const Plan& plan, const Batch& batch, const PlanConfig& requested);

// Rules 3-5 (and no sample twice) for one micro-batch of a dynamic plan under `config`; `index`
// only names the micro-batch in the message. Sample ids outside [0, G) are a violation.
// `lengths` is indexed by sample id (Batch::lengths).
std::optional<std::string> find_microbatch_violation(const std::vector<Group>& groups, const PlanConfig& config,
                                                     const std::vector<int64_t>& lengths, size_t index = 0);

// A plan that records the max_seqlen it was made for (plan.v1's optional "max_seqlen", a
// dcpbench.Plan) checked against a batch with a longer sample: the plan does not fit that batch, a
// violation ("sample i (length L) is longer than the plan's max_seqlen S"), where the same value
// given as --max-seqlen is bad input. Empty when the plan records none or every sample fits.
std::optional<std::string> longer_than_plan_max_seqlen(const Plan& plan, const Batch& batch);

// Throws dcp::Error("invalid plan from <planner>: <violation>") if invalid.
void validate(const Plan& plan, const Batch& batch);
void validate(const Plan& plan, const Batch& batch, const PlanConfig& requested);

}  // namespace dcp::plan
