// Discrete-event simulator of one training step of a plan::Plan on a DP x CP x PP x TP cluster.
//
// Model of execution (DESIGN.md "Core semantics"; landscape §3.1 "Simulator"):
//   * Pool ranks j in [0, N) (N = dp*cp) each own a pipeline of pp stages (one GPU per stage per
//     TP rank; TP ranks are identical and simulated once). Every pool rank runs the plan's M
//     micro-batches with the same static schedule: 1F1B (Megatron
//     forward_backward_pipelining_without_interleaving) when vpp == 1, interleaved 1F1B
//     (forward_backward_pipelining_with_interleaving, micro-batch groups of vpp_group, default pp)
//     when vpp > 1. Events are ops (pool rank, micro-batch, virtual stage, fwd|bwd).
//   * Dependencies: previous op on the same GPU; F(mb, v) after F(mb, v-1) + p2p; B(mb, v) after
//     B(mb, v+1) + p2p (and after F(mb, v) on the same GPU by schedule order).
//   * Pipeline transfers, 1F1B without VPP (blocking_p2p, the default): Megatron switches
//     overlap_p2p_comm (on by default, --no-overlap-p2p-communication turns it off,
//     arguments.py:4116-4119) off without the interleaved schedule (arguments.py:1055-1058 at
//     d48bd6be0a; 3b309c627e arguments.py:650), so batch_p2p_comm is on and every transfer is a
//     batched call that waits for its requests and synchronises the device
//     (p2p_communication.py:411-440). Each stage runs its calls in the order of
//     forward_backward_pipelining_without_interleaving (schedules.py, 2279 on: warm-up
//     recv_forward / send_forward, then recv_forward, steady send_forward_recv_backward /
//     send_backward_recv_forward (send_backward after the last), cool-down recv_backward /
//     send_backward; none on the first stage's receive-forward / send-backward side or the last
//     stage's send-forward / receive-backward side). A call and its neighbour's (the k-th call of
//     stage s towards s+1 and the k-th of s+1 towards s carry the same micro-batches) both end
//     at max(the two posts) + the longer of its transfers (both directions at once) + a packed
//     plan's shape exchange (cost::StageTimes::p2p_shape_s); the next op starts after it. So
//     the sender waits too, until its neighbour posts. Per pool rank j (the pipeline of rank j);
//     the CP group of an op still starts at the latest of its members.
//   * With VPP (interleaved_calls, the default; scenario field training.interleaved_p2p_calls):
//     each stage walks its ops and calls in the order of
//     forward_backward_pipelining_with_interleaving with overlap_p2p_comm on (Megatron's
//     default; batch_p2p_comm off) and overlap_p2p_comm_warmup_flush off (its default,
//     model_parallel_config.py:417-419): a blocking recv_forward first; in the warm-up, after
//     each forward a blocking send_forward_recv_forward (schedules.py:1757-1759), after the last
//     an overlapped receive of the first gradient; in the steady phase an overlapped
//     send_forward_recv_forward after each forward and send_backward_recv_backward after each
//     backward; in the cool-down a blocking send_backward_recv_backward after each backward
//     (2155-2157). The chunks wrap round: the last stage's chunk c feeds the first stage's
//     chunk c + 1 (recv_tensor_from_previous_stage, 1387-1434). A call has up to two
//     neighbours (a send one way, a receive the other); each send is paired with the
//     neighbour's receive on that link in order. A call is posted when its stage reaches it.
//     Without a shape exchange (a padded plan) each isend / irecv goes out at once (_p2p_ops)
//     and a transfer ends at the later of its two sides' posts + p2p_s. With one (a packed plan,
//     variable_seq_lengths: a batch_isend_irecv of the shapes that waits, then
//     torch.cuda.synchronize, p2p_communication.py:256-263, 322-325) the call first meets every
//     neighbour it sends to or receives from (+ p2p_shape_s), then waits for the transfers of
//     the stage's previous call still running (the device sync; every call, even one that moves
//     nothing, syncs); its transfers go out then and end at the later of the two sides' + p2p_s.
//     A blocking call holds its stage until all its transfers end; an overlapped forward call
//     until its send ends (Megatron's training sets deallocate_pipeline_outputs,
//     training/arguments.py:2230, which waits for it at once, schedules.py:1915-1917); an
//     overlapped backward call until the previous overlapped backward call's send ends
//     (1971-1972; the last one after the cool-down, 2162-2163); the op that reads a receive
//     waits for that transfer (pp_pre_forward / pp_pre_backward). Not modelled: PyTorch runs the
//     operations between one pair of ranks on one NCCL stream, in issue order (a transfer may
//     queue behind an earlier one to the same neighbour: <= 1.1% of the step in random cases
//     with transfers as long as ops, none with realistic ones, helper-41's review).
//     (pipeline_calls.h walk_interleaved_calls.)
//   * With VPP and interleaved_calls off, or blocking_p2p = false: transfers do not block: the
//     sender goes on when its op ends and only the receiving op waits.
//   * CP coupling: all members of a CP group start an op together (at the latest of their ready
//     times) and finish together (identical work).
//   * DP x CP sync after each stage's last backward: all-reduce, or reduce-scatter + all-gather with
//     the distributed optimizer, overlapped with the last backward / first forward only when
//     overlap_grad_reduce (exposed = excess only). Without VPP and pp > 1 only stage 0's reduce
//     overlaps: Megatron's default align_grad_reduce makes every later stage launch its reduce
//     after its cool-down (pipeline_calls.h reduce_after_cooldown), fully exposed on that stage.
//     What no overlap hides (cost::GradSyncTime, since 2026-12-07): without VPP a stage's first
//     forward waits for the param gather it dispatches (a later stage's whole buffer, the first
//     stage's embedding bucket) before it computes, and with VPP the first stage's first forward
//     waits for all of chunk 0's gather, so a later stage's wait lies on the
//     pipeline's warm-up path; the first stage's embedding bucket reduces after its last backward;
//     with --check-for-nan-in-loss-and-grad every stage reads its grad buffer before the reduce.
//     (Before, the whole gather hid behind the first forward, and neither the embedding bucket
//     nor the check was charged: up to +33 ms per Llama-3-8B step, +1.1 ms on Megatron's example.)
//     With VPP Megatron reduces each model chunk
//     after that chunk's last backward and exposes chunk 0's (schedules.py:1540-1558, 2165-2171);
//     not modelled (~0.1-0.4% of a Llama-3-8B step, README).
//     Tied embeddings with pp > 1: then the first and the last stage all-reduce the word
//     embedding's gradient, starting when both are done and finishing together
//     (cost::GradSyncTime::embedding_s; before 2026-12-07 not charged, helper-80's trial).
//   * Per iteration, after the slowest GPU: optimizer step, fixed iteration cost and, for plans
//     that go through Megatron's sequence-packing scheduler (every THD plan: packing and the
//     dynamic planners; not bshd), its data path (cost::iteration_time), serial.
// Step time = max over GPUs of their finish time + the iteration cost. Per GPU the step splits
// exactly into
//   compute (useful + recompute) + exposed comm + overhead (host floor, micro-batch and iteration
//   costs) + pipeline bubble + imbalance wait,
// (PP p2p transfers, and the waits of blocking calls, show up as idle time, not as comm)
// where bubble = min(idle, busy * (pp-1) / (M * vpp)) (the 1F1B bubble a perfectly balanced
// pipeline with this GPU's work would have) and imbalance wait = the rest of the idle time.
//
// Lower bound, over the real lengths (the unpadded ones: neither the plan's own padding nor the
// scenario's dataset padding, which some strategy always pays, is in it): every sample processed by the group size k that
// costs it the least GPU time among those a valid plan may use (k >= ceil(L / M); a size that
// exists in the pool, plan/geometry.h, or the plan's static cp), compute only (with tp > 1 also the
// bandwidth time of the transformer layers' synchronous TP collectives, serial on every GPU:
// cost::sequence_compute_s),
// with GEMM efficiency at M_tokens (the per-rank budget), each
// pipeline stage's work spread evenly over its N GPUs, no other communication, no bubble;
// the busiest stage sets the bound (which layers and the output layer live on a stage is fixed by
// the scenario, not by the plan); plus the costs the cost model charges to every plan:
//   work(s)  = [layers(s) * per-layer work + (s last ? output layer + loss : 0)] / N
//              + m_min * add_gpu(s)
//   host(s)  = layers(s) * host_layer + add_host(s), host_layer = host_layer_fwd +
//              host_layer_bwd; host_layer_fwd = host_layer_fwd_s (+ with tp > 1 the layer's 4
//              TP calls, tp_collective_host_s each), host_layer_bwd = host_layer_bwd_s (+ its 10
//              TP calls) [+ host_layer_fwd if recompute]
//   add_*(s) = the main-gradient adds of one backward pass of each of the stage's virtual stages
//              (cost::grad_add)
//   m_min    = max(1, ceil(sum_i L_i / (N * M)), L2)   (a micro-batch holds at most N * M
//              tokens, and a sample lies whole in one: L2 = bins_lower_bound of the lengths into
//              bins of N * M)
//   R_j      = ceil(sum of the L_i whose least valid size is >= k_j, / M), k_1 < k_2 < ... the
//              sizes >= 2: the rank-micro-batches that run a ring of size >= k_j (a sample of
//              L > M lies on k >= ceil(L / M) ranks, each holding at most M of a micro-batch's tokens)
//   rings(x) = sum_j R_j * (x_j - x_(j-1)), x_j = min over the sizes k >= k_j of x(k), x_0 = 0: the
//              least total of x over those rank-micro-batches (each pays x at its own size)
//   hmean(s) = m_min * host(s) + layers(s) * rings(ring) / N: the mean rank's host issue time
//   split(s) = max(gpu_fwd(s), m_min * layers(s) * host_layer_fwd + layers(s) * rings(ring_fwd) / N)
//            + max(gpu_bwd(s) + layers(s) * rings(idle) / N + m_min * add_gpu(s),
//                  m_min * (layers(s) * host_layer_bwd + add_host(s)) + layers(s) * rings(ring_bwd) / N):
//              the mean rank's forwards and backwards apart, gpu_*(s) = the stage's share of every
//              sample's least forward (backward [+ recompute]) over its valid sizes, / N;
//              ring_fwd / ring_bwd the two passes of ring(k) (the recompute's forward ring in
//              ring_bwd)
//   ring(k)  = fwd + bwd [+ fwd if recompute] of cost::ring_host(k) (the ring's call and its
//              steps, ring_call_* + (k - 1) * ring_step_*, per layer; bshd_ring_* for a padded
//              plan, whose ring runs TE's bshd layout, cudnn_* on the cuDNN backend; 0 at k = 1 or
//              all-gather CP)
//   idle(k)  = bwd_sync_s of cost::ring_host(k): the flash THD backward's device-sync idle time
//              per layer, on the GPU side of a pass
//   crit(s)  = min over the valid sizes k of the longest sample L* of
//                max(its stage-s forward at k / k, layers(s) * (host_layer_fwd + ring_fwd(k)))
//                + max(its stage-s backward at k / k + layers(s) * idle(k) + add_gpu(s),
//                      layers(s) * (host_layer_bwd + ring_bwd(k)) + add_host(s))
//              + (m_min - 1) * host(s)
//   bound_s  = max_s [ waits(< s) + max(work(s), crit(s), hmean(s), split(s)) + m_min * fixed(s)
//                      + NaN check of stage s + the tied embedding's all-reduce (first, last stage)
//                      + (overlap_grad_reduce ? (reduced after the cool-down ? grad reduce
//                                                : the embedding bucket's reduce)
//                                               + the gather its first forward waits for
//                                             : grad reduce + param gather of stage s) ]
//              + optimizer step + iteration_overhead_s,
//   waits(< s) = the param gathers the first forwards of stages 0 .. s-1 wait for (overlap:
//              cost::GradSyncTime::gather_waited_s), on the path to any op of stage s
//   fixed(s) = the micro-batch's fixed host cost summed over the stage's virtual stages
//              (cost::microbatch_overhead: the embedding's on the first, the loss's on the last).
// The bound is over the plans of the plan's own layout (a padded plan runs TE's bshd ring, a packed
// one its THD ring, cost::QkvFormat): only the ring's host cost (cost::ring_host) depends on it.
// Why each term holds for any valid plan: every micro-batch covers all N ranks of every stage, so
// each rank runs m >= m_min fwd and bwd passes per virtual stage; a pass costs max(GPU [+ the
// backward's sync idle], host) + half the virtual stage's micro-batch cost (cost::group_stage_times), so the busiest rank's time
// is at least max(its GPU time, m * host(s)) + m * fixed(s), and its GPU time at least the
// stage's work / N. The longest sample runs in one micro-batch on a group of some valid size k
// (k >= ceil(L* / M)); each rank of that group spends there at least max(its 1/k share of the
// sample's forward, its forward host issue time with the ring per layer at k) plus the same for the
// backward, and at least host(s) / layers per layer in each other micro-batch: crit(s) is the
// cheapest such path (one long sample on few
// ranks costs imbalance, on many it costs ring steps; work(s) alone assumed it spreads for free,
// which read dcp's plans of Megatron's example at M = 8192 as 0.81 efficient; 0.96 with crit).
// A sample lies whole in one group of one micro-batch and a micro-batch holds at most N * M tokens,
// so m is at least any bin-packing lower bound of the lengths into bins of N * M (L2); a sample of
// L > M lies on k >= 2 ranks of its micro-batch, each holding at most M of its tokens, so the
// (rank, micro-batch) pairs that run a ring of size >= k_j number at least R_j, each issuing
// at least the cheapest such ring's host calls per layer; the busiest rank's host time is at
// least the mean over the N ranks, and a pass takes at least its host time: hmean(s) (stop 63;
// each size's rings priced apart since stop 64, the same day, before all at the cheapest size
// >= 2). A rank's forwards take at least max(their GPU time, their host time), and so do its
// backwards, and a sum of maxima is at least the max of the sums, for the forwards and the
// backwards apart: split(s) (stop 64), which exceeds the max of work(s) and hmean(s) where the
// forwards wait on the host and the backwards on the GPU (Megatron's example: short samples, ring
// forwards of ~15 ms host time at cp 4; dcp's plan efficiency at 4 GPUs read 0.862 without it,
// 0.923 with it).
// Without overlap the gradient sync follows the stage's last op; the optimizer and fixed cost
// follow the pipeline; the sequence-packing data path (cost::iteration_time) is left out (a padded
// plan does not pay it, and a packed plan's re-route volume depends on the plan; leaving a cost
// out keeps the bound a bound, only a looser one for packed plans).
// (Before 2026-11-23 the bound spread all work over all pp * N GPUs; with Llama-13B at PP8 the
// last stage's output layer is ~2 layers' GEMMs, so that bound was unreachable by ~25% for every
// planner. Before 2026-11-24 it left out the host floor, the micro-batch, gradient-sync and
// iteration costs, so on small batches (Megatron's example, ~7k tokens per replica) every
// planner's efficiency read ~0.2 although those costs are the same for all of them.)
// (Until the evening of 2026-11-24 every sample was charged at cp = 1, which ring plans of long
// samples beat on the h100 tables (by 0.8% for one 512k-token sample on 8 ranks); the bound was
// taken over the batch a plan was made for, so a plan's own padding (bshd's pad_to, a dynamic
// planner's multiple of 2 cp) counted as needed work; and it had no crit(s): the longest sample
// only added its ring steps' host time, at k = ceil(L* / M).)
// plan_efficiency = bound_s / step_s (<= 1, up to rounding: ~1e-15 above it on a plan that meets
// the bound exactly; GEMM efficiency is read at its highest on (0, M], so a curve that falls
// with more tokens, as a measured one may, keeps it a bound). The bound depends on the batch and on M (GEMM efficiency at M, m_min, the ring term),
// so efficiencies of strategies compare as speeds only at the same M; tuned settings differ in M.
//
// Memory (cost/memory.h): each GPU's peak is its static bytes plus the maximum, over its op order,
// of the stored activations of the micro-batch chunks in flight (real tokens per rank of each
// micro-batch) plus the running op's transient (a backward's holds the MLP's gradients too; after
// a backward of the first virtual stage the embedding's gradient); a plan whose peak exceeds the capacity on any GPU
// does not fit (StepResult::fits = false: the harness reports it as oom, never as a number).
// A plan with pad_to > 0 (bshd) is charged at max(L, pad_to) per sample.
#pragma once

