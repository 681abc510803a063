// See rank_share.h.
#include "sim/rank_share.h"

#include "core/error.h"

#include <algorithm>

namespace dcp::sim {

RankShare rank_share(const plan::Plan& plan, const plan::Batch& batch, const cost::CostModel& cm, int pool_rank,
                     int pp_stage) {
  const auto& c = cm.cluster;
  DCP_REQUIRE(pool_rank >= 0 && pool_rank < c.pool(), "rank ", pool_rank, " is outside the pool of ", c.pool(),
              " ranks (dp x cp)");
  DCP_REQUIRE(pp_stage >= 0 && pp_stage < c.pp, "pipeline stage ", pp_stage, " is outside [0, ", c.pp, ")");
  const ScheduleInput in = build_schedule_input(plan, batch, cm);
  RankShare share;
  share.pool_rank = pool_rank;
  share.pp_stage = pp_stage;
  share.last_stage = pp_stage == c.pp - 1;
  for (int chunk = 0; chunk < c.vpp; ++chunk) share.layers += cost::layers_of_virtual_stage(cm.model, c, chunk * c.pp + pp_stage);
  for (size_t m = 0; m < plan.microbatches.size(); ++m) {
    const auto& groups = plan.microbatches[m].groups;
    for (size_t gi = 0; gi < groups.size(); ++gi) {
      const plan::Group& g = groups[gi];
      if (pool_rank < g.first_rank || pool_rank > g.last_rank()) continue;
      RankMicrobatch r;
      r.microbatch = static_cast<int>(m);
      r.first_rank = g.first_rank;
      r.cp_size = g.cp_size;
      r.cp_rank = pool_rank - g.first_rank;
      r.samples = g.samples;
      const int64_t pad = 2 * static_cast<int64_t>(g.cp_size);
      for (int id : g.samples) {
        const int64_t L = std::max(batch.lengths[static_cast<size_t>(id)], plan.pad_to);
        r.lengths.push_back(L);
        r.local_tokens += (L + pad - 1) / pad * pad / g.cp_size;
      }
      for (int chunk = 0; chunk < c.vpp; ++chunk) r.predicted += in.cost[m][gi][static_cast<size_t>(chunk * c.pp + pp_stage)];
      share.busy_s += r.predicted.fwd_s + r.predicted.bwd_s;
      share.microbatches.push_back(std::move(r));
      break;
    }
  }
  return share;
}

int busiest_pool_rank(const StepResult& r) {
  DCP_CHECK(!r.rank_busy_s.empty(), "busiest_pool_rank: no per-rank busy times");
  return static_cast<int>(std::max_element(r.rank_busy_s.begin(), r.rank_busy_s.end()) - r.rank_busy_s.begin());
}

int busiest_stage(const StepResult& r, int pool_rank, int pool) {
  const auto& gpu = r.schedule.gpu;
  DCP_CHECK(pool > 0 && gpu.size() % static_cast<size_t>(pool) == 0 && pool_rank >= 0 && pool_rank < pool,
            "busiest_stage: rank ", pool_rank, " of a pool of ", pool, " over ", gpu.size(), " GPUs");
  const int stages = static_cast<int>(gpu.size()) / pool;
  const auto own = [](const GpuTime& t) { return t.busy_s() - t.sync_s - t.iteration_s; };  // as rank_busy_s
  int best = 0;
  for (int s = 1; s < stages; ++s)
    if (own(gpu[static_cast<size_t>(s) * pool + pool_rank]) > own(gpu[static_cast<size_t>(best) * pool + pool_rank]))
      best = s;
  return best;
}

}  // namespace dcp::sim
