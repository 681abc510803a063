// A valid simulated result row of scenario "s" with step time t (tests of the aggregation, the
// sensitivity summary and the draws study build their files from these).
#pragma once

#include "harness/results.h"

#include <string>

namespace dcp::harness::testing_rows {

inline ResultRow row(const std::string& strategy, int step, double t) {
  ResultRow r;
  r.scenario = "s";
  r.strategy = strategy;
  r.step = step;
  r.plan_valid = true;
  r.source = "simulated:x@y";
  r.step_time_s = t;
  r.tflops_per_gpu = 1 / t;
  r.microbatches = 1;
  return r;
}

}  // namespace dcp::harness::testing_rows
