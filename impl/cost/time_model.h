// Time model: seconds for one CP group to run one micro-batch through one (virtual) pipeline
// stage, forward and backward, on each of its ranks; plus DP x CP gradient sync and the helpers
// the harness needs (useful FLOPs, TFLOPS/GPU, the source label).
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
//   attention, ring (TE p2p, zigzag/DualChunkSwap): k steps. Each step does 1/k of the rank's
//          attention FLOPs for every sequence (2*q*L^2/k^2 per sequence, / tp): step 0 is the
//          diagonal (causal kernel, eff = fwd_causal(L/k)), steps 1..k-1 are half blocks
//          (non-causal kernels, eff = fwd_full(L/k)). Efficiency is looked up per sequence at its
//          local length L/k (what the kernel sees).
//          Steps 0..k-2 overlap the send of the local KV to the next rank:
//            bytes = 2 (K,V) * T * kv_heads/tp * head_dim * 2 (bf16)
//            step_s = max(compute_s, bytes / bw) + latency; last step = compute_s.
//          bw/latency are inter-node if the group spans nodes, else intra-node.
//   attention, all-gather (TE "all_gather"): all-gather of KV before attention, not overlapped:
//            (k-1) * bytes / bw + (k-1) * latency, then the rank's causal work at fwd_causal(L/k).
//   backward = gemm_bwd_factor (2: dgrad + wgrad) x fwd GEMM FLOPs, attn_bwd_factor (2.5, FA's
//          5 vs 2 matmuls) x fwd attention FLOPs at the bwd curve; ring bwd moves KV and dKV
//          (2 x bytes per step); all-gather bwd adds a reduce-scatter of dKV (same bytes).
//   recompute (full): the forward is run again before each backward (compute + its CP comm).
//   logits: fwd_logits_flops_per_token * T / tp on the last virtual stage (bwd x gemm_bwd_factor),
//          plus the memory-bound cross-entropy loss_bytes_per_token_vocab * V * T / tp / HBM
//          (half in fwd, half in bwd).
//   element-wise (norms, residuals, RoPE, activation): elementwise_bytes_per_token_hidden * h * T
//          / tp / HBM per layer fwd, 2x in bwd.
//   TP: divides FLOPs and KV heads by tp; TP collectives are not modelled (scenarios use TP1).
//   PP p2p activations: T*h*2 bytes over the inter-stage link (inter-node if gpus_per_node <=
//          N*tp, i.e. stages on different nodes), charged to the dependency edge by the simulator.
//   plus profile.microbatch_overhead_s per pass.
#pragma once

#include "cost/flops.h"
#include "cost/hardware.h"

#include <cstdint>
#include <span>
#include <string>

namespace dcp::cost {

// Name of this cost model in source labels; bump when formulas change.
inline constexpr const char* kCostModelName = "dcp-cost-v1";

enum class CpComm { ring, all_gather };

struct ClusterConfig {
  int gpus = 1;           // total GPUs = tp * pp * dp * cp
  int tp = 1;
  int pp = 1;
  int cp = 1;             // static CP (fixes the pool N = dp*cp with dp = gpus/(tp*pp*cp))
  int vpp = 1;            // virtual pipeline chunks per stage (interleaved 1F1B when > 1)
  int gpus_per_node = 8;  // overrides the profile's value (the scenario decides)

  int pool() const { return gpus / (tp * pp); }  // N = dp*cp
  int dp() const { return pool() / cp; }
};

// Throws InputError naming the bad field (gpus not divisible by tp*pp*cp, ...).
void validate_cluster(const ClusterConfig& cluster);

struct TrainingOptions {
  bool recompute_full = false;       // Megatron --recompute-granularity full
  CpComm cp_comm = CpComm::ring;
  double gemm_bwd_factor = 2.0;      // bwd GEMM FLOPs / fwd (dgrad + wgrad)
  double attn_bwd_factor = 2.5;      // bwd attention FLOPs / fwd (FA2/FA3 convention)
  bool overlap_grad_reduce = true;   // DP reduce-scatter overlaps the last backward, param
                                     // all-gather overlaps the first forward
  bool grad_reduce_fp32 = false;     // Megatron DistributedDataParallelConfig.grad_reduce_in_fp32
                                     // defaults to False (bf16 grads, 2 B); true = 4 B
                                     // (--accumulate-allreduce-grads-in-fp32)
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
  double overhead_s = 0;        // profile.microbatch_overhead_s
  double total_s() const { return compute_s + comm_exposed_s + overhead_s; }
};

struct StageTimes {
  PassTime fwd;
  PassTime bwd;   // includes the recompute forward when recompute_full
  double p2p_s = 0;  // transfer over the link between this stage and the next one (activations
                     // forward, their gradients backward: the same link both ways)
};

// Time of one CP group (every rank of it: identical work) running the sequences `lengths`
// (tokens, full lengths, not divided by cp) through virtual stage v. first_pool_rank locates the
// group for the node-crossing test.
StageTimes group_stage_times(const CostModel& cm, std::span<const int64_t> lengths_tokens,
                             int cp_size, int first_pool_rank, int virtual_stage);

// Compute-only time of one sequence processed alone (cp = 1) through all layers, fwd + bwd
// (+ recompute), summed over stages, with GEMM efficiency taken at `gemm_tokens` tokens
// (the lower bound uses the per-rank budget M). Divided by tp (one GPU's share).
double sequence_compute_s(const CostModel& cm, int64_t length_tokens, double gemm_tokens);

// ---- DP x CP gradient sync (distributed optimizer) ---------------------------------------
struct GradSyncTime {
  double reduce_scatter_s = 0;  // grads (fp32 or bf16) over the pool of N ranks, ring
  double all_gather_s = 0;      // bf16 params
};
// For the GPUs of one pipeline stage (parameters of that stage's layers / tp; embedding on stage
// 0, output layer and final norm on the last stage). Inter-node bandwidth if the pool spans nodes.
GradSyncTime grad_sync_time(const CostModel& cm, int pp_stage);

// ---- harness helpers --------------------------------------------------------------------
// Useful FLOPs of a batch (Megatron's formula over the real lengths; never includes recompute).
inline double useful_flops(const ModelConfig& model, std::span<const int64_t> real_lengths_tokens) {
  return train_flops_of_lengths(model, real_lengths_tokens);
}
inline double tflops_per_gpu(double useful_flops, double step_s, int gpus) {
  return useful_flops / (step_s * gpus) / 1e12;
}

}  // namespace dcp::cost