#include "cost/memory.h"
#include "cost/time_model.h"
#include "plan/plan.h"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace dcp::sim {

// Largest schedule simulate_schedule() takes: micro-batches x (pp x vpp) x (pool + 8) entries,
// (pool x 2 + 24) with the interleaved schedule's calls.
// With non-blocking transfers it keeps an end time per (micro-batch, virtual stage, direction,
// pool rank) (16 B per entry with the fwd/bwd pair; the + 8 stands for the per-op bookkeeping),
// so 2^27 is ~2 GiB (Megatron's 1F1B calls keep a group index per (micro-batch, pool rank)
// and a call list per stage instead, less; the interleaved schedule's calls keep two times per
// call and pool rank, ~2 calls per (micro-batch, virtual stage), so they count pool x 2, and
// ~250 B of call lists, pairings and input indices per (micro-batch, virtual stage), + 24). Checked
// before allocating (InputError); measured here: 2^27 (bshd, 1024 micro-batches on 2^17 ranks)
// ran in 3 s and 2.1 GB; 2^30 took 49 s and 16.9 GB.
inline constexpr int64_t kMaxScheduleEntries = int64_t{1} << 27;

// ---- schedule level (hand-checkable; used by the tests) ---------------------------------
struct OpCost {
  double fwd_s = 0;           // forward op duration (all included)
  double bwd_s = 0;           // backward op duration (incl. recompute)
  double fwd_compute_s = 0;   // parts of the durations, for the breakdown
  double bwd_compute_s = 0;
  double recompute_s = 0;     // part of bwd_compute_s
  double fwd_comm_s = 0;      // exposed CP comm inside the op
  double bwd_comm_s = 0;
  double fwd_overhead_s = 0;  // host floor excess (or the backward's sync idle) + micro-batch
                              // overhead inside the op
  double bwd_overhead_s = 0;
  double p2p_s = 0;           // delay on the edge between this stage and the next: F(v)->F(v+1) and B(v+1)->B(v)
  double p2p_shape_s = 0;     // blocking_p2p only: the shape exchange before each call on that edge
  // The durations and their parts of a cost::group_stage_times result.
  static OpCost of(const cost::StageTimes& st);
  OpCost& operator+=(const OpCost& o);
  bool operator==(const OpCost&) const = default;
};

