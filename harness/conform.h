// `dcpbench conform`: runs a scheduler on every conformance case (impl/plan/conformance.h) and
// judges each answer. Two kinds of scheduler:
//   * a built-in planner of the registry, called in-process on a worker thread with a deadline;
//   * an external command speaking the JSON protocol of scenarios/conformance/README.md: one case
//     on stdin ({"schema": "dcpbench.conform.input.v1", "name", "seqlens", "dp", "cp",
//     "max_seqlen_per_dp_cp_rank", "min_cp", "vpp_group"}), and either exit 0 with one plan on
//     stdout (Megatron's format: per micro-batch, per rank, the sample ids; or a dcpbench.plan.v1
//     object), or a non-zero exit with exactly one line on stderr (a clear error). Anything else
//     (a signal, a traceback of several lines, no JSON, the deadline) is a failure.
#pragma once

#include "plan/conformance.h"
#include "plan/planner.h"

#include <nlohmann/json_fwd.hpp>

#include <string>

namespace dcp::harness {

// The stdin object of the protocol for one case.
nlohmann::json conform_input_json(const plan::conformance::Case& c);

// Reads a plan answer: a JSON array in Megatron's format, or a dcpbench.plan.v1 object. Returns
// kPlan, or kBadOutput naming the problem.
plan::conformance::Outcome read_plan_answer(const nlohmann::json& answer);

// Runs a built-in planner on the case. A planner that does not return within timeout_s is left
// running on a detached thread (*leaked set to true: the process must end with std::_Exit).
plan::conformance::Outcome run_builtin(const plan::Planner& planner, const plan::conformance::Case& c,
                                       double timeout_s, bool* leaked);

// Runs the external command on the case (subprocess.h).
plan::conformance::Outcome run_external(const std::string& command, const plan::conformance::Case& c,
                                        double timeout_s);

}  // namespace dcp::harness
