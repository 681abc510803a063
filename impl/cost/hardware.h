// Hardware profiles: what one GPU, its host and its links can do, as numbers the time model and
// the memory model read.
//
//   peak bf16 FLOP/s; GEMM efficiency vs tokens (rows of the GEMM); attention efficiency tables
//   over (query length, key length) per backend (attention_table.h); NVLink and NIC bandwidth and
//   latency; the host/launch floors of a PyTorch + TransformerEngine training step; the fixed and
//   per-token costs of the THD ring attention's side kernels; the optimizer step's HBM traffic;
//   GPU memory capacity.
// Curves are piecewise linear in log2(x) and clamped (flat) outside their first/last point, so
// they never extrapolate above the largest measured efficiency. Efficiencies are fractions of
// peak in (0, 1].
//
// Every built-in number names its source (or its derivation, marked [derived] / [estimate]) in
// hardware.cpp. A calibration file (JSON, under results/calibration/, schema
// "dcpbench.calibration.v1") overrides any scalar below (its calibration key is the field name),
// curve points and attention tables; its name becomes HardwareProfile::calibration and ends up in
// every result's source string "simulated:<cost-model>@<calibration>". Calibration format:
//   {"schema": "dcpbench.calibration.v1", "name": "h100-sxm-public", "profile": "h100-sxm",
//    "obtained": "public" | "measured",          // how the numbers were obtained
//    "peak_flops_per_s": 9.89e14,                // any scalar field below, optional
//    "gemm_efficiency": [[tokens, eff], ...],    // points replace same-x points, others are added
//    "attention_tables": [{"backend": "fa3", "head_dim": 128, "lengths": [...],
//                          "fwd_tile": [q, k], "bwd_tile": [q, k],
//                          "fwd_causal": [[...]], "fwd_full": [[...]], "bwd": [[...]]}]}
//                                                // a table replaces the same (backend, head_dim)
// Unknown keys are InputErrors naming the file and key.
#pragma once

#include "cost/attention_table.h"

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <vector>

namespace dcp::cost {

struct CurvePoint {
  double x = 0;  // tokens (GEMM rows, or sequence length for attention), > 0
  double y = 0;  // efficiency, fraction of peak
};

// Piecewise linear in log2(x), flat outside [first.x, last.x]. Points sorted by x, unique x.
struct Curve {
  std::vector<CurvePoint> points;
  double at(double x) const;  // throws dcp::Error if empty
};

struct HardwareProfile {
  std::string name;         // "h100-sxm", "unit"
  std::string calibration;  // "public" (built-in), or the calibration file's "name"
  std::string obtained;     // "public" | "measured" | "synthetic"
  double peak_flops_per_s = 0;  // dense bf16 tensor-core peak
  Curve gemm_efficiency;        // x = tokens (GEMM M dimension)
  std::vector<AttentionTable> attention_tables;  // per (backend, head_dim)

  // ---- links ----
  double intra_node_bytes_per_s = 0;  // NVLink, per direction per GPU (p2p and intra-node collectives)
  double intra_node_latency_s = 0;
  double inter_node_bytes_per_s = 0;  // one NIC, per direction (a p2p transfer between two GPUs)
  double inter_node_latency_s = 0;
  int gpus_per_node = 8;
  int nics_per_node = 8;              // NCCL rings use every NIC: a collective spanning nodes gets
                                      // min(NVLink, nics_per_node * inter_node_bytes_per_s)

