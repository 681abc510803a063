// See executor.h.
#include "exec/executor.h"

#include <cmath>

#include "core/error.h"
#include "core/nvtx.h"
#include "core/rng.h"
#include "model/batch.h"
#include "plan/validate.h"

namespace dcp::exec {

plan::Batch GlobalBatch::lengths() const {
  plan::Batch b;
  for (const auto& s : samples) b.lengths.push_back(static_cast<int64_t>(s.size()));
  return b;
}

template <typename T>
void ordered_all_reduce(comm::Communicator& pool, std::span<T> local) {
  const size_t n = local.size();
  const int size = pool.size();
  if (size == 1 || n == 0) return;
  std::vector<T> all(n * size);
  pool.all_gather(std::span<const T>(local.data(), n), std::span<T>(all));
  for (size_t i = 0; i < n; ++i) {
    T acc = all[i];
    for (int r = 1; r < size; ++r) acc += all[r * n + i];
    local[i] = acc;
  }
}

template <typename T>
Executor<T>::Executor(model::Model<T>& m, comm::Communicator& pool, comm::GroupRegistry& registry,
                      const model::AdamWHyper& hyper)
    : m_(m), pool_(pool), reg_(registry), opt_(m.params(), hyper) {
  DCP_CHECK(registry.pool_size() == pool.size() && registry.pool_rank() == pool.rank(),
            "Executor: the group registry is for pool rank ", registry.pool_rank(), " of ",
            registry.pool_size(), ", the pool communicator is rank ", pool.rank(), " of ", pool.size());
}

template <typename T>
StepStats Executor<T>::step(const plan::Plan& plan, const GlobalBatch& batch) {
  DCP_NVTX_RANGE();
  const plan::Batch lengths = batch.lengths();
  plan::validate(plan, lengths);
  DCP_REQUIRE(plan.config.pool() == pool_.size(), "plan from ", plan.planner, " is for a pool of ",
              plan.config.pool(), " ranks, the executor runs on ", pool_.size());
  const int rank = pool_.rank();
  StepStats st;
  for (const auto& s : batch.samples) {
    st.main_targets += model::main_targets(static_cast<int64_t>(s.size()));
    st.mtp_targets += model::mtp_targets(static_cast<int64_t>(s.size()));
  }
  DCP_REQUIRE(st.main_targets > 0, "global batch has no next-token target (every sample has "
              "fewer than 2 tokens)");
  const bool mtp = m_.config().mtp && st.mtp_targets > 0;
  model::LossScale scale;
  scale.main = 1.0 / static_cast<double>(st.main_targets);
  scale.mtp = mtp ? m_.config().mtp_loss_weight / static_cast<double>(st.mtp_targets) : 0.0;

  m_.params().zero_grads();
  double sums[4] = {0, 0, 0, 0};  // loss sums (main, MTP) and rows in the loss (main, MTP)
  for (const plan::MicroBatch& mb : plan.microbatches) {
    const plan::Group* mine = nullptr;
    for (const plan::Group& g : mb.groups) {
      st.group_sizes[g.cp_size] += 1;
      if (rank >= g.first_rank && rank <= g.last_rank()) mine = &g;
    }
    DCP_CHECK(mine != nullptr, "plan from ", plan.planner, ": no group holds rank ", rank);
    comm::Communicator& group = reg_.group(mine->cp_size);
    DCP_CHECK(reg_.group_first_rank(mine->cp_size) == mine->first_rank, "plan group at rank ",
              mine->first_rank, " of size ", mine->cp_size, " is not rank ", rank,
              "'s aligned group (starts at ", reg_.group_first_rank(mine->cp_size), ")");
    std::vector<std::span<const int32_t>> seqs;
    for (int id : mine->samples) seqs.emplace_back(batch.samples[id]);
    const model::MicroBatchInput in = model::make_microbatch_input(seqs, group, plan.pad_to);
    const model::LossSums s = m_.forward_backward(in, scale);
    sums[0] += s.main;
    sums[1] += s.mtp;
    sums[2] += static_cast<double>(s.main_rows);
    sums[3] += static_cast<double>(s.mtp_rows);
    ++st.microbatches;
  }
  ordered_all_reduce(pool_, m_.params().grads());
  ordered_all_reduce(pool_, std::span<double>(sums, 4));
  // Every target is counted once over the pool, by the rank whose shard holds it: the rows the
  // loss masks let through (the model's own count) must be the targets the scale divides by (a
  // target given to padding, or a scale from the wrong count, would otherwise leave the reference
  // and every plan equally wrong: helper-38's audit).
  DCP_CHECK(sums[2] == static_cast<double>(st.main_targets), "plan from ", plan.planner, ": ", sums[2],
            " next-token rows entered the loss, the global batch has ", st.main_targets, " targets");
  DCP_CHECK(!m_.config().mtp || sums[3] == static_cast<double>(st.mtp_targets), "plan from ", plan.planner, ": ",
            sums[3], " MTP rows entered the loss, the global batch has ", st.mtp_targets, " MTP targets");
  st.loss = sums[0] / static_cast<double>(st.main_targets);
  st.mtp_loss = mtp ? sums[1] / static_cast<double>(st.mtp_targets) : 0.0;
  double g2 = 0;
  for (T g : m_.params().grads()) g2 += static_cast<double>(g) * static_cast<double>(g);
  st.grad_norm = std::sqrt(g2);
  opt_.step(m_.params(), m_.kernels());
  check_replicas_agree(plan);
  return st;
}

// Every rank must hold bitwise the same parameters after the update (step 5 above). Compared by a
// hash of their bytes, gathered over the pool (Megatron's --check-weight-hash-across-dp-replicas-
// interval does the same across DP replicas): a reduction whose order differed by rank left the
// copies apart in their last bits, which no loss or gradient comparison on rank 0 can see
// (helper-38's audit).
template <typename T>
void Executor<T>::check_replicas_agree(const plan::Plan& plan) {
  if (pool_.size() == 1) return;
  const auto values = m_.params().values();
  const int64_t mine = static_cast<int64_t>(fnv1a(values.data(), values.size_bytes()));
  std::vector<int64_t> all(static_cast<size_t>(pool_.size()));
  pool_.all_gather(std::span<const int64_t>(&mine, 1), std::span<int64_t>(all));
  for (int r = 1; r < pool_.size(); ++r)
    DCP_CHECK(all[static_cast<size_t>(r)] == all[0], "after a step of the plan from ", plan.planner,
              ": the parameters of pool rank ", r, " differ from rank 0's (hash ", all[static_cast<size_t>(r)],
              " vs ", all[0], "); every rank must hold the same model");
}

template class Executor<float>;
template class Executor<double>;
template void ordered_all_reduce<float>(comm::Communicator&, std::span<float>);
template void ordered_all_reduce<double>(comm::Communicator&, std::span<double>);

}  // namespace dcp::exec
