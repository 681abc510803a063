// Hardware profiles: what one GPU and its links can do, as tables the time model reads.
//
//   peak bf16 FLOP/s; GEMM efficiency vs tokens (rows of the GEMM); causal/full attention
//   efficiency vs per-sequence length, per head dim; intra-node (NVLink) and inter-node (IB)
//   bandwidth and latency per direction; GPUs per node.
// Curves are piecewise linear in log2(x) and clamped (flat) outside their first/last point, so
// they never extrapolate above the largest measured efficiency. Efficiencies are fractions of
// peak in (0, 1].
//
// Every built-in number names its source in hardware.cpp. A calibration file (JSON, under
// results/calibration/, schema "dcpbench.calibration.v1") overrides scalars and curve points;
// its name becomes HardwareProfile::calibration and ends up in every result's source string
// "simulated:<cost-model>@<calibration>". Calibration format:
//   {"schema": "dcpbench.calibration.v1", "name": "h100-sxm-public", "profile": "h100-sxm",
//    "obtained": "public" | "measured",          // how the numbers were obtained
//    "peak_flops_per_s": 9.89e14,                // any scalar field below, optional
//    "gemm_efficiency": [[tokens, eff], ...],    // points replace same-x points, others are added
//    "attention": [{"head_dim": 128, "fwd_causal": [[seqlen, eff], ...], "fwd_full": [...],
//                   "bwd": [...]}]}
// Unknown keys are InputErrors naming the file and key.
#pragma once

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

// Attention efficiency tables for one head dim (fraction of peak). FLOPs are counted as in the
// FA3 paper: causal forward = 2*q*L^2 per layer (only the unmasked half), backward = 2.5 x fwd.
struct AttentionCurves {
  int head_dim = 128;
  Curve fwd_causal;  // causal forward, x = sequence length (tokens)
  Curve fwd_full;    // non-causal forward (off-diagonal ring blocks), x = block length
  Curve bwd;         // backward (used for causal and full blocks)
};

struct HardwareProfile {
  std::string name;         // "h100-sxm", "unit"
  std::string calibration;  // "public" (built-in), or the calibration file's "name"
  std::string obtained;     // "public" | "measured" | "synthetic"
  double peak_flops_per_s = 0;  // dense bf16 tensor-core peak
  Curve gemm_efficiency;        // x = tokens (GEMM M dimension)
  std::vector<AttentionCurves> attention;  // by head_dim, ascending
  double intra_node_bytes_per_s = 0;       // NVLink, per direction per GPU
  double intra_node_latency_s = 0;
  double inter_node_bytes_per_s = 0;       // IB, per direction per GPU
  double inter_node_latency_s = 0;
  int gpus_per_node = 8;
  double microbatch_overhead_s = 0;        // fixed cost per micro-batch per virtual stage
  double hbm_bytes_per_s = 0;              // memory bandwidth for element-wise ops (0: ignore)
  double elementwise_bytes_per_token_hidden = 0;  // bytes moved per token per layer fwd / hidden
  double loss_bytes_per_token_vocab = 0;  // softmax cross-entropy traffic per token / vocab (fwd+bwd)

  double gemm_efficiency_at(double tokens) const;
  // Attention efficiency at a sequence/block length; head dims between tables interpolate
  // linearly, outside use the nearest table.
  double attn_fwd_causal_efficiency(double seqlen_tokens, int head_dim) const;
  double attn_fwd_full_efficiency(double seqlen_tokens, int head_dim) const;
  double attn_bwd_efficiency(double seqlen_tokens, int head_dim) const;
};

// Built-in profiles:
//   "h100-sxm": public numbers (datasheet peak, measured 8192^3 GEMM, FA3 paper curves, NVLink 4,
//               ConnectX-7 NDR); calibration "public".
//   "unit":     peak 1e12 FLOP/s, all efficiencies 1, 1e9 B/s both link kinds, zero latency,
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