struct ScheduleInput {
  int pool = 1;        // N
  int pp = 1;
  int vpp = 1;
  int vpp_group = 0;   // micro-batch group size of the interleaved schedule (0: pp)
  // groups[mb] = list of (first_rank, size) covering [0, N); ops of a group are coupled.
  struct GroupSpan {
    int first_rank = 0;
    int size = 1;
  };
  std::vector<std::vector<GroupSpan>> groups;
  // cost[mb][g][v]: the op cost of group g of micro-batch mb at virtual stage v (pp*vpp entries).
  std::vector<std::vector<std::vector<OpCost>>> cost;
  // Per pipeline stage: DP sync after the last backward.
  std::vector<double> grad_reduce_s;  // [pp] all-reduce or reduce-scatter (empty = 0)
  std::vector<double> grad_gather_s;  // [pp] param all-gather (empty = 0)
  std::vector<double> grad_check_s;   // [pp] NaN check of the grads before the reduce, never hidden (empty = 0)
  // [pp] with overlap_grad_reduce (cost::GradSyncTime): the gather the stage's first forward waits
  // for before it computes, and the reduce that follows the last backward unhidden (empty = 0)
  std::vector<double> grad_gather_waited_s;
  std::vector<double> grad_reduce_tail_s;
  // Tied embeddings with pp > 1 (cost::GradSyncTime::embedding_s): the word embedding's gradient
  // all-reduce between the first and the last stage, started when both have synced their grads;
  // one value for the pair (0 = none).
  double grad_embedding_s = 0;
  bool overlap_grad_reduce = false;
  // pp > 1: Megatron's P2P calls (see top: 1F1B's batched, blocking ones without VPP, the
  // interleaved schedule's with it when interleaved_calls is set); false: transfers that delay
  // only the receiving op. No effect at pp == 1.
  bool blocking_p2p = true;
  // vpp > 1 (and blocking_p2p): walk the interleaved schedule's calls (see top); false: its
  // transfers delay only the receiving op (the model before 2026-12-06; the scenario field
  // training.interleaved_p2p_calls).
  bool interleaved_calls = true;
  double iteration_s = 0;  // serial per-iteration cost after the slowest GPU

