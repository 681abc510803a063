// Time model: seconds for one CP group to run one micro-batch through one (virtual) pipeline
// stage, forward and backward, on each of its ranks; the DP x CP gradient sync; the per-iteration
// costs; and the helpers the harness needs (useful FLOPs, TFLOPS/GPU, the source label).
//
// Cluster mapping (Megatron's default rank order tp-cp-dp-pp, TP fastest):
//   pool N = dp*cp ranks sharing TP/PP coordinates, j = dp_rank*cp + cp_rank;
//   gpu_id(pp_stage, j, tp_rank) = (pp_stage*N + j)*tp + tp_rank;  gpus = tp*pp*N.
//   So an aligned CP group [a*k, (a+1)*k) covers the contiguous GPUs [a*k*tp, (a+1)*k*tp); it
//   stays inside NVLink iff that range lies in one node of gpus_per_node GPUs.
//
// Per micro-batch, per rank of a group of size k holding sequences L_1..L_n (local tokens
// T = sum L_i/k), per transformer layer (layers of a virtual stage = layers/(pp*vpp), remainder to
// the first stages):
//   GEMM   fwd: fwd_layer_gemm_flops_per_token * T / tp / (peak * gemm_eff(T))
//   attention, ring (TE p2p, zigzag/DualChunkSwap): k steps. Step 0 is the diagonal (causal
//          kernel at (q, k) = (L/k, L/k)); steps 1..k-1 are half blocks: a rank either attends its
//          whole query chunk to half a KV chunk (L/k, L/2k) or half its queries to a whole KV chunk
//          (L/2k, L/k); both shapes occur in every step, and the group waits for the slower one
//          (the min efficiency of the two). Each step does 2*q*L^2/k^2 FLOPs per sequence (/ tp).
//          Efficiency comes from the scenario's attention backend table (attention_table.h) per
//          sequence at its local lengths, tile quantisation included.
//          Steps 0..k-2 overlap the send of the local KV to the next rank:
//            bytes = 2 (K,V) * T * kv_heads/tp * head_dim * 2 (bf16)
//            step_s = max(compute_s, bytes / bw + latency); last step = compute_s. (TE issues
//            the next step's send/recv before the step's attention and waits for it after, so
//            the link's latency overlaps the compute like its bytes; until 2026-11-28 the latency
//            was added after the max, exposed even under a long step, helper-27.)
//          bw/latency are inter-node (one NIC) if the group spans nodes, else NVLink.
//          THD side kernels (read-half, output/LSE and gradient corrections) move
//          (thd_side_*_bytes_q * q_dim + thd_side_*_bytes_kv * kv_dim) * T / tp bytes of HBM per
//          step after the first: proportional to (k-1) * T; plus the first step's corrections and
//          each pass's one KV copy into its first send buffer (thd_side_first_*), proportional to
//          T. A padded (bshd) plan's ring reads its halves as views: bshd_side_* (no read-half
//          traffic; its first forward step's "init" correction); its KV copies and first backward
//          step are THD's (thd_side_first_fwd_bytes_kv, thd_side_first_bwd_*).
//   attention, all-gather (TE "all_gather"): all-gather of KV before attention, not overlapped:
//            (k-1) * bytes / bw + (k-1) * latency, then the rank's causal work.
//   backward = gemm_bwd_factor (2: dgrad + wgrad) x fwd GEMM FLOPs, attn_bwd_factor (2.5, FA's
//          5 vs 2 matmuls) x fwd attention FLOPs at the bwd table; ring bwd: every one of the
//          k steps overlaps one transfer, KV on step 0, KV + dKV on steps 1..k-2, dKV on step
//          k-1 (TE's order; until 2026-11-28 KV + dKV on steps 0..k-2 and none on the last, the
//          same bytes on fewer steps); all-gather bwd adds a reduce-scatter of dKV (same bytes).
//   recompute (full): the forward is run again before each backward (compute + its CP comm).
//   logits: fwd_logits_flops_per_token * T / tp on the last virtual stage (bwd x gemm_bwd_factor),
//          plus the memory-bound cross-entropy bytes_per_logit * V * T / tp / HBM (half in fwd,
//          half in bwd), bytes_per_logit by implementation: loss_bytes_per_token_vocab (unfused),
//          loss_fused_bytes_per_token_vocab (--cross-entropy-loss-fusion), loss_te_bytes_...
//          (with --cross-entropy-fusion-impl te).
//   element-wise (norms, residuals, RoPE, activation): elementwise_bytes_per_token_hidden * h * T
//          / tp / HBM per layer fwd, 2x in bwd.
//   cuDNN zero-fills: on the cudnn backend TE's fused THD attention zeroes each call's output
//          and fills its dQ, dK, dV (cp = 1 included): thd_fused_fill_* bytes per row of the
//          call's Q (and KV), rows summed over the ring's steps (1 + 0.75 (k-1)) * T.
//   host/launch floor: a pass takes max(GPU time, host issue time), host = layers *
//          (host_layer_{fwd,bwd}_s + ring_host: [k > 1] ring_call_{fwd,bwd}_s (the call and its
//          diagonal step) + (k - 1) * ring_step_{fwd,bwd}_s, bshd_ring_* for a padded plan,
//          cudnn_* on the cuDNN backend) (recompute adds the forward's
//          host time to the backward); the excess of host over GPU time is reported as overhead.
//          A THD ring backward on the flash path adds layers * thd_flash_ring_bwd_sync_s (GPU idle
//          after its device syncs) to the GPU side: backward = max(GPU + idle, host).
//          Plus the micro-batch's fixed cost on the virtual stage (microbatch_overhead below), half
//          in each pass.
//   main-gradient adds (grad_add): Megatron's DDP backward hook adds a parameter's bf16 gradient
//          into its main gradient (param.main_grad.add_(param.grad)) unless a fused wgrad GEMM
//          already accumulated it there (grad_added_to_main_grad; Megatron-LM 192cbc3554
//          megatron/core/distributed/distributed_data_parallel.py:449-470,
//          tensor_parallel/layers.py:618-647). With gradient_accumulation_fusion (Megatron's
//          default) that leaves the norms, the biases and the embeddings (whose backward writes a
//          dense bf16 gradient of the whole table); with --no-gradient-accumulation-fusion every
//          parameter, and with tied embeddings at pp = 1 autograd first sums the output layer's
//          weight gradient into the embedding's. Per backward pass: (2 + 2 x grad bytes) of HBM
//          traffic per added parameter (read the bf16 gradient, read and write the main gradient:
//          10 B in fp32) plus those bf16 writes and sums, in the GPU time; grad_add_host_s per
//          added parameter tensor in the host time. (The hook's own Python, run for every
//          parameter either way, is not charged.)
//   TP (tp > 1), with sequence parallelism (Megatron --sequence-parallel, which the scenarios
//          require with tp > 1): FLOPs, KV heads, element-wise and side-kernel traffic divided by
//          tp; per layer TE's collectives of the [T, h] bf16 activation over the TP group's NVLink
//          (tp_layer_comm: a ring of tp - 1 steps of T h 2 / tp bytes, each with a latency).
//          Forward: all-gathers before the QKV and FC1 linears, reduce-scatters after the
//          projection and FC2, synchronous (TransformerEngine d0067d0 pytorch/module/
//          layernorm_linear.py:309-313, linear.py:572): 4 exposed. Backward: the two row-parallel
//          linears gather their output gradient synchronously (base.py:1709): 2 exposed; the two
//          column-parallel ones re-gather their input asynchronously under the dgrad GEMM and
//          reduce-scatter the dgrad under the wgrad GEMM (layernorm_linear.py:787-791, 904-907):
//          exposed only where a collective outlasts its GEMM. Full recompute repeats the forward's.
//          Once per micro-batch besides: the embedding's reduce-scatter (an all-reduce, twice the
//          bytes, with learned position embeddings) in the forward and its gradient's all-gather
//          in the backward, on the first virtual stage; the output layer's input all-gather in the
//          forward and, in the backward, its re-gather under the dgrad GEMM and input-gradient
//          reduce-scatter under the wgrad GEMM, on the last (stage_times_of).
//          Host: tp_collective_host_s per call or wait, 4 per layer forward, 10 backward (the
//          embedding's 1 and 1, the output layer's 1 and 4). Without
//          --tp-comm-overlap (Megatron's default; its userbuffer overlap is not modelled). The GEMM
//          efficiency stays the curve's at T tokens: optimistic where N or K / tp is small. The
//          lower bound keeps the layers' synchronous ones' bandwidth time (sequence_compute_split)
//          and their per-layer host calls, not their latencies, the asynchronous ones, or the
//          embedding's and output layer's.
//   PP p2p activations: T*h*2/tp bytes over the inter-stage link (with sequence parallelism each
//          TP rank sends its T/tp rows; inter-node if gpus_per_node <= N*tp, i.e. stages on
//          different nodes), charged to the dependency edge by the simulator.
//
// DP x CP gradient sync (Megatron DistributedDataParallel, per pipeline stage over the N ranks of
// the pool), from the flags:
//   grads in fp32 (4 B) when grad_reduce_fp32 (Megatron sets accumulate_allreduce_grads_in_fp32
//   for --bf16, arguments.py 1313-1327) else bf16 (2 B);
//   no distributed optimizer: one ring all-reduce, 2 (N-1)/N * params * grad_bytes;
//   distributed optimizer: reduce-scatter (N-1)/N * params * grad_bytes, then the bf16 param
//   all-gather (N-1)/N * params * 2 after the optimizer step;
//   bandwidth NVLink inside a node, else min(NVLink, nics_per_node x NIC / tp) (NCCL's rings use
//   every NIC of a node, shared by the tp concurrent collectives of a pool rank's TP ranks);
//   (N-1) latencies per collective. Overlapped with the last backward / first forward only with
//   overlap_grad_reduce (--overlap-grad-reduce / --overlap-param-gather).
//   Tied embeddings with pp > 1: after that sync, the first and the last stage all-reduce the
//   word embedding's main gradient between them (GradSyncTime::embedding_s), never overlapped.
//
// Per iteration (serial, after the pipeline): the optimizer step ((optimizer_bytes_per_param x the
// GPU's shard + grad bytes x the stage's params, the zeroed grad buffer, + 2 x grad bytes x the
// stage's params when the pool has N > 1 ranks, the pass that scales that buffer by 1 / N or
// 1 / tokens) / HBM),
// iteration_overhead_s, and for every THD plan (the packing baseline and every dynamic plan; not
// bshd) the scenario's data path: with Megatron's sequence-packing scheduler (data_path megatron)
// two length all-gathers over the DP group ((DP-1) latencies each), the payload re-route (one
// all-to-all over the pool per sample key; a rank receives every sample of its groups whole, from
// its DP peers: (DP-1)/DP [estimate: samples start evenly over the DP ranks] of
// reroute_bytes_per_token per received token, through the rank's share of its node's NICs when the
// DP group spans nodes) and packed_data_overhead_s; with NVIDIA's
// prototype's prefetching sampler (data_path prefetch) one all-reduce of two counters over the
// pool ((N-1) latencies) and packed_data_overhead_s.
#pragma once

