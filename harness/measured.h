// `dcpbench run --backend cuda` (issue 10): every row of the run is one pool rank's share of the
// strategy's plan on one pipeline stage (sim/rank_share.h; the busiest rank and its busiest stage
// unless chosen), replayed on a GPU with the real kernels (exec/cuda/stage_runner.h). The run is
// the simulated run (harness/runner.h, the same batches and plans) with a hook on every row that
// has figures; the row then becomes a measured row (results.h "Measured rows"):
//   step_time_s          = the GPU's busy time of the share: forward, recompute and backward of
//                          every micro-batch, minus the ring's stand-in KV copies (virtual CP
//                          peers on one GPU: their time is reported apart, the real transfer is
//                          what the simulator models)
//   tflops_per_gpu       = useful FLOPs of the share / step_time_s (share_useful_flops below)
//   tokens_per_s_per_gpu = the share's real tokens / step_time_s
//   speedup_vs_packing   = the reference strategy's measured busy time / this one's, same step
//   measured             = {pool_rank, pp_stage, rank_chosen, stage_chosen, layers, last_stage,
//                           reps, busy_s, fwd_s, bwd_s, ring_copy_s, predicted_s, error,
//                           simulated_step_s, simulated_tflops_per_gpu, share, microbatch_times}:
//                          share = share_fingerprint below;
//                          microbatch_times = per micro-batch of the share, in its order,
//                          [fwd_s, bwd_s, ring_copy_fwd_s, ring_copy_bwd_s] (what `dcpbench
//                          share --measured` re-predicts with any calibration); predicted_s is the
//                           simulator's time of the same work like for like (its busy time of the
//                           share without the CP communication it charges), error = predicted_s /
//                           step_time_s - 1 (the calibration's error on this share, issue 10's
//                           validation); simulated_* are the simulated row's figures for the step.
// Several GPUs: `mpirun -np N dcpbench run --backend cuda --comm nccl ...`, one process per GPU
// (NCCL communicator, MPI only to bootstrap it: comm/nccl_comm.h). Every process plans and
// simulates every row (deterministic planners: the same rows everywhere); row i is measured by
// process i mod N on its own GPU; the measurements are summed over the processes with one NCCL
// all-reduce, and process 0 writes the results. The CP ring of a share still runs as virtual ranks
// on its one GPU: the processes split the rows, not a CP group.
#pragma once

#include "comm/communicator.h"
#include "harness/results.h"
#include "harness/runner.h"
#include "plan/planner.h"
#include "sim/rank_share.h"

#include <functional>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <vector>

namespace dcp::harness {

// One micro-batch of a share replayed (exec::MeasuredMicrobatch without the CUDA header).
struct ShareTiming {
  double fwd_s = 0;       // forward ops, incl. the ring copies of the forward
  double bwd_s = 0;       // recompute + backward ops, incl. their ring copies
  double copy_fwd_s = 0;  // the ring's stand-in KV copies inside fwd_s
  double copy_bwd_s = 0;  // inside bwd_s
};

// Replays every micro-batch of a share (in its order) with `reps` timed runs each and returns one
// timing per micro-batch. `label` names the NVTX ranges.
using ShareMeasurer =
    std::function<std::vector<ShareTiming>(const sim::RankShare&, const cost::CostModel&, int reps, const std::string& label)>;

// The GPU replay (exec/cuda/stage_runner.h, bf16), one StageRunner per model kept between shares;
// micro-batches with the same sequences at the same place of a group of the same size are
// measured once. Throws InputError without a CUDA build or device, or for a TP > 1 scenario or a
// head dim other than 64 / 128 (what the replay runs).
ShareMeasurer cuda_share_measurer();
// "NVIDIA H100 80GB HBM3": the name of the current CUDA device (InputError without one).
std::string cuda_device_name();
// InputError (exit 2) unless this is a CUDA build with a visible device, naming `what` needs it.
void require_cuda_device(const std::string& what);
// What the replay can run (TP 1, head dim 64 or 128): InputError naming the scenario otherwise.
void require_replayable(const Scenario& s, const cost::CostModel& cm);

// Useful FLOPs (DESIGN.md: Megatron's formula, real lengths, no recompute) of a rank's share: per
// micro-batch, 1/k of each of its group's samples' training FLOPs on the share's layers, and on
// the last stage 1/k of their output layer's. Summed over every pool rank and stage this is the
// useful FLOPs of the whole batch (each sample is in one group of one micro-batch; zigzag gives
// every rank of a group the same causal work). `real_lengths` is indexed by sample id.
double share_useful_flops(const cost::ModelConfig& model, const sim::RankShare& share,
                          std::span<const int64_t> real_lengths);
// What a replay of the share runs, as a 16-hex-digit FNV-1a hash of the model's shape (layers,
// hidden, FFN, heads, KV heads, head dim, vocabulary, gated MLP, norms, biases), the recompute
// mode, the pipeline (pp, vpp) and the share's layers and last-stage flag, and every micro-batch's
// index, CP group (first rank, size, this rank's place), samples and lengths: recorded in a
// measured row (measured.share) so `share --measured` can tell that it rebuilt the share that was
// measured. (Not the hardware profile or calibration: those change the prediction, not the work.)
std::string share_fingerprint(const sim::RankShare& share, const cost::CostModel& cm);
// The share's real tokens: per micro-batch, 1/k of its group's real lengths.
double share_real_tokens(const sim::RankShare& share, std::span<const int64_t> real_lengths);

struct MeasureOptions {
  int reps = 3;                // timed runs per micro-batch (median)
  std::optional<int> rank;     // pool rank (default: the busiest of each row's simulated step)
  std::optional<int> stage;    // pipeline stage (default: that rank's busiest)
  ShareMeasurer measurer;      // required
  std::string device;          // the device name of the rows' source "measured:<device>"
  comm::Communicator* comm = nullptr;  // the processes that split the rows (null: this one alone)
  std::ostream* progress = nullptr;    // one line per replayed row (every process its own)
};

// What the replay cannot run or a --rank / --stage outside a scenario: InputError (exit 2) before
// any planning. measure_scenarios calls it too; `run` calls it among its input checks, inside the
// collective check with --comm nccl (harness/errors.h), so bad input is one line and exit 2 on
// every process, not an abort.
void check_measured_run(const std::vector<Scenario>& scenarios, const RunOptions& options,
                        const MeasureOptions& measure);

// The measured run: run_scenarios with the replay hook, then the measurements gathered (comm) and
// the rows turned into measured rows; speedups recomputed from the measured times. Every process
// returns the same file. With several processes, they first agree on the rows to replay and on
// the GPU type (one all-reduce; a mismatch throws before any replay), so the sums are of the same
// rows. A replay that fails (e.g. out of GPU memory) fails the run: nothing is written.
ResultsFile measure_scenarios(const std::vector<Scenario>& scenarios, RunOptions options,
                              const plan::PlannerRegistry& registry, const MeasureOptions& measure);

}  // namespace dcp::harness
