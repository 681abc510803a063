// The list of scheduler conformance cases that gen_conformance turns into
// scenarios/conformance/*.json: hand cases (reference §7 defects, Megatron's §8 unit tests) and
// seeded generated families. See gen_conformance.cpp for where each expectation comes from.
#pragma once

#include "plan/conformance.h"
#include "plan/plan.h"

#include <optional>
#include <string>
#include <vector>

namespace dcp::sched::conformance_gen {

struct Spec {
  std::string name;  // file name without .json
  std::string description;
  std::string origin;
  std::vector<std::string> tags;
  plan::Batch batch;
  plan::PlanConfig config;
  // Hand-written valid-or-error expectation (a defect whose outcome is stated, not computed).
  std::optional<plan::conformance::Must> must;
  std::string defect;    // also used as the defect text of a computed valid-or-error case
  std::string megatron;  // what Megatron does
  std::string correct;   // what a correct scheduler must do
  // Megatron's own unit test states the dev plan: the generator fails if its transcription disagrees.
  std::optional<plan::RankLists> expected_dev;
};

// Every case, in a fixed order (names unique).
std::vector<Spec> all_specs();

}  // namespace dcp::sched::conformance_gen
