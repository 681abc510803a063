// One pool rank's share of a plan on one pipeline stage: the micro-batches it runs, in the
// plan's order (the schedule's order when vpp = 1; interleaving visits them per model chunk), with the CP group it runs each in, the group's sequences, the rows it holds, and
// the time the cost model predicts for each (forward and backward through the stage's layers,
// all of its model chunks). What `dcpbench share` prints, and what a GPU run of that rank
// (issue 10: `run --backend cuda`) executes and validates the simulator against, micro-batch by
// micro-batch. The numbers are the simulator's own (build_schedule_input): the rank's busy time
// here is the simulator's rank_busy_s for that stage.
#pragma once

#include "cost/time_model.h"
#include "plan/plan.h"
#include "sim/simulator.h"

#include <cstdint>
#include <vector>

namespace dcp::sim {

struct RankMicrobatch {
  int microbatch = 0;              // index in the plan
  int first_rank = 0;              // the CP group: pool ranks [first_rank, first_rank + cp_size)
  int cp_size = 1;
  int cp_rank = 0;                 // this rank's position in the group (its zigzag chunks)
  std::vector<int> samples;        // the group's sample ids, pack order
  std::vector<int64_t> lengths;    // their lengths as charged: max(L, plan.pad_to)
  int64_t local_tokens = 0;        // THD rows this rank holds: sum of roundup(L, 2 cp_size) / cp_size
  // Predicted: the simulator's op costs (cost::group_stage_times) summed over the stage's model
  // chunks (virtual stages): pass totals fwd_s, bwd_s and their compute / exposed CP comm /
  // overhead parts (p2p_s: the activation transfers to the next stage, not part of the passes).
  OpCost predicted;
};

struct RankShare {
  int pool_rank = 0;
  int pp_stage = 0;
  int layers = 0;            // transformer layers this GPU runs per micro-batch (all its chunks)
  bool last_stage = false;   // it also runs the output layer and the loss
  std::vector<RankMicrobatch> microbatches;
  double busy_s = 0;         // sum of predicted fwd_s + bwd_s: the GPU's busy time in the step (no bubble,
                             // no waiting, no DP sync, no per-iteration cost)
};

// Throws InputError for a rank or stage outside the cluster and what build_schedule_input throws
// for a plan that does not fit the cost model; it does not re-check the plan's validity
// (plan/validate.h: callers validate first, as `dcpbench share` does).
RankShare rank_share(const plan::Plan& plan, const plan::Batch& batch, const cost::CostModel& cm, int pool_rank,
                     int pp_stage);

// The pool rank with the largest busy time of a simulated step (StepResult::rank_busy_s; the
// first on ties), and its pipeline stage with the largest busy time (RankShare::busy_s).
int busiest_pool_rank(const StepResult& r);
int busiest_stage(const StepResult& r, int pool_rank, int pool);

}  // namespace dcp::sim