  // ---- host / launch floors (Megatron + TransformerEngine, PyTorch eager) ----
  // A pass of one micro-batch through a virtual stage takes max(GPU time, host issue time):
  // host = layers * (host_layer_{fwd,bwd}_s + (k > 1 ? ring_call_{fwd,bwd}_s + (k - 1) *
  // ring_step_{fwd,bwd}_s : 0)), with the bshd_* / cudnn_* keys by layout and backend
  // (cost::ring_host); a flash THD ring backward adds its sync idle to the GPU time.
  double host_layer_fwd_s = 0;   // host time to issue one transformer layer's forward
  double host_layer_bwd_s = 0;   // ... its backward
  double ring_step_fwd_s = 0;    // fixed host cost of one CP ring step after the first (TE THD p2p
                                 // loop body, incl. its corrections), fwd
  double ring_step_bwd_s = 0;    // ... bwd
  double bshd_ring_step_fwd_s = 0;  // the same for TE's bshd ring (a padded plan, one sequence per
  double bshd_ring_step_bwd_s = 0;  // group): its halves are views, not read-half calls
  // Once per attention call with a ring (k > 1), per pass, beside its k - 1 later steps: the
  // diagonal step (the first forward, the last backward) and the prelude and epilogue of TE's p2p
  // function (cu_seqlens divisions, the KV copy into the first send buffer, buffers, the LSE and
  // output set-up, final fills). THD's and bshd's.
  double ring_call_fwd_s = 0;
  double ring_call_bwd_s = 0;
  double bshd_ring_call_fwd_s = 0;
  double bshd_ring_call_bwd_s = 0;
  // The keys above are TE's flash-attention path (fa2, fa3, and dcpbench's own kernels, which
  // TE's non-fused path would call); the cuDNN (fused) path issues other ops: its own set.
  double cudnn_ring_step_fwd_s = 0;
  double cudnn_ring_step_bwd_s = 0;
  double cudnn_ring_call_fwd_s = 0;
  double cudnn_ring_call_bwd_s = 0;
  double cudnn_bshd_ring_step_fwd_s = 0;
  double cudnn_bshd_ring_step_bwd_s = 0;
  double cudnn_bshd_ring_call_fwd_s = 0;
  double cudnn_bshd_ring_call_bwd_s = 0;
  // GPU idle time per THD ring backward call on the flash path (fa2, fa3, dcpbench): TE zero-fills
  // dQ/dK/dV beyond cu_seqlens_padded[-1] by slicing with a device scalar, a GPU -> CPU sync each;
  // after each the GPU waits while the host issues the next op (those ops are in ring_call_bwd_s).
  // A GPU-bound backward pass is longer by it; a host-bound one is not (cost::ring_host).
  double thd_flash_ring_bwd_sync_s = 0;
  // Host time of one call or wait of tensor parallelism's sequence-parallel collectives (tp > 1):
  // TE's all-gathers and reduce-scatters around its TP linears, 4 per layer forward and 10 per
  // layer backward, and the embedding's and output layer's (cost/time_model.h, "TP"), one c10d
  // call (or handle.wait()) each.
  double tp_collective_host_s = 0;
  double grad_add_host_s = 0;    // host time of one main-gradient add (a parameter's bf16
                                 // gradient added into its main gradient by Megatron's DDP hook),
                                 // per added parameter tensor per backward pass (cost::grad_add)
  double microbatch_every_stage_s = 0;  // per micro-batch per virtual stage (get_batch, packed-
                                        // sequence parameters), half added to each pass
  double microbatch_first_stage_s = 0;  // ... on the first virtual stage besides (the embedding)
  double microbatch_last_stage_s = 0;   // ... on the last virtual stage besides (output layer, loss)
  double iteration_overhead_s = 0;   // per training iteration (train_step bookkeeping, grad-norm
                                     // and loss syncs, logging), serial
  double packed_data_overhead_s = 0;   // per iteration, every THD plan (packing and dynamic
                                       // CP, not bshd), host work of its data path
                                       // (cost::iteration_time, training.data_path): unpacking,
                                       // per-key re-route packing/unpacking and packed-batch
                                       // building; the length all-gathers and the re-route are
                                       // charged from the links
  double reroute_bytes_per_token = 0;  // payload the re-route moves per token (all keys)

  // ---- memory traffic (HBM) ----
  double hbm_bytes_per_s = 0;              // memory bandwidth for memory-bound ops (0: ignore them)
  double elementwise_bytes_per_token_hidden = 0;  // bytes moved per token per layer fwd / hidden
  // Softmax cross-entropy traffic per logit (per token / vocab, fwd + bwd), per implementation:
  // Megatron's unfused vocab-parallel cross-entropy (no --cross-entropy-loss-fusion), the same
  // fused with torch.compile (--cross-entropy-loss-fusion, native impl), TE's Triton kernels
  // (--cross-entropy-fusion-impl te).
  double loss_bytes_per_token_vocab = 0;
  double loss_fused_bytes_per_token_vocab = 0;
  double loss_te_bytes_per_token_vocab = 0;
  // TE THD ring side kernels (read-half, out/LSE correction, grad correction, buffer copies) per
  // ring step after the first, per local token: bytes = (a_q * q_dim + a_kv * kv_dim) * T.
  double thd_side_fwd_bytes_q = 0;
  double thd_side_fwd_bytes_kv = 0;
  double thd_side_bwd_bytes_q = 0;
  double thd_side_bwd_bytes_kv = 0;
  // The same on the first (diagonal) step, which has no read-half but its own corrections (THD
  // corrects the output and the gradients at every step, the first included), plus the KV copy
  // into the first send buffer that each pass makes once (in the _kv keys: all of the forward's,
  // 8 of the backward's 16 beside its dk/dv writes; bshd's ring makes the same copies).
  double thd_side_first_fwd_bytes_q = 0;
  double thd_side_first_fwd_bytes_kv = 0;
  double thd_side_first_bwd_bytes_q = 0;
  double thd_side_first_bwd_bytes_kv = 0;
  // TE's bshd ring (a padded plan: one sequence per group, b = 1) moves less: its halves of Q,
  // KV, out and dout are views of [b, 2, s/2, h, d], so none of the read-half copies, and its
  // first forward step writes the output with the "init" correction instead of zeroing it and
  // correcting in place. Per ring step after the first, and the first forward step; its first
  // backward step is THD's (thd_side_first_bwd_*: the same copies into dq, dk, dv), and so are
  // both first steps' KV copies (thd_side_first_*_kv).
  double bshd_side_fwd_bytes_q = 0;
  double bshd_side_fwd_bytes_kv = 0;
  double bshd_side_bwd_bytes_q = 0;
  double bshd_side_bwd_bytes_kv = 0;
  double bshd_side_first_fwd_bytes_q = 0;
  // TE's cuDNN (fused) attention on THD zeroes its output and fills its gradients on every call,
  // cp = 1 included (the step's rows at each ring step): bytes written per row of the call's
  // queries (O forward; dQ backward) and of its keys (dK and dV backward). Not on bshd, not on the
  // flash-attention backends.
  double thd_fused_fill_fwd_bytes_q = 0;
  double thd_fused_fill_bwd_bytes_q = 0;
  double thd_fused_fill_bwd_bytes_kv = 0;
  double optimizer_bytes_per_param = 0;    // Adam step + grad-norm, per param of the GPU's
                                           // optimizer shard (zeroing the whole grad buffer, and
                                           // the pass scaling it by 1/N or 1/tokens, are charged
                                           // apart at the grad dtype's bytes per param)