  // Memory (optional: empty static_bytes = not checked).
  std::vector<std::vector<double>> tokens;     // [mb][g] tokens per rank of group g
  std::vector<double> static_bytes;            // [pp]
  double stored_bytes_per_token_layer = 0;     // kept between a chunk's forward and backward
  double layer_transient_bytes_per_token = 0;  // of every running op (full recompute)
  // [mb][g]: the transient per token of group g's ops (its CP attention buffers, cost/memory.h);
  // empty = layer_transient_bytes_per_token for every group.
  std::vector<std::vector<double>> transient_bytes_per_token;
  // [mb][g]: the same for a backward op (its own: the MLP's and the output's gradients, the
  // backward's CP buffers); empty = the forward's.
  std::vector<std::vector<double>> backward_transient_bytes_per_token;
  double embedding_grad_bytes = 0;             // after a backward of virtual stage 0
  double embedding_input_grad_bytes_per_token = 0;  // with it: the gradient flowing into it
  double logits_saved_bytes_per_token = 0;     // last virtual stage: forward -> backward
  double head_saved_bytes_per_token = 0;       // the same: the final norm's and output layer's inputs
  double logits_peak_bytes_per_token = 0;      // last virtual stage: live during loss / its grad
  // Last virtual stage, tp > 1 (cost::head_gather_bytes_per_token): the output layer's gathered
  // input, resident from its first forward at the largest micro-batch's size, and as much again
  // in its backward beside the logits' gradient.
  double head_gather_bytes_per_token = 0;
  double logits_grad_bytes_per_token = 0;      // the same: the gradient the output layer reads
  // Tied embeddings at pp 1 (cost::tied_output_grad_bytes): held from the loss's backward until
  // after the embedding's; 0 = none.
  double tied_output_grad_bytes = 0;
  std::vector<int> layers;                     // [pp*vpp] layers of each virtual stage
  double capacity_bytes = 0;
};

