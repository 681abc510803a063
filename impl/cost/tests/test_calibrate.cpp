// A measured calibration is the inverse of the cost model at the measured points: times the
// public profile itself predicts, fitted, give back its GEMM curve and its attention table there
// (and the calibration file loads like any other).
#include <gtest/gtest.h>

#include "core/error.h"
#include "cost/calibrate.h"
#include "cost/hardware.h"

namespace dcp::cost {
namespace {

TEST(Calibrate, FittingTheModelsOwnTimesGivesBackTheModel) {
  const HardwareProfile base = hardware_preset("h100-sxm");
  const ModelConfig model = model_preset("llama-13b");
  const AttentionTable& fa2 = *std::find_if(base.attention_tables.begin(), base.attention_tables.end(),
                                            [](const AttentionTable& t) { return t.backend == "fa2"; });
  // The "measured" kernel behaves exactly like the profile's FA2 table (same tiles).
  const CalibrationPlan plan = calibration_plan(model, base, "dcpbench", fa2.fwd_tile_q, fa2.fwd_tile_k,
                                                fa2.bwd_tile_q, fa2.bwd_tile_k);
  ASSERT_EQ(plan.gemm_flops_per_token, fwd_layer_gemm_flops_per_token(model));
  CalibrationMeasurements m;
  for (double x : plan.gemm_tokens)
    m.gemm_s.push_back(plan.gemm_flops_per_token * x / (base.peak_flops_per_s * base.gemm_efficiency_at(x)));
  const auto& L = plan.attention.lengths;
  for (AttnKind kind : {AttnKind::fwd_causal, AttnKind::fwd_full, AttnKind::bwd}) {
    auto& out = kind == AttnKind::fwd_causal ? m.fwd_causal_s : kind == AttnKind::fwd_full ? m.fwd_full_s : m.bwd_s;
    for (double q : L)
      for (double k : L)
        out.push_back(attention_probe_flops(plan, kind, q, k) /
                      (base.peak_flops_per_s * base.attn_efficiency("fa2", kind, q, k, plan.attention.head_dim)));
  }
  m.copy_s = 2.0 * static_cast<double>(plan.copy_bytes) / 3.0e12;
  CalibrationMeta meta;
  meta.name = "round-trip";
  meta.obtained = "synthetic";
  meta.device = "none (the public profile's own predictions)";
  const nlohmann::json j = calibration_from_measurements(base, plan, m, meta);
  const HardwareProfile fit = apply_calibration(base, j, "round-trip");
  EXPECT_EQ(fit.calibration, "round-trip");
  EXPECT_EQ(fit.obtained, "synthetic");
  EXPECT_NEAR(fit.hbm_bytes_per_s, 3.0e12, 1.0);
  for (double x : plan.gemm_tokens) EXPECT_NEAR(fit.gemm_efficiency_at(x), base.gemm_efficiency_at(x), 1e-12) << x;
  for (AttnKind kind : {AttnKind::fwd_causal, AttnKind::fwd_full, AttnKind::bwd})
    for (double q : L)
      for (double k : L)
        EXPECT_NEAR(fit.attn_efficiency("dcpbench", kind, q, k, plan.attention.head_dim),
                    base.attn_efficiency("fa2", kind, q, k, plan.attention.head_dim), 1e-9)
            << static_cast<int>(kind) << " " << q << " " << k;
}

TEST(Calibrate, RefusesMissingOrNonPositiveTimes) {
  const HardwareProfile base = hardware_preset("h100-sxm");
  const CalibrationPlan plan = calibration_plan(model_preset("llama-13b"), base, "dcpbench", 64, 64, 64, 64);
  CalibrationMeasurements m;
  EXPECT_THROW(calibration_from_measurements(base, plan, m, {}), InputError);
  m.gemm_s.assign(plan.gemm_tokens.size(), 1e-3);
  const size_t n = plan.attention.lengths.size();
  m.fwd_causal_s.assign(n * n, 1e-3);
  m.fwd_full_s.assign(n * n, 1e-3);
  m.bwd_s.assign(n * n, 1e-3);
  EXPECT_NO_THROW(calibration_from_measurements(base, plan, m, {}));
  m.bwd_s[3] = 0;
  EXPECT_THROW(calibration_from_measurements(base, plan, m, {}), InputError);
}

}  // namespace
}  // namespace dcp::cost