#include "cost/flops.h"
#include "cost/hardware.h"

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace dcp::cost {

// Name of this cost model in source labels; bump when formulas change.
inline constexpr const char* kCostModelName = "dcp-cost-v2";

enum class CpComm { ring, all_gather };
// The in-step data path of a THD plan (iteration_time): Megatron's sequence-packing scheduler
// (length all-gathers over DP, per-key re-route, packed-batch building), or NVIDIA's prototype
// with its scheduler and routing in a prefetch process (packing and one counter all-reduce).
enum class DataPath { megatron, prefetch };

struct ClusterConfig {
  int gpus = 1;           // total GPUs = tp * pp * dp * cp
  int tp = 1;
  int pp = 1;
  int cp = 1;             // static CP (fixes the pool N = dp*cp with dp = gpus/(tp*pp*cp))
  int vpp = 1;            // virtual pipeline chunks per stage (interleaved 1F1B when > 1)
  int gpus_per_node = 8;  // overrides the profile's value (the scenario decides)
  int nics_per_node = 0;  // NICs per node for collectives; 0 = the profile's value

  int pool() const { return gpus / (tp * pp); }  // N = dp*cp
  int dp() const { return pool() / cp; }
};

// Throws InputError naming the bad field (gpus not divisible by tp*pp*cp, ...).
void validate_cluster(const ClusterConfig& cluster);
// The layout Megatron builds the model with: tp divides the attention heads, the query groups and
// the FFN width, and the layers split evenly over pp x vpp (virtual) stages. Throws InputError
// naming the value otherwise.
void validate_layout(const ModelConfig& model, const ClusterConfig& cluster);

struct TrainingOptions {
  bool recompute_full = false;       // Megatron --recompute-granularity full
  CpComm cp_comm = CpComm::ring;
  double gemm_bwd_factor = 2.0;      // bwd GEMM FLOPs / fwd (dgrad + wgrad)
  double attn_bwd_factor = 2.5;      // bwd attention FLOPs / fwd (FA2/FA3 convention)
  std::string attention_backend = "fa3";  // table of the hardware profile ("fa2", "fa3", "cudnn",
                                          // "dcpbench": our kernels, a measured calibration's)
  bool check_for_nan_in_grad = false;  // --check-for-nan-in-loss-and-grad (Megatron's default is
                                       // on; scenarios default to it, harness/scenario.h): the
                                       // norm of every grad bucket before the DP reduce
                                       // (GradSyncTime::check_s)
  bool overlap_grad_reduce = false;  // --overlap-grad-reduce (Megatron default off): the grad
                                     // reduce overlaps the last backward, the param all-gather
                                     // the first forward
  bool interleaved_p2p_calls = true;   // with VPP, simulate Megatron's interleaved-schedule P2P
                                       // calls (sim::ScheduleInput::interleaved_calls)
  bool grad_reduce_fp32 = true;      // grads reduced in fp32 (4 B): Megatron's --bf16 default
                                     // (arguments.py 1313-1327); false = bf16 (--grad-reduce-in-bf16)
  bool distributed_optimizer = false;  // --use-distributed-optimizer: optimizer states and the
                                       // grad reduce-scatter sharded over the DP x CP pool
  DataPath data_path = DataPath::megatron;   // training.data_path
  bool gradient_accumulation_fusion = true;  // Megatron's default; false = --no-gradient-
                                             // accumulation-fusion (grad_add)
  bool cross_entropy_fusion = false;   // --cross-entropy-loss-fusion (memory and traffic of the logits)
  bool cross_entropy_te = false;       // with it, --cross-entropy-fusion-impl te (default native)
};

struct CostModel {
  ModelConfig model;
  HardwareProfile hardware;
  ClusterConfig cluster;
  TrainingOptions training;
};

// "simulated:dcp-cost-v1@<calibration>" (calibration = hardware.calibration, e.g.
// "h100-sxm-public" or "h100-measured").
std::string source_label(const CostModel& cm);

// ---- geometry -----------------------------------------------------------------------------
int gpu_id(const ClusterConfig& cluster, int pp_stage, int pool_rank, int tp_rank);
// True if the pool ranks [first_pool_rank, first_pool_rank + cp_size) (x tp GPUs each) span
// more than one node.
// (Pipeline stage 0; the overload takes the stage, which matters only when N*tp is neither a
// multiple nor a divisor of gpus_per_node.)
bool group_crosses_nodes(const ClusterConfig& cluster, int first_pool_rank, int cp_size);
bool group_crosses_nodes(const ClusterConfig& cluster, int pp_stage, int first_pool_rank,
                         int cp_size);
// Layers held by virtual stage v in [0, pp*vpp); v = chunk*pp + pp_stage (Megatron's order).
int layers_of_virtual_stage(const ModelConfig& model, const ClusterConfig& cluster, int v);

// ---- per micro-batch -------------------------------------------------------------------
struct PassTime {
  double compute_s = 0;         // GEMM + attention kernels (incl. the recompute forward)
  double recompute_s = 0;       // part of compute_s that is the recompute forward (bwd only)
  double comm_exposed_s = 0;    // CP communication not hidden behind compute (+ latencies)
  double overhead_s = 0;        // host floor excess over GPU time (backward: or the ring's sync
                                // idle, whichever is larger) + half the micro-batch overhead
  double total_s() const { return compute_s + comm_exposed_s + overhead_s; }
  bool operator==(const PassTime&) const = default;  // every field (exact)
};

struct StageTimes {
  PassTime fwd;
  PassTime bwd;   // includes the recompute forward when recompute_full
  double p2p_s = 0;  // transfer over the link between this stage and the next one (activations
                     // forward, their gradients backward: the same link both ways)
  // A packed (THD) plan's blocking shape exchange before each transfer on that link: Megatron
  // sets variable_seq_lengths with sequence packing (d48bd6be0a transformer_config.py:3688;
  // 3b309c627e arguments.py:815-816), and _communicate then first swaps the tensors' shapes
  // (three int64 each) in a batched call that waits for its requests and synchronises the
  // device (p2p_communication.py:186-273, 322-325): charged as one small-message latency of the
  // link, a lower bound (its host copies, the device sync and .tolist() are not counted). 0 for
  // a padded (bshd) plan, whose shapes are fixed (variable_seq_lengths stays False).
  double p2p_shape_s = 0;
  bool operator==(const StageTimes&) const = default;  // every field (exact)
};

// The layout TE's ring attention runs on (its qkv_format): thd for a packed plan, bshd for a
// padded one (plan.pad_to > 0: one sequence per group, b = 1). Only the ring's host cost per call
// and step and its side kernels differ (HardwareProfile ring_call_* / ring_step_* / thd_side_* vs bshd_*;
// thd_flash_ring_bwd_sync_s and thd_fused_fill_* are THD's only).
enum class QkvFormat { thd, bshd };

// Tensor parallelism's collectives of one transformer layer on one GPU of a CP rank holding
// `tokens` tokens (tp > 1 with sequence parallelism; all 0 at tp = 1; see "TP" above):
// collective_s, one all-gather or reduce-scatter of the [tokens, h] bf16 activation over the TP
// group; fwd_exposed_s = 4 of them; bwd_exposed_s = 2 of them + the excess of each of the 4
// asynchronous ones over the GEMM it runs under (the QKV and FC1 linears' dgrad and wgrad GEMMs,
// with the GEMM efficiency read at gemm_eff_tokens).
struct TpLayerComm {
  double collective_s = 0;
  double fwd_exposed_s = 0;
  double bwd_exposed_s = 0;
};
TpLayerComm tp_layer_comm(const CostModel& cm, double tokens, double gemm_eff_tokens);
// TP's counts per transformer layer, one place for the time model and the lower bound: the
// synchronous collectives (forward: 2 all-gathers + 2 reduce-scatters; backward: the two
// row-parallel linears' output-gradient gathers) and the host calls (each collective, and each
// asynchronous one's wait: 4 forward, 10 backward).
inline constexpr int kTpSyncCollectivesFwd = 4;
inline constexpr int kTpSyncCollectivesBwd = 2;
inline constexpr int kTpHostCallsFwd = 4;
inline constexpr int kTpHostCallsBwd = 10;
// The bandwidth part of one TP all-gather or reduce-scatter of `tokens` x h bf16 on one GPU (0 at
// tp = 1): (tp - 1) / tp of the activation over NVLink; tp_layer_comm adds its tp - 1 latencies.
double tp_collective_bandwidth_s(const CostModel& cm, double tokens);

// Host side of one layer's ring attention on a group of k ranks, per pass (all 0 at k = 1 and
// for all-gather CP): the call's prelude, diagonal step and epilogue plus k - 1 later steps, in
// the plan's layout and the backend's TE path (HardwareProfile ring_call_* + (k - 1)
// ring_step_*, their bshd_* keys, and cudnn_* for the fused path), and the GPU idle time of the
// backward's device syncs (thd_flash_ring_bwd_sync_s: THD on the flash path). fwd_s and bwd_s add
// to the pass's host issue time, bwd_sync_s to its GPU time: pass = max(GPU + idle, host).
struct RingHost {
  double fwd_s = 0;
  double bwd_s = 0;
  double bwd_sync_s = 0;
};
RingHost ring_host(const CostModel& cm, int cp_size, QkvFormat format);

// Time of one CP group (every rank of it: identical work) running the sequences `lengths`
// (tokens, full lengths, not divided by cp) through virtual stage v. first_pool_rank locates the
// group for the node-crossing test.
StageTimes group_stage_times(const CostModel& cm, std::span<const int64_t> lengths_tokens,
                             int cp_size, int first_pool_rank, int virtual_stage,
                             QkvFormat format = QkvFormat::thd);

// A sequence's attention kernel times on a ring of k ranks, per layer (the sums the ring's steps
// take of it: the diagonal step's forward and backward, an off-diagonal step's), memoised by
// (length, k) for one cost model: they depend on nothing else (not on the link, the layout or
// the sequences packed beside it), and the attention-table reads behind them were most of a
// group's cost (perf, 2026-12-06). A caller that costs many groups of the same samples (the
// planners' scorers: harness planner_options_of, through sim::simulate_step) passes one to
// group_stage_times_all; the sums are taken in the same order with the same values, so the
// result is the same to the bit. The cost model it is made for (held by reference, checked by
// address on each use) must outlive it and not change while it is in use: its entries would not
// follow. Not thread-safe (that caller holds a mutex per simulation); at most max(1, max_entries)
// entries (cleared when full; ~72-80 B each with the hash table's node and bucket, so
// ~18-20 MiB at the default).
class AttnTermsMemo {
 public:
  static constexpr size_t kMaxEntries = size_t{1} << 18;
  explicit AttnTermsMemo(const CostModel& cm, size_t max_entries = kMaxEntries) : cm_(cm), max_entries_(max_entries) {}
  const CostModel& cost_model() const { return cm_; }
  // {diagonal fwd, diagonal bwd, off-diagonal fwd, off-diagonal bwd} (the last two 0 at k = 1).
  const std::array<double, 4>& at(int64_t length, int k);
  size_t entries() const { return map_.size(); }

 private:
  struct KeyHash {
    size_t operator()(const std::pair<int64_t, int>& x) const noexcept {
      return std::hash<uint64_t>()(static_cast<uint64_t>(x.first) * 131 + static_cast<uint64_t>(x.second));
    }
  };
  const CostModel& cm_;
  const size_t max_entries_;
  std::unordered_map<std::pair<int64_t, int>, std::array<double, 4>, KeyHash> map_;
};

// group_stage_times of every virtual stage 0 .. pp * vpp - 1, in order: the same values, with
// the group's per-layer times (the attention-table reads, most of the cost) computed once per
// distinct CP link rather than once per virtual stage (the simulator builds every group's stages:
// 40 of them at PP 8 / VPP 5). `memo` (made for `cm`; nullptr: none): the sequences' attention
// times read through it (AttnTermsMemo).
std::vector<StageTimes> group_stage_times_all(const CostModel& cm, std::span<const int64_t> lengths_tokens,
                                              int cp_size, int first_pool_rank, QkvFormat format = QkvFormat::thd,
                                              AttnTermsMemo* memo = nullptr);

// Compute-only GPU time of one sequence processed alone by a group of cp_size ranks (summed over
// those ranks) through all layers, fwd + bwd (+ recompute), summed over stages, with GEMM
// efficiency taken at `gemm_tokens` tokens (the lower bound uses the per-rank budget M); no CP
// communication, no THD side kernels, no host floor. Divided by tp (one GPU's share). At tp > 1
// it includes the bandwidth time of TP's synchronous collectives (tp_layer_comm: 4 per layer
// forward, 2 backward, 4 more with full recompute; no latencies), serial on every GPU whatever the
// plan, so the lower bound keeps them. The FLOPs do
// not depend on cp_size, the time does: a ring step runs its attention at shorter (and, past the
// diagonal, non-causal) shapes, which the attention tables may rate faster than one (L, L) causal
// kernel, so the lower bound takes the minimum over the group sizes a plan may use.
double sequence_compute_s(const CostModel& cm, int64_t length_tokens, double gemm_tokens, int cp_size = 1);
// The part of sequence_compute_s on the last pipeline stage only: output layer (fwd + bwd) and loss.
double sequence_head_compute_s(const CostModel& cm, int64_t length_tokens, double gemm_tokens);
// sequence_compute_s split by pass, for the lower bound, which charges each pass max(GPU, host):
// per transformer layer, summed over the cp_size ranks, one forward (layer_fwd_s) and one backward
// with the recompute forward when recompute_full (layer_bwd_s); the output layer and loss of the
// last stage, forward (its GEMM + half the loss) and backward (gemm_bwd_factor x the GEMM + the
// other half), as cost::group_stage_times splits them. sequence_compute_s = layers x (layer_fwd_s
// + layer_bwd_s) + head_fwd_s + head_bwd_s; sequence_head_compute_s = head_fwd_s + head_bwd_s.
struct SequenceCompute {
  double layer_fwd_s = 0, layer_bwd_s = 0, head_fwd_s = 0, head_bwd_s = 0;
  double total_s(int layers) const { return layers * (layer_fwd_s + layer_bwd_s) + head_fwd_s + head_bwd_s; }
};
SequenceCompute sequence_compute_split(const CostModel& cm, int64_t length_tokens, double gemm_tokens,
                                       int cp_size = 1);

// The main-gradient adds of one backward pass of virtual stage v: their GPU time and their host
// time (see the file comment).
struct GradAddTime {
  double gpu_s = 0;
  double host_s = 0;
};
GradAddTime grad_add(const CostModel& cm, int virtual_stage);

// Host time of one micro-batch's fixed work on a virtual stage (both passes): microbatch_every_stage_s,
// plus microbatch_first_stage_s on the first virtual stage (embedding) and
// microbatch_last_stage_s on the last (output layer and loss).
double microbatch_overhead(const CostModel& cm, int virtual_stage);

// ---- DP x CP gradient sync -------------------------------------------------------------
struct GradSyncTime {
  double reduce_s = 0;  // all-reduce (no distributed optimizer) or reduce-scatter of the grads
  double gather_s = 0;  // bf16 param all-gather (distributed optimizer only)
  // --check-for-nan-in-loss-and-grad: before the reduce, start_grad_sync takes the L2 norm of
  // every bucket's grad_data and tests it for NaN and Inf [Megatron-LM 3b309c627e
  // megatron/core/distributed/param_and_grad_buffer.py:188-213, 353-357]: one HBM read of the
  // stage's whole grad buffer (its dtype). On the compute stream, before each bucket's reduce, so
  // never hidden by the reduce's overlap. (Each test converts a device tensor to a bool, a host
  // sync; ~25 us each, not charged.)
  double check_s = 0;
  // With overlap (--overlap-grad-reduce / --overlap-param-gather), the parts no overlap hides
  // [Megatron-LM d98e8a64dd]: gather_waited_s, waited by the first forward before it computes:
  // without VPP align_param_gather is off (training/arguments.py:1013), so the first forward
  // pre-hook dispatches the all-gather and waits for its first bucket
  // (core/distributed/distributed_data_parallel.py:517-538), which on a stage after the first is
  // the whole buffer (bucketing off there, :160-171) and on the first stage the embedding's
  // bucket, laid out last and needed first (buffers in backward order; the parameter that passes
  // the bucket size closes the bucket with those added before it, distrib_optimizer.py:552-577,
  // so the embedding's share is a floor); with VPP the first stage waits for the whole of chunk
  // 0's gather (time_model.cpp); reduce_tail_s, the embedding bucket's reduce on the first stage,
  // ready only when the last backward ends (any VPP). The rest overlaps as before.
  double gather_waited_s = 0;
  double reduce_tail_s = 0;
  // Tied embeddings with pp > 1, on the first and the last stage (0 elsewhere): the last stage
  // keeps its own copy of the word embedding as the output weight, and after each end stage's own
  // grad sync (finish_grad_sync) finalize_model_grads all-reduces that weight's main gradient over the
  // embedding group, the first and the last stage's GPUs of one DP x CP x TP coordinate
  // [Megatron-LM d98e8a64dd megatron/core/distributed/finalize_model_grads.py:671-677, the
  // all_reduce at :258; the group, parallel_state.py default_embedding_ranks: the pipeline's first
  // and last rank]. A ring all-reduce of two ranks: each sends and receives the whole
  // vocab x hidden / tp gradient in the grad dtype over the link between the two GPUs (NVLink on
  // one node, else its share of the node's NICs among that node's end-stage GPUs whose partner is
  // on another node), two latencies. Serial: the two stages start it when both have reduced their
  // grads and finish together (simulator), before the param all-gather (the distributed
  // optimizer's, in optimizer.step).
  double embedding_s = 0;
  bool overlap = false; // training.overlap_grad_reduce
};
// For the GPUs of one pipeline stage (parameters of that stage's layers / tp; embedding on stage
// 0, output layer and final norm on the last stage).
GradSyncTime grad_sync_time(const CostModel& cm, int pp_stage);
// GradSyncTime::embedding_s of stage s (0 unless tied embeddings, pp > 1 and s first or last).
double tied_embedding_allreduce_s(const CostModel& cm, int pp_stage);
// Parameters held by one GPU of pipeline stage s (its layers, embedding on stage 0, output layer
// on the last one; / tp).
double stage_params(const CostModel& cm, int pp_stage);
// Bandwidth and latency of a collective over `ranks` pool ranks starting at 0 on stage s.
double pool_collective_bytes_per_s(const CostModel& cm, int pp_stage, int ranks);

// ---- per iteration ------------------------------------------------------------------------
struct IterationTime {
  double optimizer_s = 0;  // Adam + grad norm on the GPU's shard, zeroing and scaling the stage's
                           // whole grad buffer (slowest stage)
  double fixed_s = 0;      // iteration_overhead_s
  double data_s = 0;       // sequence-packing plans: length all-gathers + re-route + host data path
  // In series: an upper estimate by the host time of the launches issued before the first sync.
  // With the L2 norm and TE the grad-norm stays a device tensor (Megatron-LM d98e8a64dd
  // megatron/core/optimizer/clip_grads.py:107-136; the .item() at 105 is the inf-norm branch's),
  // so the host issues the norm, the clip and the Adam launches behind the backward without
  // waiting; the first sync is train_step's reduce_max_stat_across_model_parallel_group on the
  // norm (megatron/training/training.py:3201, utils/common_utils.py:287-291, .item()) after
  // optimizer.step() (training.py:3165), and another follows it (get_loss_scale().item(),
  // training.py:4867-4869: "a device sync draining the iteration's pending GPU queue"), so the
  // optimizer's GPU work is waited for before the logging's host ops. Only the launches issued
  // before that sync (the norm, the clip and the Adam multi-tensor calls: a few dozen of
  // iteration_overhead_s's ~200 ops) can overlap GPU time.
  double total_s() const { return optimizer_s + fixed_s + data_s; }
};
// packed: the plan goes through Megatron's sequence-packing scheduler (plan.pad_to == 0).
// max_recv_tokens_per_rank: the most tokens one pool rank receives in the step, every sample of
// its groups counted whole (the re-route volume; CP siblings each receive the whole sample and
// slice it afterwards).
IterationTime iteration_time(const CostModel& cm, bool packed, double max_recv_tokens_per_rank);

// ---- harness helpers --------------------------------------------------------------------
// Useful FLOPs of a batch (Megatron's formula over the real lengths; never includes recompute).
inline double useful_flops(const ModelConfig& model, std::span<const int64_t> real_lengths_tokens) {
  return train_flops_of_lengths(model, real_lengths_tokens);
}
inline double tflops_per_gpu(double useful_flops, double step_s, int gpus) {
  return useful_flops / (step_s * gpus) / 1e12;
}

}  // namespace dcp::cost