struct GpuTime {
  double finish_s = 0;     // when this GPU's last op (and its exposed sync) ends
  double compute_s = 0;    // incl. recompute
  double recompute_s = 0;
  double comm_s = 0;       // exposed CP comm + exposed DP sync
  double sync_s = 0;       // part of comm_s: exposed DP x CP gradient sync
  double overhead_s = 0;   // host floor excess + micro-batch overhead + iteration cost
  double iteration_s = 0;  // part of overhead_s: the per-iteration cost
  double bubble_s = 0;
  double imbalance_s = 0;  // step_s - compute - comm - overhead - bubble
  double peak_bytes = 0;   // memory peak (0 when not checked)
  double busy_s() const { return compute_s + comm_s + overhead_s; }
};

struct ScheduleResult {
  double step_s = 0;
  // gpu[s * N + j]: pipeline stage s of pool rank j (one TP rank).
  std::vector<GpuTime> gpu;
  // Means over GPUs; they sum to step_s.
  double compute_s = 0;
  double recompute_s = 0;  // part of compute_s
  double comm_s = 0;
  double overhead_s = 0;
  double bubble_s = 0;
  double imbalance_s = 0;
  // Idle time of the busiest GPU (the most compute + comm + overhead, sync and iteration cost
  // included): step_s - its busy time. The lower bound counts the busiest stage's work, not its
  // GPUs' waits (pipeline fill, drain and stalls), so step_s = bound + this + the busiest GPU's
  // busy time above the bound; the means above also hold the lighter stages' idle.
  double busiest_idle_s = 0;
  int64_t events = 0;  // ops simulated
  double peak_bytes = 0;      // max over GPUs (0 when not checked)
  int peak_gpu = -1;          // index into gpu of that maximum
  bool fits = true;           // every GPU's peak <= capacity_bytes
};

