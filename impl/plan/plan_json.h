// Plan JSON, schema "dcpbench.plan.v1" (DESIGN.md "dcpbench schedule"):
// {"schema", "planner", "dp", "cp", "pool", "max_seqlen_per_rank", "min_cp", "vpp_group",
//  "microbatches": [{"groups": [{"ranks": [first..last], "cp_size": k, "samples": [ids]}]}],
//  "summary": {...}}   (summary.dynamic: false for static-CP plans)
#pragma once

#include "plan/plan.h"

#include <nlohmann/json_fwd.hpp>

namespace dcp::plan {

// summary_extra is merged into "summary" (e.g. solve_ms measured by the caller).
nlohmann::json plan_to_json(const Plan& plan, const Batch& batch, const nlohmann::json& summary_extra);

// Reads the "microbatches" and config keys back (readers ignore unknown fields). Every integer is
// range-checked (dp, cp, min_cp, vpp_group, cp_size in [1, kMaxPool], first rank in [0, kMaxPool),
// M in [1, kMaxTokensPerRank], sample ids in [0, kMaxBatchSamples)); any problem is an InputError.
// Read the file with core's read_json_file (size and nesting bounded) first.
Plan plan_from_json(const nlohmann::json& j);

}  // namespace dcp::plan
