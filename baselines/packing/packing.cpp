// See packing.h.
#include "baselines/packing/packing.h"

#include "core/error.h"
#include "core/nvtx.h"

namespace dcp::baselines {

plan::Plan PackingPlanner::plan(const plan::Batch& batch, const plan::PlanConfig& config) const {
  DCP_NVTX_RANGE();
  plan::check_config(batch, config);
  const int64_t cap = static_cast<int64_t>(config.cp) * config.max_seqlen_per_rank;
  for (int64_t i = 0; i < batch.size(); ++i) {
    DCP_REQUIRE(batch.lengths[i] <= cap, "packing: sample ", i, " has length ", batch.lengths[i],
                " > cp*max_seqlen_per_rank = ", cap, " (largest length that fits static CP ", config.cp, ")");
  }

  // 1. Next-fit packing in the original order.
  std::vector<std::vector<int>> packs;
  std::vector<int> cur;
  int64_t cur_tokens = 0;
  for (int64_t i = 0; i < batch.size(); ++i) {
    const int64_t L = batch.lengths[i];
    const bool fits = cur_tokens + L <= cap && (!max_num_seqs_ || static_cast<int>(cur.size()) < *max_num_seqs_);
    if (fits) {
      cur.push_back(static_cast<int>(i));
      cur_tokens += L;
    } else {
      if (!cur.empty()) packs.push_back(std::move(cur));  // Megatron pushes an empty first pack here
      cur = {static_cast<int>(i)};
      cur_tokens = L;
    }
  }
  if (!cur.empty()) packs.push_back(std::move(cur));

  // 2. Pack count to a multiple of dp * V by splitting the latest multi-sample packs.
  const int64_t multiple = static_cast<int64_t>(config.dp) * config.vpp_group.value_or(1);
  const int64_t remainder = static_cast<int64_t>(packs.size()) % multiple;
  if (remainder != 0) {
    int64_t to_move = multiple - remainder;
    DCP_REQUIRE(static_cast<int64_t>(packs.size()) + to_move <= batch.size(), "packing: ", batch.size(),
                " samples cannot fill a multiple of dp*vpp_group = ", multiple,
                " packs (every DP replica needs a sample in every micro-batch)");
    int64_t i = static_cast<int64_t>(packs.size()) - 1;
    while (to_move > 0) {
      DCP_CHECK(i >= 0, "ran out of packs to split");  // unreachable: guarded by the count above
      if (packs[i].size() > 1) {
        const int sid = packs[i].back();
        packs[i].pop_back();
        packs.push_back({sid});
        --to_move;
      } else {
        --i;
      }
    }
  }

  // 3. Micro-batch i: DP replica d gets pack i*dp + d on its cp ranks.
  plan::Plan out;
  out.planner = name();
  out.config = config;
  out.dynamic = false;
  const size_t n_mb = packs.size() / config.dp;
  for (size_t i = 0; i < n_mb; ++i) {
    plan::MicroBatch mb;
    for (int d = 0; d < config.dp; ++d) {
      mb.groups.push_back(plan::Group{d * config.cp, config.cp, packs[i * config.dp + d]});
    }
    out.microbatches.push_back(std::move(mb));
  }
  return out;
}

}  // namespace dcp::baselines