// Throws dcp::Error on an inconsistent input (sizes, groups not covering the pool, M not a
// multiple of the VPP group when vpp > 1).
ScheduleResult simulate_schedule(const ScheduleInput& input);

// ---- plan level ---------------------------------------------------------------------------
struct StepResult {
  ScheduleResult schedule;
  double step_s = 0;
  double useful_flops = 0;          // Megatron formula over real lengths
  double tflops_per_gpu = 0;        // useful_flops / (step_s * gpus) / 1e12
  double tokens_per_s_per_gpu = 0;  // real tokens / (step_s * gpus)
  double bound_s = 0;               // lower bound (see top)
  double plan_efficiency = 0;       // bound_s / step_s
  std::vector<double> rank_busy_s;  // [N] busy time of pool rank j (compute + exposed CP comm
                                    // + op overhead; no DP sync, no iteration cost), mean over
                                    // its pp stages
  double balance = 0;               // max / mean of rank_busy_s
  double bubble_frac = 0;           // schedule.bubble_s / step_s
  double comm_frac = 0;             // schedule.comm_s / step_s
  double imbalance_frac = 0;
  double compute_frac = 0;
  double overhead_frac = 0;
  int microbatches = 0;
  cost::IterationTime iteration;    // the per-iteration parts
  double peak_memory_bytes = 0;     // worst GPU's peak
  cost::StaticMemory peak_static;   // that GPU's static part
  double capacity_bytes = 0;
  bool fits = true;                 // false: out of memory (the harness reports oom)
  std::string source;               // cost::source_label(cm)
};