  // ---- memory capacity (the memory model, memory.h) ----
  double memory_bytes = 0;           // usable device memory
  double memory_reserved_bytes = 0;  // CUDA context, NCCL buffers, allocator slack
  // Bytes per logit of the cross-entropy (memory.h): kept from the last virtual stage's forward
  // to its backward ("saved"), and the most live at once during the loss or its gradient
  // ("peak"); fp32 = Megatron's vocab-parallel cross-entropy (unfused, or fused with the native
  // implementation), te = --cross-entropy-fusion-impl te.
  double ce_fp32_saved_bytes_per_logit = 0;
  double ce_fp32_peak_bytes_per_logit = 0;
  double ce_te_saved_bytes_per_logit = 0;
  double ce_te_peak_bytes_per_logit = 0;

  double gemm_efficiency_at(double tokens) const;
  // Attention efficiency of `backend` at (query, key) lengths; head dims between tables of the
  // backend interpolate linearly, outside use the nearest table. Throws InputError naming the
  // backend if the profile has no table for it.
  double attn_efficiency(const std::string& backend, AttnKind kind, double q_tokens, double k_tokens,
                         int head_dim) const;
  // Bandwidth of a collective over GPUs spanning nodes: min(NVLink, nics_per_node * NIC).
  double collective_inter_node_bytes_per_s() const;
};

// The scalar fields above by calibration key (every double field), for calibration files, the
// sensitivity study and reports. get/set throw dcp::Error on an unknown key.
std::vector<std::string> profile_scalar_keys();
double profile_scalar(const HardwareProfile& p, const std::string& key);
void set_profile_scalar(HardwareProfile& p, const std::string& key, double value);

// Built-in profiles:
//   "h100-sxm": public numbers (datasheet peak, measured 8192^3 GEMM, FA2/FA3/cuDNN attention
//               tables, NVLink 4, ConnectX-7 NDR, host floors from TE/PyTorch measurements);
//               calibration "h100-sxm-public".
//   "unit":     peak 1e12 FLOP/s, all efficiencies 1 (attention backends "fa2", "fa3", "cudnn",
//               tiles of 1), 1e9 B/s both link kinds, zero latency, no host floors or overheads,
//               4 GPUs per node: costs that are easy to compute by hand in tests.
HardwareProfile hardware_preset(const std::string& name);
std::vector<std::string> hardware_preset_names();

// Throws InputError naming the first bad field (non-positive peak/bandwidth, efficiency outside
// (0, 1], unsorted curve...).
void validate_profile(const HardwareProfile& profile);

// Applies a calibration JSON object to `base`. `source` (the file path) is used in messages.
HardwareProfile apply_calibration(const HardwareProfile& base, const nlohmann::json& calibration,
                                  const std::string& source);
// Reads the file and applies it. The file's "profile" must equal base.name when present.
HardwareProfile load_calibration_file(const HardwareProfile& base, const std::string& path);

// The profile as a full calibration object (round-trips through apply_calibration).
nlohmann::json profile_to_json(const HardwareProfile& profile);

}  // namespace dcp::cost
