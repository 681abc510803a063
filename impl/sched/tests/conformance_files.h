// The conformance cases of scenarios/conformance/ for the C++ tests of the ports: one home for
// the inputs of reference §7 and §8 (the generator writes them, the tests read them).
#pragma once

#include "plan/conformance.h"

#include <string>

namespace dcp::sched::testing_cases {

inline std::string conformance_dir() { return DCP_CONFORMANCE_DIR; }

// One case by name (file name without .json).
inline plan::conformance::Case load(const std::string& name) {
  return plan::conformance::read_case(conformance_dir() + "/" + name + ".json");
}

}  // namespace dcp::sched::testing_cases