// Builds the ScheduleInput from the plan through the time model and simulates it.
// `batch` holds the lengths the plan was made for (possibly padded); `real_lengths` (same size,
// or empty = batch.lengths) are used for useful FLOPs and tokens/s. The plan's pool must equal
// cm.cluster.pool(). Throws InputError on mismatches.
// Bound::skip leaves bound_s and plan_efficiency at 0 (planners that simulate candidate plans
// need only the step time; the bound is a property of the batch, computed once per row).
enum class Bound { compute, skip };
// `attn` (optional, made for `cm`): the sequences' attention times memoised across calls, for a
// caller that simulates many plans of one batch (the planners' scorers, harness
// planner_options_of; cost::AttnTermsMemo): the same results to the bit.
StepResult simulate_step(const plan::Plan& plan, const plan::Batch& batch,
                         const cost::CostModel& cm, std::span<const int64_t> real_lengths = {},
                         Bound bound = Bound::compute, cost::AttnTermsMemo* attn = nullptr);

// Builds the schedule input only (for inspection and benchmarks).
ScheduleInput build_schedule_input(const plan::Plan& plan, const plan::Batch& batch,
                                   const cost::CostModel& cm, cost::AttnTermsMemo* attn = nullptr);

// Martello and Toth's L2 lower bound on the number of bins of capacity c that hold the items w
// (each in [0, c]): for every a in [0, c/2], with J1 = {w > c - a}, J2 = {c/2 < w <= c - a} and
// J3 = {a <= w <= c/2}, at least |J1| + |J2| + max(0, ceil((sum J3 - (|J2| c - sum J2)) / c)) bins
// (no J1 or J2 item shares a bin with another of J1 + J2, and the J3 items fill the J2 bins' room
// at best); evaluated at a = 0 (the token total's ceil(sum / c)) and at every item <= c/2.
// S. Martello, P. Toth, "Lower bounds and reduction procedures for the bin packing problem",
// Discrete Applied Mathematics 28 (1990) 59-70. O(n log n); 0 for no items.
int64_t bins_lower_bound(std::vector<int64_t> w, int64_t c);

// Lower bound of a batch (see top): seconds. static_cp: the plan's static CP size (its group
// size when the plan is static); 0 = cm.cluster.cp. format: the plan's ring layout (bshd for a
// padded plan), which sets the ring's host cost: the bound is over plans of that layout.
double lower_bound_s(const plan::Batch& batch, const cost::CostModel& cm,
                     int64_t max_seqlen_per_rank_tokens, int static_cp = 0,
                     cost::QkvFormat format = cost::QkvFormat::thd);

}  // namespace dcp::sim
