// Plan JSON, schema "dcpbench.plan.v1" (DESIGN.md "dcpbench schedule"):
// {"schema", "planner", "dp", "cp", "pool", "max_seqlen_per_rank", "min_cp", "vpp_group",
//  "microbatches": [{"groups": [{"ranks": [first..last], "cp_size": k, "samples": [ids]}]}],
//  "summary": {...}}   (summary.dynamic: false for static-CP plans)
// plus "max_seqlen" where the plan was made with one (left out otherwise; readers ignore unknown keys).
#pragma once

#include "plan/plan.h"

#include <nlohmann/json_fwd.hpp>

#include <optional>
#include <string>

namespace dcp::plan {

// summary_extra is merged into "summary" (e.g. solve_ms measured by the caller).
nlohmann::json plan_to_json(const Plan& plan, const Batch& batch, const nlohmann::json& summary_extra);

// Reads the "microbatches" and config keys back (readers ignore unknown fields). Every integer is
// range-checked (dp, cp, min_cp, vpp_group, cp_size in [1, kMaxPool], first rank in [0, kMaxPool),
// M in [1, kMaxTokensPerRank], sample ids in [0, kMaxBatchSamples)); any problem is an InputError
// of one line naming the key ("plan JSON: \"planner\" is missing"). A "schema" other than
// "dcpbench.plan.v1" is refused; a plan without one is read (answers of external planners).
// Read the file with core's read_json_file (size and nesting bounded) first.
Plan plan_from_json(const nlohmann::json& j);

// Where the "summary" of a plan.v1 file `j` (read into `plan`) disagrees with what plan_to_json
// writes for that plan and batch, or its "pool" with dp x cp: the first such key, its value and
// the recomputed one; nullopt when every key present agrees (a key left out is not checked;
// solve_ms and keys plan_to_json does not write are the writer's own). Counts (samples, tokens,
// micro-batches, groups) and the CP-size histogram must match exactly; the per-rank sums of
// L/k and L^2/k (tokens and workloads, their maxima and means) to a relative 1e-9: another
// writer may add them in another order.
std::optional<std::string> summary_violation(const nlohmann::json& j, const Plan& plan, const Batch& batch);

}  // namespace dcp::plan
