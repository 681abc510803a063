// See bshd.h.
#include "baselines/bshd/bshd.h"

#include "core/error.h"
#include "core/nvtx.h"

#include <algorithm>

namespace dcp::baselines {

int64_t bshd_padded_length(const plan::Batch& batch, const plan::PlanConfig& config) {
  if (config.max_seqlen) return *config.max_seqlen;
  int64_t m = 0;
  for (auto L : batch.lengths) m = std::max(m, L);
  const int64_t chunks = config.cp > 1 ? 2 * int64_t{config.cp} : 1;  // zigzag: 2 cp chunks
  return (m + chunks - 1) / chunks * chunks;
}

plan::Plan BshdPlanner::plan(const plan::Batch& batch, const plan::PlanConfig& config) const {
  DCP_NVTX_RANGE();
  plan::check_config(batch, config);
  const int64_t padded = bshd_padded_length(batch, config);
  // Megatron's CP splits every padded sequence into 2 x cp zigzag chunks, so the padded length
  // must divide by 2 x cp (the executor would otherwise round each sample up beyond pad_to).
  DCP_REQUIRE(config.cp == 1 || padded % (2 * int64_t{config.cp}) == 0, "bshd: max_seqlen ", padded,
              " is not a multiple of 2 x cp = ", 2 * int64_t{config.cp},
              " (context parallelism splits each padded sample into 2 x cp chunks)");
  DCP_REQUIRE(padded <= static_cast<int64_t>(config.cp) * config.max_seqlen_per_rank, "bshd: padded length ",
              padded, " over cp ", config.cp, " exceeds max_seqlen_per_rank ", config.max_seqlen_per_rank);
  const int64_t multiple = static_cast<int64_t>(config.dp) * config.vpp_group.value_or(1);
  DCP_REQUIRE(batch.size() % multiple == 0, "bshd: sample count ", batch.size(),
              " is not a multiple of dp*vpp_group = ", multiple, " (every DP replica needs one sample per micro-batch)");
  plan::Plan out;
  out.planner = name();
  out.config = config;
  out.dynamic = false;
  out.pad_to = padded;  // the simulator and the executor run every sample at the padded length
  const int64_t n_mb = batch.size() / config.dp;
  for (int64_t i = 0; i < n_mb; ++i) {
    plan::MicroBatch mb;
    for (int d = 0; d < config.dp; ++d) {
      mb.groups.push_back(plan::Group{d * config.cp, config.cp, {static_cast<int>(i * config.dp + d)}});
    }
    out.microbatches.push_back(std::move(mb));
  }
  return out;
}

}  // namespace dcp::baselines
