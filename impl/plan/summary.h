// Plan statistics for the plan JSON "summary" and the harness:
// per micro-batch max / mean rank workload (sum L^2/k, the Megatron scheduler's cost unit) and
// tokens per rank (sum L/k), and the CP-size histogram (samples per CP size).
#pragma once

#include "plan/plan.h"

#include <map>
#include <vector>

namespace dcp::plan {

struct MicroBatchStats {
  double max_rank_workload = 0;   // max over ranks of sum L^2/k
  double mean_rank_workload = 0;
  double max_rank_tokens = 0;     // max over ranks of sum L/k
  double mean_rank_tokens = 0;
  int groups = 0;
};

struct PlanStats {
  std::vector<MicroBatchStats> microbatches;
  std::map<int, int> cp_size_histogram;  // cp size -> number of samples
  double total_workload = 0;             // sum over samples of L^2 (CP-independent)
};

PlanStats plan_stats(const Plan& plan, const Batch& batch);

}  // namespace dcp::plan
