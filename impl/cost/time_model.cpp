// Time model (formulas and assumptions in time_model.h). Invariants: every time is >= 0; a group
// of size k = 1 has no CP communication, no ring steps and no THD side kernels; the FLOPs charged
// for the forward of one sequence at any k add up to fwd_layer_* x layers (zigzag splits work
// evenly over the k ring steps).
#include "cost/time_model.h"

#include "core/error.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <iterator>
#include <utility>
#include <vector>

namespace dcp::cost {
namespace {

constexpr double kBf16Bytes = 2.0;
// Collectives of the sequence-packing re-route: one all_to_all_single per sample key of
// MockVarlenDataset a PP = 1 rank keeps (tokens, labels, loss_mask, position_ids,
// original_seq_len, padded_seq_len: Megatron-LM 192cbc3554 data_schedule.py:267-275). With
// PP > 1 the first stage keeps tokens and position_ids, the last labels and loss_mask (plus the
// two lengths), so 6 collectives and reroute_bytes_per_token (all four token keys) overstate their
// path by two latencies and 12-16 B per token: noise next to those scenarios' steps of seconds.
constexpr double kRerouteCollectives = 6.0;

// Per-layer times of one rank's share of a group (k ranks, sequences `lengths`).
struct LayerTimes {
  double fwd_compute_s = 0;
  double fwd_comm_exposed_s = 0;
  double bwd_compute_s = 0;
  double bwd_comm_exposed_s = 0;
};

struct Link {
  double bytes_per_s;
  double latency_s;
};

Link cp_link(const CostModel& cm, int stage, int first_pool_rank, int k) {
  if (group_crosses_nodes(cm.cluster, stage, first_pool_rank, k))
    return {cm.hardware.inter_node_bytes_per_s, cm.hardware.inter_node_latency_s};
  return {cm.hardware.intra_node_bytes_per_s, cm.hardware.intra_node_latency_s};
}

// Whether TE runs the model's attention on its fused (cuDNN) path, else its flash path (fa2, fa3,
// and dcpbench's own kernels as that path would call them): the ring's host ops and cuDNN's
// zero-fills depend on it (HardwareProfile).
bool te_fused_path(const CostModel& cm) { return cm.training.attention_backend == "cudnn"; }

double attn_time(const CostModel& cm, AttnKind kind, double flops, double q, double k, int d) {
  return flops / (cm.hardware.peak_flops_per_s *
                  cm.hardware.attn_efficiency(cm.training.attention_backend, kind, q, k, d));
}

// A sequence of l tokens on a ring of k ranks, per layer: {diagonal step fwd, bwd; off-diagonal
// step fwd, bwd} (AttnTermsMemo::at). Per ring step one rank does 2*q*L^2/k^2 FLOPs (1/k of its
// share); an off-diagonal step runs both half-block shapes and the group waits for the slower.
std::array<double, 4> ring_attn_terms(const CostModel& cm, int64_t l, int k) {
  const auto& m = cm.model;
  const auto& tr = cm.training;
  const int d = static_cast<int>(m.head_dim_or_default());
  const double attn_c = fwd_layer_attn_flops_per_token_sq(m) / cm.cluster.tp;
  const double local = static_cast<double>(l) / k;
  const double half = local / 2;
  const double step_flops = attn_c * local * local;  // = 2q L^2 / k^2 / tp
  std::array<double, 4> t{attn_time(cm, AttnKind::fwd_causal, step_flops, local, local, d),
                          attn_time(cm, AttnKind::bwd_causal, tr.attn_bwd_factor * step_flops, local, local, d), 0.0,
                          0.0};
  if (k > 1) {
    t[2] = std::max(attn_time(cm, AttnKind::fwd_full, step_flops, local, half, d),
                    attn_time(cm, AttnKind::fwd_full, step_flops, half, local, d));
    t[3] = std::max(attn_time(cm, AttnKind::bwd, tr.attn_bwd_factor * step_flops, local, half, d),
                    attn_time(cm, AttnKind::bwd, tr.attn_bwd_factor * step_flops, half, local, d));
  }
  return t;
}

}  // namespace

double tp_collective_bandwidth_s(const CostModel& cm, double tokens) {
  const double tp = cm.cluster.tp;
  if (tp <= 1) return 0.0;
  return (tp - 1.0) * tokens * static_cast<double>(cm.model.hidden) * kBf16Bytes / tp / cm.hardware.intra_node_bytes_per_s;
}

TpLayerComm tp_layer_comm(const CostModel& cm, double tokens, double gemm_eff_tokens) {
  const int tp = cm.cluster.tp;
  if (tp <= 1) return {};
  const auto& m = cm.model;
  const auto& hw = cm.hardware;
  const double h = static_cast<double>(m.hidden);
  // A ring all-gather or reduce-scatter over the node's tp GPUs of the [T, h] bf16 activation:
  // tp - 1 steps of one T / tp shard each, at NVLink's bandwidth per direction and latency
  // (validate_cluster keeps a TP group on one node), the convention of the DP x CP collectives.
  TpLayerComm c;
  c.collective_s = tp_collective_bandwidth_s(cm, tokens) + (tp - 1) * hw.intra_node_latency_s;
  // The GEMMs the backward's asynchronous collectives run under: the column-parallel QKV and FC1
  // linears' dgrad and wgrad GEMMs, each the forward GEMM's FLOPs (gemm_bwd_factor / 2 of it).
  const double rate = hw.peak_flops_per_s * hw.gemm_efficiency_at(gemm_eff_tokens);
  const double half_bwd = cm.training.gemm_bwd_factor / 2.0;
  const double qkv_s = half_bwd * 2.0 * h * static_cast<double>(m.q_dim() + 2 * m.kv_dim()) * tokens / tp / rate;
  const double fc1_s = half_bwd * 2.0 * h * (mlp_mult(m) - 1.0) * static_cast<double>(m.ffn) * tokens / tp / rate;
  c.fwd_exposed_s = kTpSyncCollectivesFwd * c.collective_s;
  c.bwd_exposed_s = kTpSyncCollectivesBwd * c.collective_s;
  for (double g : {qkv_s, fc1_s}) c.bwd_exposed_s += 2.0 * std::max(0.0, c.collective_s - g);
  return c;
}

namespace {

// gemm_eff_tokens: tokens at which the GEMM efficiency is read (T for the real model; M for the
// lower bound). with_comm = false drops CP communication, side kernels and cuDNN's zero-fills
// (lower bound). memo: the sequences' ring attention times memoised (AttnTermsMemo), or nullptr.
LayerTimes layer_times(const CostModel& cm, std::span<const int64_t> lengths, int k,
                       double gemm_eff_tokens, const Link& link, bool with_comm,
                       QkvFormat format = QkvFormat::thd, AttnTermsMemo* memo = nullptr) {
  const auto& m = cm.model;
  const auto& hw = cm.hardware;
  const auto& tr = cm.training;
  const double tp = cm.cluster.tp;
  const int d = static_cast<int>(m.head_dim_or_default());
  double tokens = 0;
  for (int64_t l : lengths) tokens += static_cast<double>(l);
  tokens /= k;

  LayerTimes t;
  // GEMMs (QKV, output projection, MLP) on the rank's T tokens.
  const double gemm_fwd_s = fwd_layer_gemm_flops_per_token(m) * tokens / tp /
                            (hw.peak_flops_per_s * hw.gemm_efficiency_at(gemm_eff_tokens));
  // Memory-bound element-wise ops (norms, residuals, RoPE, activation).
  const double ew_fwd_s = hw.hbm_bytes_per_s > 0 ? hw.elementwise_bytes_per_token_hidden *
                                                       static_cast<double>(m.hidden) * tokens / tp /
                                                       hw.hbm_bytes_per_s
                                                 : 0.0;
  t.fwd_compute_s += gemm_fwd_s + ew_fwd_s;
  t.bwd_compute_s += tr.gemm_bwd_factor * gemm_fwd_s + 2.0 * ew_fwd_s;
  // Tensor parallelism's collectives (tp > 1; tp_layer_comm): serial with the compute, so exposed,
  // but for the backward's asynchronous ones under their GEMMs. (The lower bound keeps the
  // synchronous ones' bandwidth time: sequence_compute_split.)
  if (with_comm && cm.cluster.tp > 1) {
    const TpLayerComm c = tp_layer_comm(cm, tokens, gemm_eff_tokens);
    t.fwd_comm_exposed_s += c.fwd_exposed_s;
    t.bwd_comm_exposed_s += c.bwd_exposed_s;
  }

  // Attention. Per sequence, one ring step does 2*q*L^2/k^2 FLOPs (1/k of the rank's share).
  const double attn_c = fwd_layer_attn_flops_per_token_sq(m) / tp;
  const double kv_bytes = 2.0 * tokens * (static_cast<double>(m.kv_heads) / tp) * d * kBf16Bytes;
  if (k == 1 || cm.training.cp_comm == CpComm::ring) {
    double diag_fwd = 0, diag_bwd = 0, off_fwd = 0, off_bwd = 0;
    for (int64_t l : lengths) {
      const std::array<double, 4> a = memo ? memo->at(l, k) : ring_attn_terms(cm, l, k);
      diag_fwd += a[0];
      diag_bwd += a[1];
      if (k > 1) {
        off_fwd += a[2];
        off_bwd += a[3];
      }
    }
    // Step 0 (diagonal) .. step k-1. Forward: steps 0..k-2 overlap the send of the KV the next
    // step needs. Backward (TE d0067d0 context_parallel.py, AttnFuncWithCPAndKVP2P.backward,
    // 2459-2495 and 2717-2719, non-fp8): every step issues its transfer before its attention
    // and waits for it before its dKV correction; step 0 sends KV only, steps 1..k-2 KV and the
    // dKV accumulated so far, step k-1 dKV only. Same bytes as KV + dKV on k-1 steps, spread
    // over k steps, with k latencies.
    const double comm_fwd = with_comm ? kv_bytes / link.bytes_per_s : 0.0;
    const auto comm_bwd = [&](int s) { return s == 0 || s == k - 1 ? comm_fwd : 2.0 * comm_fwd; };
    const double lat = with_comm ? link.latency_s : 0.0;
    if (!with_comm) {  // compute only (the lower bound): O(1) in k
      t.fwd_compute_s += diag_fwd + (k - 1) * off_fwd;
      t.bwd_compute_s += diag_bwd + (k - 1) * off_bwd;
      return t;
    }
    for (int s = 0; s < k; ++s) {
      const double cf = s == 0 ? diag_fwd : off_fwd;
      const double cb = s == 0 ? diag_bwd : off_bwd;
      t.fwd_compute_s += cf;
      t.bwd_compute_s += cb;
      // The transfer, latency included, runs under the step's compute.
      if (s < k - 1) t.fwd_comm_exposed_s += std::max(cf, comm_fwd + lat) - cf;
      if (k > 1) t.bwd_comm_exposed_s += std::max(cb, comm_bwd(s) + lat) - cb;
    }
    const double q_dim = static_cast<double>(m.q_dim()) / tp, kv_dim = static_cast<double>(m.kv_dim()) / tp;
    // cuDNN's THD zero-fills (HardwareProfile thd_fused_fill_*; TE's fused path), on every call:
    // rows of the call's Q and KV summed over the k steps; an off-diagonal step has all of one and
    // half of the other (lower: half of KV, upper: half of Q), half of them each on average over
    // the ranks.
    if (format == QkvFormat::thd && te_fused_path(cm) && hw.hbm_bytes_per_s > 0) {
      const double rows = tokens * (1.0 + 0.75 * (k - 1));
      t.fwd_compute_s += rows * hw.thd_fused_fill_fwd_bytes_q * q_dim / hw.hbm_bytes_per_s;
      t.bwd_compute_s +=
          rows * (hw.thd_fused_fill_bwd_bytes_q * q_dim + hw.thd_fused_fill_bwd_bytes_kv * kv_dim) / hw.hbm_bytes_per_s;
    }
    // Side kernels: HBM traffic per step after the first, proportional to (k-1) * T, plus the
    // first step's corrections and each pass's KV copy into its first send buffer (hardware.cpp),
    // proportional to T; THD's or, for a padded plan, bshd's (its halves are views: no read-half
    // copies), whose KV copies and first backward step are THD's.
    if (k > 1 && hw.hbm_bytes_per_s > 0) {
      const bool bshd = format == QkvFormat::bshd;
      const double steps = k - 1;
      const double fwd_q = bshd ? hw.bshd_side_fwd_bytes_q : hw.thd_side_fwd_bytes_q;
      const double fwd_kv = bshd ? hw.bshd_side_fwd_bytes_kv : hw.thd_side_fwd_bytes_kv;
      const double bwd_q = bshd ? hw.bshd_side_bwd_bytes_q : hw.thd_side_bwd_bytes_q;
      const double bwd_kv = bshd ? hw.bshd_side_bwd_bytes_kv : hw.thd_side_bwd_bytes_kv;
      const double first_fwd_q = bshd ? hw.bshd_side_first_fwd_bytes_q : hw.thd_side_first_fwd_bytes_q;
      t.fwd_compute_s += tokens *
                         (steps * (fwd_q * q_dim + fwd_kv * kv_dim) + first_fwd_q * q_dim +
                          hw.thd_side_first_fwd_bytes_kv * kv_dim) /
                         hw.hbm_bytes_per_s;
      t.bwd_compute_s += tokens *
                         (steps * (bwd_q * q_dim + bwd_kv * kv_dim) +
                          hw.thd_side_first_bwd_bytes_q * q_dim + hw.thd_side_first_bwd_bytes_kv * kv_dim) /
                         hw.hbm_bytes_per_s;
    }
  } else {
    // All-gather KV (k-1 ring hops), then the rank's causal share (its L/k queries against the
    // whole sequence), not overlapped; backward re-gathers KV and reduce-scatters dKV. Not
    // charged: TE's reorders (context_parallel.py d0067d0, AttnFuncWithCPAndKVAllGather) of the
    // gathered K/V into sequence order (forward 3222-3223, backward again 3796-3797) and of dK/dV
    // back into rank order (4105-4106), HBM traffic of a few gathered K/V copies (k x the rank's
    // tokens each) per pass. No shipped scenario or strategy runs this path (only the cost and
    // bound tests set CpComm::all_gather); charge it before one does.
    double fwd = 0, bwd = 0;
    for (int64_t l : lengths) {
      const double local = static_cast<double>(l) / k;
      const double full = static_cast<double>(l);
      const double flops = attn_c * full * full / k;
      fwd += attn_time(cm, AttnKind::fwd_causal, flops, local, full, d);
      bwd += attn_time(cm, AttnKind::bwd_causal, tr.attn_bwd_factor * flops, local, full, d);
    }
    t.fwd_compute_s += fwd;
    t.bwd_compute_s += bwd;
    if (with_comm) {
      const double hop = kv_bytes / link.bytes_per_s + link.latency_s;
      t.fwd_comm_exposed_s += (k - 1) * hop;
      t.bwd_comm_exposed_s += 2.0 * (k - 1) * hop;
    }
  }
  return t;
}

double logits_fwd_s(const CostModel& cm, double tokens, double gemm_eff_tokens) {
  return fwd_logits_flops_per_token(cm.model) * tokens / cm.cluster.tp /
         (cm.hardware.peak_flops_per_s * cm.hardware.gemm_efficiency_at(gemm_eff_tokens));
}

// Memory-bound softmax cross-entropy over the logits (fwd + bwd), on the last stage.
double loss_s(const CostModel& cm, double tokens) {
  const auto& hw = cm.hardware;
  if (hw.hbm_bytes_per_s <= 0) return 0.0;
  const double bytes = !cm.training.cross_entropy_fusion ? hw.loss_bytes_per_token_vocab
                       : cm.training.cross_entropy_te  ? hw.loss_te_bytes_per_token_vocab
                                                       : hw.loss_fused_bytes_per_token_vocab;
  return bytes * static_cast<double>(cm.model.vocab) * tokens / cm.cluster.tp / hw.hbm_bytes_per_s;
}

int nics_per_node(const CostModel& cm) {
  return cm.cluster.nics_per_node > 0 ? cm.cluster.nics_per_node : cm.hardware.nics_per_node;
}

bool same_node(const ClusterConfig& c, int gpu_a, int gpu_b) {
  return gpu_a / c.gpus_per_node == gpu_b / c.gpus_per_node;
}

// Bandwidth of one GPU's transfer to a GPU on another node while `concurrent` GPUs of its node
// send at once, one peer each (not striped over the NICs like a ring collective,
// pool_collective_bytes_per_s): its share of the node's NICs, at most NVLink.
double nic_share_bytes_per_s(const CostModel& cm, int concurrent) {
  return std::min(cm.hardware.intra_node_bytes_per_s,
                  nics_per_node(cm) * cm.hardware.inter_node_bytes_per_s / std::max(1, concurrent));
}

// A ring collective over `ranks` pool ranks of stage s moving `frac * bytes` per rank.
double ring_collective_s(const CostModel& cm, int s, int ranks, double bytes_per_rank) {
  if (ranks <= 1) return 0.0;
  const bool inter = group_crosses_nodes(cm.cluster, s, 0, ranks);
  const double lat = inter ? cm.hardware.inter_node_latency_s : cm.hardware.intra_node_latency_s;
  return bytes_per_rank / pool_collective_bytes_per_s(cm, s, ranks) + (ranks - 1) * lat;
}

}  // namespace

void validate_cluster(const ClusterConfig& c) {
  DCP_REQUIRE(c.tp >= 1, "cluster: \"tp\"=", c.tp, " must be >= 1");
  DCP_REQUIRE(c.pp >= 1, "cluster: \"pp\"=", c.pp, " must be >= 1");
  DCP_REQUIRE(c.cp >= 1, "cluster: \"cp\"=", c.cp, " must be >= 1");
  DCP_REQUIRE(c.vpp >= 1, "cluster: \"vpp\"=", c.vpp, " must be >= 1");
  DCP_REQUIRE(c.gpus_per_node >= 1, "cluster: \"gpus_per_node\"=", c.gpus_per_node, " must be >= 1");
  DCP_REQUIRE(c.nics_per_node >= 0, "cluster: \"nics_per_node\"=", c.nics_per_node, " must be >= 0");
  DCP_REQUIRE(c.gpus >= 1 && c.gpus % (c.tp * c.pp * c.cp) == 0, "cluster: \"gpus\"=", c.gpus,
              " is not a multiple of tp*pp*cp=", c.tp * c.pp * c.cp);
  // Megatron's rank order puts a TP group on tp consecutive GPUs; the time model runs TP's
  // collectives over NVLink (tp_layer_comm), so a group must not span nodes.
  DCP_REQUIRE(c.gpus_per_node % c.tp == 0, "cluster: \"tp\"=", c.tp, " does not divide gpus_per_node=",
              c.gpus_per_node, " (a TP group would span nodes: TP over the inter-node network is not modelled)");
}

void validate_layout(const ModelConfig& m, const ClusterConfig& c) {
  // Megatron refuses these (megatron/core/transformer/transformer_config.py: "num_attention_heads
  // (a) must be a multiple of tensor_model_parallel_size (t)", the same for num_query_groups;
  // tensor_parallel/layers.py divides each column-parallel output, here the FFN width, by tp
  // ("... is not divisible by ..."); megatron/training/arguments.py: "number of layers should be
  // divisible by the pipeline parallel size", and with interleaving the layers per stage by the
  // layers per virtual stage). Without these checks 12 layers on 24 stages or TP 3 with 16 heads
  // gave TFLOPS numbers for a model that cannot be built.
  const int groups = m.kv_heads > 0 ? m.kv_heads : m.heads;
  DCP_REQUIRE(m.heads % c.tp == 0, "cluster: \"tp\"=", c.tp, " does not divide the model's ", m.heads,
              " attention heads (Megatron: num_attention_heads must be a multiple of tensor_model_parallel_size)");
  DCP_REQUIRE(groups % c.tp == 0, "cluster: \"tp\"=", c.tp, " does not divide the model's ", groups,
              " query groups (Megatron: num_query_groups must be a multiple of tensor_model_parallel_size)");
  DCP_REQUIRE(m.ffn % c.tp == 0, "cluster: \"tp\"=", c.tp, " does not divide the model's FFN width ", m.ffn,
              " (Megatron splits it over the tensor-parallel ranks)");
  DCP_REQUIRE(m.layers % (c.pp * c.vpp) == 0, "cluster: \"pp\"=", c.pp, " x \"vpp\"=", c.vpp,
              " does not divide the model's ", m.layers,
              " layers (Megatron: the layers split evenly over the pipeline's virtual stages)");
}

std::string source_label(const CostModel& cm) {
  return std::string("simulated:") + kCostModelName + "@" + cm.hardware.calibration;
}

int gpu_id(const ClusterConfig& c, int pp_stage, int pool_rank, int tp_rank) {
  return (pp_stage * c.pool() + pool_rank) * c.tp + tp_rank;
}

bool group_crosses_nodes(const ClusterConfig& c, int pp_stage, int first_pool_rank, int cp_size) {
  const int first_gpu = gpu_id(c, pp_stage, first_pool_rank, 0);
  const int last_gpu = gpu_id(c, pp_stage, first_pool_rank + cp_size - 1, c.tp - 1);
  return first_gpu / c.gpus_per_node != last_gpu / c.gpus_per_node;
}

bool group_crosses_nodes(const ClusterConfig& c, int first_pool_rank, int cp_size) {
  return group_crosses_nodes(c, 0, first_pool_rank, cp_size);
}

int layers_of_virtual_stage(const ModelConfig& m, const ClusterConfig& c, int v) {
  const int stages = c.pp * c.vpp;
  DCP_CHECK(v >= 0 && v < stages, "virtual stage ", v, " outside [0, ", stages, ")");
  return m.layers / stages + (v < m.layers % stages ? 1 : 0);
}

namespace {

// Tokens per rank of a group of k ranks running `lengths`.
double tokens_per_rank(std::span<const int64_t> lengths, int k) {
  double tokens = 0;
  for (int64_t l : lengths) tokens += static_cast<double>(l);
  return tokens / k;
}

// group_stage_times from the group's per-layer times `lt` (layer_times at the CP link of
// virtual stage v's pipeline stage) and its tokens per rank.
StageTimes stage_times_of(const CostModel& cm, const LayerTimes& lt, double tokens, int k, int first_pool_rank, int v,
                          QkvFormat format) {
  const auto& hw = cm.hardware;
  const int layers = layers_of_virtual_stage(cm.model, cm.cluster, v);
  StageTimes st;
  st.fwd.compute_s = layers * lt.fwd_compute_s;
  st.fwd.comm_exposed_s = layers * lt.fwd_comm_exposed_s;
  st.bwd.compute_s = layers * lt.bwd_compute_s;
  st.bwd.comm_exposed_s = layers * lt.bwd_comm_exposed_s;
  const bool last_v = v == cm.cluster.pp * cm.cluster.vpp - 1;
  if (last_v) {
    const double lf = logits_fwd_s(cm, tokens, tokens);
    const double ce = loss_s(cm, tokens);
    st.fwd.compute_s += lf + ce / 2;
    st.bwd.compute_s += cm.training.gemm_bwd_factor * lf + ce / 2;
  }
  // TP's collectives outside the layers, once per micro-batch [Megatron-LM d98e8a64dd
  // megatron/core/tensor_parallel/layers.py, mappings.py, models/common/embeddings/
  // language_model_embedding.py]. First virtual stage: the word embedding reduce-scatters its
  // output (layers.py:367-379), or, with learned absolute position embeddings, all-reduces it
  // (:382-384; a ring all-reduce moves twice a reduce-scatter's bytes) and the sum is scattered to
  // the sequence-parallel ranks without communication; either way the backward all-gathers the
  // gradient (mappings.py:372; language_model_embedding.py:143-147). Last: Megatron's own
  // ColumnParallelLinear output layer all-gathers its input (layers.py:623-628), and in its
  // backward re-gathers it under the dgrad GEMM (:674-687) and reduce-scatters the input gradient
  // under the wgrad GEMM (:707-708, 790).
  if (cm.cluster.tp > 1 && (v == 0 || last_v)) {
    const double c = tp_layer_comm(cm, tokens, tokens).collective_s;
    if (v == 0) {
      st.fwd.comm_exposed_s += (cm.model.position_embeddings > 0 ? 2.0 : 1.0) * c;
      st.bwd.comm_exposed_s += c;
    }
    if (last_v) {
      const double head_gemm = cm.training.gemm_bwd_factor / 2.0 * logits_fwd_s(cm, tokens, tokens);  // dgrad = wgrad
      st.fwd.comm_exposed_s += c;
      st.bwd.comm_exposed_s += 2.0 * std::max(0.0, c - head_gemm);
    }
  }
  // Host issue time of the pass (the launch floor): per layer, plus the ring's call and steps.
  const RingHost rh = ring_host(cm, k, format);
  double host_fwd = layers * (hw.host_layer_fwd_s + rh.fwd_s);
  double host_bwd = layers * (hw.host_layer_bwd_s + rh.bwd_s);
  // TP's collectives: 4 calls per layer forward, 10 backward (hardware.cpp).
  if (cm.cluster.tp > 1) {
    host_fwd += layers * kTpHostCallsFwd * hw.tp_collective_host_s;
    host_bwd += layers * kTpHostCallsBwd * hw.tp_collective_host_s;
  }
  if (cm.training.recompute_full) {
    // The transformer layers' forward runs again before the backward (logits are not recomputed).
    st.bwd.recompute_s = layers * lt.fwd_compute_s;
    st.bwd.compute_s += st.bwd.recompute_s;
    st.bwd.comm_exposed_s += layers * lt.fwd_comm_exposed_s;
    host_bwd += host_fwd;
  }
  // The embedding's and the output layer's TP calls, not recomputed: 1 and 1 on the first virtual
  // stage; 1 and 4 (two async collectives and their waits) on the last.
  if (cm.cluster.tp > 1) {
    const bool first = v == 0;
    host_fwd += (first + last_v) * hw.tp_collective_host_s;
    host_bwd += (first + 4.0 * last_v) * hw.tp_collective_host_s;
  }
  const GradAddTime add = grad_add(cm, v);
  st.bwd.compute_s += add.gpu_s;
  host_bwd += add.host_s;
  const double fixed = microbatch_overhead(cm, v);
  st.fwd.overhead_s = fixed / 2 + std::max(0.0, host_fwd - (st.fwd.compute_s + st.fwd.comm_exposed_s));
  // The backward's device syncs idle the GPU (max(GPU + idle, host)): a host-bound pass hides them.
  st.bwd.overhead_s = fixed / 2 + std::max(layers * rh.bwd_sync_s,
                                           host_bwd - (st.bwd.compute_s + st.bwd.comm_exposed_s));
  if (cm.cluster.pp > 1) {
    const int s = v % cm.cluster.pp;
    const int next = (s + 1) % cm.cluster.pp;
    const bool inter = !same_node(cm.cluster, gpu_id(cm.cluster, s, first_pool_rank, 0),
                                  gpu_id(cm.cluster, next, first_pool_rank, 0));
    const double bw = inter ? hw.inter_node_bytes_per_s : hw.intra_node_bytes_per_s;
    const double lat = inter ? hw.inter_node_latency_s : hw.intra_node_latency_s;
    st.p2p_s = tokens * static_cast<double>(cm.model.hidden) * kBf16Bytes / cm.cluster.tp / bw + lat;
    st.p2p_shape_s = format == QkvFormat::thd ? lat : 0.0;  // StageTimes::p2p_shape_s
  }
  return st;
}

}  // namespace

StageTimes group_stage_times(const CostModel& cm, std::span<const int64_t> lengths, int k,
                             int first_pool_rank, int v, QkvFormat format) {
  DCP_CHECK(k >= 1, "cp_size ", k);
  const double tokens = tokens_per_rank(lengths, k);
  const Link link = cp_link(cm, v % cm.cluster.pp, first_pool_rank, k);
  return stage_times_of(cm, layer_times(cm, lengths, k, tokens, link, true, format), tokens, k, first_pool_rank, v,
                        format);
}

const std::array<double, 4>& AttnTermsMemo::at(int64_t length, int k) {
  const std::pair<int64_t, int> key{length, k};
  if (auto it = map_.find(key); it != map_.end()) return it->second;
  if (map_.size() >= max_entries_) map_.clear();
  return map_.emplace(key, ring_attn_terms(cm_, length, k)).first->second;
}

std::vector<StageTimes> group_stage_times_all(const CostModel& cm, std::span<const int64_t> lengths, int k,
                                              int first_pool_rank, QkvFormat format, AttnTermsMemo* memo) {
  DCP_CHECK(k >= 1, "cp_size ", k);
  DCP_CHECK(memo == nullptr || &memo->cost_model() == &cm, "group_stage_times_all: an AttnTermsMemo made for another cost model");
  const double tokens = tokens_per_rank(lengths, k);
  const int stages = cm.cluster.pp * cm.cluster.vpp;
  // The per-layer times depend on the virtual stage only through its CP link (intra- or
  // inter-node: at most two values), so they are computed once per distinct link.
  std::vector<std::pair<Link, LayerTimes>> by_link;
  std::vector<StageTimes> out;
  out.reserve(static_cast<size_t>(stages));
  for (int v = 0; v < stages; ++v) {
    const Link link = cp_link(cm, v % cm.cluster.pp, first_pool_rank, k);
    auto it = std::find_if(by_link.begin(), by_link.end(), [&](const auto& e) {
      return e.first.bytes_per_s == link.bytes_per_s && e.first.latency_s == link.latency_s;
    });
    if (it == by_link.end()) {
      by_link.emplace_back(link, layer_times(cm, lengths, k, tokens, link, true, format, memo));
      it = std::prev(by_link.end());
    }
    out.push_back(stage_times_of(cm, it->second, tokens, k, first_pool_rank, v, format));
  }
  return out;
}

RingHost ring_host(const CostModel& cm, int k, QkvFormat format) {
  DCP_CHECK(k >= 1, "cp_size ", k);
  if (k == 1 || cm.training.cp_comm != CpComm::ring) return {};
  const auto& hw = cm.hardware;
  const bool bshd = format == QkvFormat::bshd;
  // TE's fused path or its flash path (te_fused_path); a backend added later must be placed there.
  const std::string& be = cm.training.attention_backend;
  const bool fused = te_fused_path(cm);
  DCP_CHECK(fused || be == "fa2" || be == "fa3" || be == "dcpbench", "attention backend ", be,
            " has no ring host costs");
  struct Keys {
    double call_fwd, step_fwd, call_bwd, step_bwd;
  };
  const Keys keys = fused ? (bshd ? Keys{hw.cudnn_bshd_ring_call_fwd_s, hw.cudnn_bshd_ring_step_fwd_s,
                                         hw.cudnn_bshd_ring_call_bwd_s, hw.cudnn_bshd_ring_step_bwd_s}
                                  : Keys{hw.cudnn_ring_call_fwd_s, hw.cudnn_ring_step_fwd_s,
                                         hw.cudnn_ring_call_bwd_s, hw.cudnn_ring_step_bwd_s})
                          : (bshd ? Keys{hw.bshd_ring_call_fwd_s, hw.bshd_ring_step_fwd_s, hw.bshd_ring_call_bwd_s,
                                         hw.bshd_ring_step_bwd_s}
                                  : Keys{hw.ring_call_fwd_s, hw.ring_step_fwd_s, hw.ring_call_bwd_s,
                                         hw.ring_step_bwd_s});
  const double after_first = k - 1;
  RingHost r;
  r.fwd_s = keys.call_fwd + after_first * keys.step_fwd;
  r.bwd_s = keys.call_bwd + after_first * keys.step_bwd;
  r.bwd_sync_s = !bshd && !fused ? hw.thd_flash_ring_bwd_sync_s : 0.0;
  return r;
}

SequenceCompute sequence_compute_split(const CostModel& cm, int64_t length, double gemm_tokens, int cp_size) {
  DCP_CHECK(cp_size >= 1, "cp_size ", cp_size);
  const int64_t one[1] = {length};
  const Link none{1.0, 0.0};
  const LayerTimes lt = layer_times(cm, one, cp_size, gemm_tokens, none, false);
  const double rec = cm.training.recompute_full ? 1.0 : 0.0;
  SequenceCompute out;
  out.layer_fwd_s = lt.fwd_compute_s * cp_size;  // every rank of the group does the same share
  out.layer_bwd_s = (lt.bwd_compute_s + rec * lt.fwd_compute_s) * cp_size;
  // TP's synchronous collectives (tp > 1; tp_layer_comm): 4 per layer forward, 2 backward, the
  // forward's again with full recompute, their bandwidth time over the group's ranks (T = L / k on
  // each: independent of k); no latency, and not the asynchronous ones, which may hide.
  if (cm.cluster.tp > 1) {
    const double c = tp_collective_bandwidth_s(cm, static_cast<double>(length));
    out.layer_fwd_s += kTpSyncCollectivesFwd * c;
    out.layer_bwd_s += (kTpSyncCollectivesBwd + rec * kTpSyncCollectivesFwd) * c;
  }
  // The output layer and loss as stage_times_of splits them: loss half in each pass.
  const double lf = logits_fwd_s(cm, static_cast<double>(length), gemm_tokens);
  const double ce = loss_s(cm, static_cast<double>(length));
  out.head_fwd_s = lf + ce / 2;
  out.head_bwd_s = cm.training.gemm_bwd_factor * lf + ce / 2;
  return out;
}

double sequence_compute_s(const CostModel& cm, int64_t length, double gemm_tokens, int cp_size) {
  return sequence_compute_split(cm, length, gemm_tokens, cp_size).total_s(cm.model.layers);
}

double sequence_head_compute_s(const CostModel& cm, int64_t length, double gemm_tokens) {
  const SequenceCompute sc = sequence_compute_split(cm, length, gemm_tokens, 1);
  return sc.head_fwd_s + sc.head_bwd_s;
}

double microbatch_overhead(const CostModel& cm, int v) {
  const auto& hw = cm.hardware;
  const int last = cm.cluster.pp * cm.cluster.vpp - 1;
  return hw.microbatch_every_stage_s + (v == 0 ? hw.microbatch_first_stage_s : 0.0) +
         (v == last ? hw.microbatch_last_stage_s : 0.0);
}

GradAddTime grad_add(const CostModel& cm, int v) {
  const auto& m = cm.model;
  const auto& c = cm.cluster;
  const bool fused = cm.training.gradient_accumulation_fusion;
  const double h = static_cast<double>(m.hidden);
  const double vh = static_cast<double>(m.vocab) * h;
  const int layers = layers_of_virtual_stage(m, c, v);
  // Parameters (and tensors) whose gradient reaches the main gradient through the DDP hook's add:
  // with the fusion only those no fused GEMM accumulates (norms, biases, embeddings); without it
  // every one.
  double added = layers * (fused ? layer_nongemm_params(m) : layer_params(m));
  int tensors = layers * (fused ? layer_nongemm_param_tensors(m) : layer_param_tensors(m));
  double extra_bytes = 0;  // bf16 traffic besides the adds
  if (v == 0) {
    // Word (+ learned position) embedding: its backward writes a dense bf16 gradient of the whole
    // table (F.embedding's backward: zero-filled, then the rows scattered in), added either way.
    added += embedding_params(m);
    tensors += m.position_embeddings > 0 ? 2 : 1;
    extra_bytes += kBf16Bytes * embedding_params(m);
  }
  if (v == c.pp * c.vpp - 1) {
    added += (m.layernorm ? 2.0 : 1.0) * h;  // the final norm
    tensors += m.layernorm ? 2 : 1;
    const bool own_output_weight = !m.tied_embeddings || c.pp > 1;  // else the embedding's table
    if (!fused && own_output_weight) {
      added += vh;
      ++tensors;
    }
    // Tied with pp = 1 and no fusion: autograd sums the output layer's bf16 weight gradient into
    // the embedding's before the hook (read both, write one).
    if (!fused && !own_output_weight) extra_bytes += 3.0 * kBf16Bytes * vh;
  }
  const double grad_bytes = cm.training.grad_reduce_fp32 ? 4.0 : 2.0;
  GradAddTime t;
  if (cm.hardware.hbm_bytes_per_s > 0)
    t.gpu_s = ((kBf16Bytes + 2.0 * grad_bytes) * added + extra_bytes) / c.tp / cm.hardware.hbm_bytes_per_s;
  t.host_s = tensors * cm.hardware.grad_add_host_s;
  return t;
}

double stage_params(const CostModel& cm, int s) {
  const auto& c = cm.cluster;
  double layers = 0;
  for (int chunk = 0; chunk < c.vpp; ++chunk) layers += layers_of_virtual_stage(cm.model, c, chunk * c.pp + s);
  double params = layers * layer_params(cm.model);
  if (s == 0) params += embedding_params(cm.model);
  if (s == c.pp - 1) params += output_params(cm.model);
  // Tied embeddings split over stages: the last stage keeps its own copy of the word embedding
  // as the output weight (Megatron language_module.py:253-258 at d98e8a64dd, "duplicated
  // embedding weights in post processing stage"; its gradient is all-reduced with the first
  // stage's over the embedding group: GradSyncTime::embedding_s).
  if (s == c.pp - 1 && c.pp > 1 && cm.model.tied_embeddings)
    params += static_cast<double>(cm.model.vocab) * static_cast<double>(cm.model.hidden);
  return params / c.tp;
}

double pool_collective_bytes_per_s(const CostModel& cm, int s, int ranks) {
  if (!group_crosses_nodes(cm.cluster, s, 0, ranks)) return cm.hardware.intra_node_bytes_per_s;
  // NCCL stripes a ring over every NIC of the node; with tp > 1 each TP rank runs its own DP x CP
  // collective of the same size at the same time, so the tp of them share those NICs (helper-13's
  // review: the bandwidth was tp times too high; every shipped scenario has tp = 1).
  return std::min(cm.hardware.intra_node_bytes_per_s,
                  nics_per_node(cm) * cm.hardware.inter_node_bytes_per_s / cm.cluster.tp);
}

double tied_embedding_allreduce_s(const CostModel& cm, int s) {
  const auto& c = cm.cluster;
  const auto& hw = cm.hardware;
  if (!cm.model.tied_embeddings || c.pp <= 1 || (s != 0 && s != c.pp - 1)) return 0.0;
  // Every pair (the first and the last stage's GPU of one pool and TP rank) runs at once; the
  // slowest sets the time. A pair on two nodes sends through its GPU's share of the NICs, shared
  // by the GPUs of that node that send to another node in this phase: end-stage GPUs only (the
  // middle stages' taken as idle, their own reduces done; helper-82's review).
  std::vector<int> crossing(static_cast<size_t>((c.gpus + c.gpus_per_node - 1) / c.gpus_per_node) + 1, 0);
  int most = 0;  // the most crossing pairs' GPUs on one node
  for (int j = 0; j < c.pool(); ++j)
    for (int t = 0; t < c.tp; ++t) {
      const int a = gpu_id(c, 0, j, t), b = gpu_id(c, c.pp - 1, j, t);
      if (same_node(c, a, b)) continue;
      most = std::max({most, ++crossing[static_cast<size_t>(a / c.gpus_per_node)],
                       ++crossing[static_cast<size_t>(b / c.gpus_per_node)]});
    }
  const bool inter = most > 0;
  const double bw = inter ? nic_share_bytes_per_s(cm, most) : hw.intra_node_bytes_per_s;
  const double lat = inter ? hw.inter_node_latency_s : hw.intra_node_latency_s;
  const double grad_bytes = cm.training.grad_reduce_fp32 ? 4.0 : 2.0;
  const double bytes = static_cast<double>(cm.model.vocab) * static_cast<double>(cm.model.hidden) / c.tp * grad_bytes;
  // Ring all-reduce over 2 ranks: reduce-scatter then all-gather, half the buffer each, 2 hops.
  return bytes / bw + 2.0 * lat;
}

GradSyncTime grad_sync_time(const CostModel& cm, int s) {
  const int n = cm.cluster.pool();
  GradSyncTime g;
  g.overlap = cm.training.overlap_grad_reduce;
  const double params = stage_params(cm, s);
  const double grad_bytes = cm.training.grad_reduce_fp32 ? 4.0 : 2.0;
  // The check runs in start_grad_sync, which finish_grad_sync calls with a pool of one too.
  if (cm.training.check_for_nan_in_grad && cm.hardware.hbm_bytes_per_s > 0)
    g.check_s = grad_bytes * params / cm.hardware.hbm_bytes_per_s;
  g.embedding_s = tied_embedding_allreduce_s(cm, s);
  if (n <= 1) return g;
  const double frac = static_cast<double>(n - 1) / n;  // ring: each rank sends (n-1)/n of the data
  if (cm.training.distributed_optimizer) {
    g.reduce_s = ring_collective_s(cm, s, n, frac * params * grad_bytes);
    g.gather_s = ring_collective_s(cm, s, n, frac * params * kBf16Bytes);
  } else {
    // Ring all-reduce = reduce-scatter + all-gather of the same buffer: 2 (n-1)/n, 2 (n-1) hops.
    g.reduce_s = ring_collective_s(cm, s, n, 2.0 * frac * params * grad_bytes) +
                 (n - 1) * (group_crosses_nodes(cm.cluster, s, 0, n) ? cm.hardware.inter_node_latency_s
                                                                      : cm.hardware.intra_node_latency_s);
  }
  if (g.overlap && params > 0) {
    // The buckets no overlap hides (GradSyncTime), as shares of the stage's one collective time
    // (each bucket's own latency is not added): the first stage's embedding bucket (a floor: the
    // bucket also holds the first layers' parameters that were added before the embedding closed
    // it), reduced after the last backward; the gather the first forward waits for: without VPP
    // the embedding's bucket on the first stage and a later stage's whole buffer; with VPP the
    // interleaved schedule dispatches chunks 0 and 1 at its start (schedules.py:1218-1221 at
    // d98e8a64dd), each chunk's buckets in layout order (distributed_data_parallel.py:638), so the
    // first stage's first forward, which needs the embedding's bucket, laid out last, waits for
    // the whole of chunk 0's gather (a later stage's first forward comes after the pipeline's fill
    // and is taken as hidden).
    const double tp = cm.cluster.tp;
    const double emb = s == 0 ? embedding_params(cm.model) / tp / params : 0.0;
    g.reduce_tail_s = emb * g.reduce_s;
    if (cm.cluster.vpp == 1)
      g.gather_waited_s = (s == 0 ? emb : 1.0) * g.gather_s;
    else if (s == 0)
      g.gather_waited_s = std::min(1.0, emb + layers_of_virtual_stage(cm.model, cm.cluster, 0) *
                                                  layer_params(cm.model) / tp / params) * g.gather_s;
  }
  return g;
}

IterationTime iteration_time(const CostModel& cm, bool packed, double max_recv_tokens_per_rank) {
  const auto& hw = cm.hardware;
  const auto& c = cm.cluster;
  const int n = c.pool();
  IterationTime it;
  if (hw.hbm_bytes_per_s > 0) {
    double worst = 0;
    for (int s = 0; s < c.pp; ++s) worst = std::max(worst, stage_params(cm, s));
    const double shard = cm.training.distributed_optimizer ? worst / n : worst;
    // Adam + grad norm on the shard; zeroing the whole grad buffer of the stage
    // (zero_grad_buffer), in the grad dtype; and one read + write of that whole buffer to scale
    // it when the pool has more than one rank [derived from the source, Megatron-LM 3b309c627e]:
    // without --calculate-per-token-loss DDP multiplies every bucket by 1 / |DP x CP| before its
    // reduction (param_and_grad_buffer.py:361-363; distributed_data_parallel.py:286), with it
    // (both upstream scripts: run_hybrid_cp.sh:283, benchmark_dcp.sh:129 at dev d48bd6b)
    // finalize_model_grads scales the whole buffer by 1 / num_tokens after it
    // (finalize_model_grads.py:483-496, param_and_grad_buffer.py:840-842 grad_data *= factor),
    // distributed optimizer or not. (The latter's num_tokens broadcast over PP and all-reduce over
    // DP x CP, one scalar each, are not charged; nor the pass a pool of one rank makes with
    // --calculate-per-token-loss, which the scenarios do not record: none of them has a pool of
    // one.)
    const double grad_bytes = cm.training.grad_reduce_fp32 ? 4.0 : 2.0;
    const double scale_pass = n > 1 ? 2.0 * grad_bytes * worst : 0.0;
    it.optimizer_s =
        (hw.optimizer_bytes_per_param * shard + grad_bytes * worst + scale_pass) / hw.hbm_bytes_per_s;
  }
  it.fixed_s = hw.iteration_overhead_s;
  if (packed) {
    // Megatron-LM 192cbc3554 (DpBalancedScheduler.run, data_schedule.py:164-349; helpers in
    // data_schedule_utils.py), in order:
    //  * _get_global_seqlens_and_ids: two all_gathers over the DP group (sample counts, then the
    //    padded lengths): latency-bound rings of DP - 1 steps; the DP group of a pool rank holds
    //    the ranks with its CP index, pool ranks 0, cp, ..., (DP - 1) cp on a stage.
    //  * reroute_samples_to_dcp_ranks: one all_to_all_single over the DP x CP group per sample key
    //    (kRerouteCollectives); a rank sends only to the members of its own DP group (send sizes
    //    are zero elsewhere) and every rank of a group receives the group's samples whole, so
    //    (DP - 1) / DP of them cross the links [estimate: samples start evenly over the DP ranks;
    //    none with DP = 1: CP siblings load the same data].
    //  * the host work of the path (packed_data_overhead_s).
    const bool pool_inter = group_crosses_nodes(c, 0, 0, n);
    const double pool_lat = pool_inter ? hw.inter_node_latency_s : hw.intra_node_latency_s;
    if (cm.training.data_path == DataPath::prefetch) {
      // NVIDIA's prototype with --async-hybrid-context-parallel-scheduler: the plan and the
      // routing come from a prefetch process; the step casts, packs and all-reduces two counters
      // over the DP x CP group (3b309c627e data_schedule.py:430-460, 548-556).
      it.data_s = (n - 1) * pool_lat + hw.packed_data_overhead_s;
      return it;
    }
    const int dp = c.dp();
    // The DP group of pool rank j < cp is ranks j, j + cp, ..., j + (dp - 1) cp; the worst of them
    // sets the step (the layout repeats every node, so j < gpus_per_node is enough).
    bool dp_inter = false;
    for (int j = 0; dp > 1 && !dp_inter && j < std::min(c.cp, std::max(1, c.gpus_per_node)); ++j)
      dp_inter = group_crosses_nodes(c, 0, j, (dp - 1) * c.cp + 1);
    const double dp_lat = dp_inter ? hw.inter_node_latency_s : hw.intra_node_latency_s;
    const double gather_s = 2.0 * (dp - 1) * dp_lat;
    // Of a rank's received tokens, (DP-1)/DP come from its DP peers. Those on its own node come
    // over NVLink; the others through its share of the node's NICs (an all-to-all is not striped
    // over them like a ring collective, pool_collective_bytes_per_s), the two at once. Peers on
    // the node, the rank itself included: at least floor(ranks per node / cp), at most dp, when
    // the pool fills whole nodes; a rank on a partly used last node may have no peer beside it.
    const int ranks_per_node = std::max(1, c.gpus_per_node / std::max(1, c.tp));
    const bool whole_nodes = n % ranks_per_node == 0;
    const int on_node = !dp_inter ? dp : whole_nodes ? std::clamp(ranks_per_node / std::max(1, c.cp), 1, dp) : 1;
    const double bytes_per_peer = max_recv_tokens_per_rank * hw.reroute_bytes_per_token / dp;
    const double nic_share = nic_share_bytes_per_s(cm, c.gpus_per_node);
    const double move_s = std::max((on_node - 1) * bytes_per_peer / hw.intra_node_bytes_per_s,
                                   (dp - on_node) * bytes_per_peer / nic_share);
    const double reroute_s = n > 1 ? kRerouteCollectives * pool_lat + move_s : 0.0;
    it.data_s = gather_s + reroute_s + hw.packed_data_overhead_s;
  }
  return it;
}

}  // namespace dcp::cost
