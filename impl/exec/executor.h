// The executor: one training step of a Plan on this rank of the DP x CP pool.
//
// Data flow per step (reference/megatron-dynamic-cp.md §1, steps 3-5 and the per-micro-batch
// get_batch; DESIGN.md "Data flow"):
//   1. the plan is checked against the batch and the pool (plan::validate; an invalid plan is
//      an error, never run);
//   2. for each micro-batch, this rank finds its group (the aligned block containing it), takes
//      the group's samples in pack order, builds the packed THD batch (each sample padded to a
//      multiple of 2*cp, or to plan.pad_to rows for the padded bshd layout), slices its zigzag
//      shard and runs Model::forward_backward with PackedSeqParams{..., cp_group = the
//      registry's group of that size}; gradients accumulate;
//   3. the loss is Megatron's per-token loss: every micro-batch is scaled by 1 / (real targets
//      of the whole global batch), so each token counts exactly once whichever rank holds it;
//      a sample that a group spreads over several ranks (fill_empty expansions, large CP) is
//      sharded, never duplicated, so its loss is counted once;
//   4. gradients and loss sums are reduced over the whole pool in a FIXED order: an all-gather
//      followed by a sum in rank order on every rank. The result is bitwise the same on every
//      rank, on every run and on every backend (threads or MPI: the same arithmetic in the same
//      order), which is what makes an 8-process MPI run reproduce the thread run bit for bit.
//      (The all-gather costs pool x parameters per rank: fine for the tiny model; a large model
//      would use a deterministic reduce-scatter instead.)
//   5. AdamW updates the replicated parameters identically on every rank (checked after every
//      step by a hash of the parameters gathered over the pool).
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "comm/communicator.h"
#include "comm/group_registry.h"
#include "model/model.h"
#include "model/optimizer.h"
#include "plan/plan.h"

namespace dcp::exec {

// One step's global batch: sample id i has the token ids samples[i].
struct GlobalBatch {
  std::vector<std::vector<int32_t>> samples;
  plan::Batch lengths() const;
};

struct StepStats {
  double loss = 0;       // main next-token loss: sum of CE / main_targets
  double mtp_loss = 0;   // MTP loss: sum of CE / mtp_targets (0 without MTP)
  int64_t main_targets = 0;
  int64_t mtp_targets = 0;
  int microbatches = 0;
  std::map<int, int> group_sizes;  // CP size -> groups of that size over all micro-batches
  double grad_norm = 0;            // L2 norm of the reduced gradient
};

template <typename T>
class Executor {
 public:
  // `pool`: this rank's communicator over the N = dp*cp ranks; `registry`: its groups.
  Executor(model::Model<T>& m, comm::Communicator& pool, comm::GroupRegistry& registry,
           const model::AdamWHyper& hyper);

  // Runs one training step of `plan` on `batch` and updates the parameters. Checks (dcp::Error
  // when broken) that the rows entering the loss are the batch's targets and that every rank
  // holds the same parameters afterwards (a hash gathered over the pool).
  StepStats step(const plan::Plan& plan, const GlobalBatch& batch);

  // Returns the model's parameters and the optimizer to their initial state (the values of the
  // model's seed, AdamW moments and step count 0): the next step trains bitwise as the first
  // step of a fresh executor (dcpbench converge starts each edge case here).
  void restart() {
    m_.params().reinitialize();
    opt_.reset();
  }

  // The reduced gradient of the last step (what the optimizer used), identical on every rank.
  std::span<const T> last_grads() const { return m_.params().grads(); }
  model::Model<T>& model() { return m_; }

 private:
  model::Model<T>& m_;
  comm::Communicator& pool_;
  comm::GroupRegistry& reg_;
  model::AdamW<T> opt_;

  void check_replicas_agree(const plan::Plan& plan);
};

// Sum over ranks in rank order of `local` (same length on every rank), via an all-gather:
// bitwise identical on every rank and backend.
template <typename T>
void ordered_all_reduce(comm::Communicator& pool, std::span<T> local);

}  // namespace dcp::exec
