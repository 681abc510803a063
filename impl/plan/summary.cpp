// See summary.h.
#include "plan/summary.h"

#include <algorithm>

namespace dcp::plan {

PlanStats plan_stats(const Plan& plan, const Batch& batch) {
  PlanStats st;
  const int n = plan.config.pool();
  for (const auto& L : batch.lengths) st.total_workload += static_cast<double>(L) * static_cast<double>(L);
  for (const auto& mb : plan.microbatches) {
    MicroBatchStats ms;
    double sum_w = 0, sum_t = 0;
    for (const auto& g : mb.groups) {
      double w = 0, t = 0;
      for (int s : g.samples) {
        const double L = static_cast<double>(batch.lengths[s]);
        w += L * L / g.cp_size;
        t += L / g.cp_size;
        st.cp_size_histogram[g.cp_size] += 1;
      }
      ms.max_rank_workload = std::max(ms.max_rank_workload, w);
      ms.max_rank_tokens = std::max(ms.max_rank_tokens, t);
      sum_w += w * g.cp_size;
      sum_t += t * g.cp_size;
    }
    ms.mean_rank_workload = n > 0 ? sum_w / n : 0;
    ms.mean_rank_tokens = n > 0 ? sum_t / n : 0;
    ms.groups = static_cast<int>(mb.groups.size());
    st.microbatches.push_back(ms);
  }
  return st;
}

}  // namespace dcp::plan
