// Scheduler conformance cases as data (scenarios/conformance/*.json, schema
// "dcpbench.conformance.v1"): one file per case with its input, its expectation and its origin.
// Read by `dcpbench conform`, by the C++ tests of the Megatron ports (impl/sched/tests) and by
// the Python tests, so every case has one home. Format (scenarios/conformance/README.md):
//   {"schema": "dcpbench.conformance.v1", "name", "description", "origin", "tags": [...],
//    "input": {"seqlens": [L0, L1, ...], "dp", "cp", "max_seqlen_per_dp_cp_rank", "min_cp",
//              "vpp_group": V-or-null},
//    "expect": {"kind": "exact", "plans": {"megatron-dev": PLAN, "megatron-pr2000": PLAN}}
//           | {"kind": "valid-or-error", "must": "plan" | "error" | "plan-or-error",
//              "defect", "megatron", "correct"}}
// PLAN is Megatron's own format: per micro-batch, per rank (N = dp*cp lists), the sample ids.
// An exact case names the Megatron versions whose plan it holds (at least one); judged against
// another reference, or with none, it requires a valid plan. Inputs are not validated here:
// error cases carry bad values on purpose (length 0, min_cp 3, a sample larger than the pool).
#pragma once

#include "plan/plan.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace dcp::plan::conformance {

enum class Must { kPlan, kError, kPlanOrError };

struct Case {
  std::string file;  // path it was read from
  std::string name;
  std::string description;
  std::string origin;
  std::vector<std::string> tags;
  Batch batch;
  PlanConfig config;
  bool exact = false;                      // expect.kind == "exact"
  std::map<std::string, RankLists> plans;  // exact: Megatron's plan by version (planner name)
  Must must = Must::kPlan;                 // exact cases: kPlan
  std::string defect;                      // valid-or-error: the defect (reference §7 entry)
  std::string megatron;                    // valid-or-error: what Megatron does on this input
  std::string correct;                     // valid-or-error: what a correct scheduler must do
};

// Reads one case; InputError naming the file and the key on any problem.
Case read_case(const std::string& path);

// Every *.json file of `dir`, ordered by file name. InputError if the folder has none.
std::vector<Case> read_cases(const std::string& dir);

// What a scheduler did with a case.
struct Outcome {
  enum Kind { kPlan, kError, kCrash, kTimeout, kBadOutput } kind = kBadOutput;
  std::optional<Plan> plan;       // kPlan from a dcpbench planner or a dcpbench.plan.v1 answer
  std::optional<RankLists> lists;  // kPlan in Megatron's format (read for the case's config)
  std::string message;            // kError: its one line; kCrash, kTimeout, kBadOutput: what happened
};

const char* outcome_name(Outcome::Kind kind);

struct Verdict {
  bool pass = false;
  std::string reason;  // why it failed (first violation, first differing micro-batch, ...) or a note
};

// Judges an outcome. `reference`: the Megatron version whose exact plans are compared
// ("megatron-dev", "megatron-pr2000"); empty: exact cases only need a valid plan.
Verdict judge(const Case& c, const Outcome& outcome, const std::string& reference);

}  // namespace dcp::plan::conformance
