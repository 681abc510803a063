// A measured calibration (issue 10: `dcpbench calibrate`): which points to measure on the GPU and
// how the measured times become a calibration file (schema dcpbench.calibration.v1,
// hardware.h) that the simulator reads like the public profile. The measuring itself is the GPU
// machine's (exec/cuda/calibration_runner.h); this part is the arithmetic, testable anywhere: it
// is the inverse of the cost model at the measured points (a calibration fitted to times the
// cost model predicts gives back the cost model's efficiencies there; test_calibrate.cpp).
//   GEMM efficiency at x tokens = the forward GEMMs of one layer of the model ([x, k] x [k, n] for
//     qkv, proj, fc1, fc2) as FLOPs / (their measured time x peak): the curve the time model reads
//     at T tokens per rank (time_model.h).
//   Attention efficiency at (q, k) and kind = FLOPs of `batch` sequences of q queries against k
//     keys (4 d x heads x the pairs attended: all, or causal aligned bottom-right; the backward
//     probed without a mask, 2.5 x) / (time x peak),
//     divided by the kernel's tile utilisation at (q, k) (the table holds whole-tile efficiency),
//     clamped to (0, 1]: a table of the measured kernel under its own backend name.
//   HBM bandwidth: a large device-to-device copy's bytes (read + write) / time.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "cost/attention_table.h"
#include "cost/flops.h"
#include "cost/hardware.h"

namespace dcp::cost {

struct GemmShape {
  int64_t n = 0, k = 0;  // [tokens, k] x [k, n]
};

struct CalibrationPlan {
  std::vector<double> gemm_tokens;     // x points of the GEMM curve
  std::vector<GemmShape> gemm_shapes;  // one layer's forward GEMMs
  double gemm_flops_per_token = 0;     // their FLOPs per token (= fwd_layer_gemm_flops_per_token)
  AttentionTable attention;            // backend name, head dim, lengths and tiles; efficiencies empty
  int heads = 0;                       // query heads of the model (kv heads as the model)
  int kv_heads = 0;
  int64_t attention_tokens = 16384;    // each attention probe runs max(1, this / max(q, k)) sequences
  int64_t copy_bytes = int64_t{1} << 30;  // the HBM probe's copy
  int64_t batch_of(double q, double k) const;
};

// The points for a model on a profile: the GEMM curve at the profile's own x points, the attention
// grid at the lengths of the profile's first table, for `backend` (the measured kernel's name,
// e.g. "dcpbench") with that kernel's tile sizes.
CalibrationPlan calibration_plan(const ModelConfig& model, const HardwareProfile& base, const std::string& backend,
                                 int fwd_tile_q, int fwd_tile_k, int bwd_tile_q, int bwd_tile_k);

struct CalibrationMeasurements {
  std::vector<double> gemm_s;         // [gemm_tokens]: the layer's forward GEMMs at that many tokens
  std::vector<double> fwd_causal_s;   // [iq * n + ik]: batch_of(q, k) sequences, all heads
  std::vector<double> fwd_full_s;
  std::vector<double> bwd_s;
  double copy_s = 0;                  // copy_bytes device to device
};

struct CalibrationMeta {
  std::string name = "h100-measured";
  std::string obtained = "measured";  // or "synthetic" (tests)
  std::string device;                 // e.g. "NVIDIA H100 80GB HBM3"
  std::string date;                   // ISO 8601
  std::string git_sha;
  std::string script;                 // the command that measured
};

// FLOPs of one attention probe (all its sequences and heads).
double attention_probe_flops(const CalibrationPlan& plan, AttnKind kind, double q, double k);

// The calibration JSON (throws InputError for non-positive or missing times).
nlohmann::json calibration_from_measurements(const HardwareProfile& base, const CalibrationPlan& plan,
                                             const CalibrationMeasurements& m, const CalibrationMeta& meta);

}  // namespace dcp::cost
