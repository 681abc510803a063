// See calibrate.h.
#include "cost/calibrate.h"

#include "core/error.h"

#include <algorithm>

namespace dcp::cost {

int64_t CalibrationPlan::batch_of(double q, double k) const {
  const double longest = std::max(q, k);
  return std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(attention_tokens) / longest));
}

CalibrationPlan calibration_plan(const ModelConfig& model, const HardwareProfile& base, const std::string& backend,
                                 int fwd_tile_q, int fwd_tile_k, int bwd_tile_q, int bwd_tile_k) {
  validate_model(model);
  DCP_REQUIRE(!base.gemm_efficiency.points.empty(), "calibration_plan: profile ", base.name, " has no GEMM curve");
  DCP_REQUIRE(!base.attention_tables.empty(), "calibration_plan: profile ", base.name, " has no attention table");
  CalibrationPlan p;
  for (const auto& pt : base.gemm_efficiency.points) p.gemm_tokens.push_back(pt.x);
  const int64_t h = model.hidden, q = model.q_dim(), kv = model.kv_dim();
  p.gemm_shapes = {{q + 2 * kv, h}, {h, q}, {model.swiglu ? 2 * model.ffn : model.ffn, h}, {h, model.ffn}};
  for (const auto& s : p.gemm_shapes) p.gemm_flops_per_token += 2.0 * static_cast<double>(s.n) * static_cast<double>(s.k);
  p.attention.backend = backend;
  p.attention.head_dim = static_cast<int>(model.head_dim_or_default());
  p.attention.lengths = base.attention_tables.front().lengths;
  p.attention.fwd_tile_q = fwd_tile_q;
  p.attention.fwd_tile_k = fwd_tile_k;
  p.attention.bwd_tile_q = bwd_tile_q;
  p.attention.bwd_tile_k = bwd_tile_k;
  p.heads = model.heads;
  p.kv_heads = model.kv_heads;
  return p;
}

double attention_probe_flops(const CalibrationPlan& plan, AttnKind kind, double q, double k) {
  // (query, key) pairs: all of them, or causal aligned bottom-right (query i sees keys
  // <= i + k - q) counted as the time model counts them, by area: q k - q^2 / 2 (k^2 / 2 when
  // q > k), so q^2 / 2 on the diagonal, the half of q k that ring_attn_terms charges. The
  // discrete count q (q + 1) / 2 made a measured causal efficiency (1 + 1/q) too high, 0.8% at
  // 128 tokens, which the simulator would then have charged too fast (helper-66, 2026-12-07).
  double pairs = q * k;
  if (kind == AttnKind::fwd_causal) pairs = q <= k ? q * k - q * q / 2 : k * k / 2;
  const double f = 4.0 * plan.attention.head_dim * pairs * plan.heads * static_cast<double>(plan.batch_of(q, k));
  return kind == AttnKind::bwd ? 2.5 * f : f;  // the backward is probed without a mask
}

nlohmann::json calibration_from_measurements(const HardwareProfile& base, const CalibrationPlan& plan,
                                             const CalibrationMeasurements& m, const CalibrationMeta& meta) {
  const size_t n = plan.attention.lengths.size();
  DCP_REQUIRE(m.gemm_s.size() == plan.gemm_tokens.size(), "calibration: ", m.gemm_s.size(), " GEMM times for ",
              plan.gemm_tokens.size(), " points");
  for (const auto* v : {&m.fwd_causal_s, &m.fwd_full_s, &m.bwd_s})
    DCP_REQUIRE(v->size() == n * n, "calibration: ", v->size(), " attention times for a ", n, " x ", n, " grid");
  const double peak = base.peak_flops_per_s;
  DCP_REQUIRE(peak > 0, "calibration: profile ", base.name, " has no peak");
  nlohmann::json curve = nlohmann::json::array();
  for (size_t i = 0; i < plan.gemm_tokens.size(); ++i) {
    DCP_REQUIRE(m.gemm_s[i] > 0, "calibration: GEMM time ", m.gemm_s[i], " at ", plan.gemm_tokens[i], " tokens");
    const double eff = plan.gemm_flops_per_token * plan.gemm_tokens[i] / (m.gemm_s[i] * peak);
    curve.push_back({plan.gemm_tokens[i], std::clamp(eff, 1e-6, 1.0)});
  }
  AttentionTable t = plan.attention;
  const auto grid = [&](AttnKind kind, const std::vector<double>& times, std::vector<double>& out) {
    out.assign(n * n, 0.0);
    const bool fwd = kind == AttnKind::fwd_causal || kind == AttnKind::fwd_full;
    for (size_t iq = 0; iq < n; ++iq)
      for (size_t ik = 0; ik < n; ++ik) {
        const double q = t.lengths[iq], k = t.lengths[ik], s = times[iq * n + ik];
        DCP_REQUIRE(s > 0, "calibration: attention time ", s, " at (", q, ", ", k, ")");
        const double util = tile_utilization(q, fwd ? t.fwd_tile_q : t.bwd_tile_q) *
                            tile_utilization(k, fwd ? t.fwd_tile_k : t.bwd_tile_k);
        out[iq * n + ik] = std::clamp(attention_probe_flops(plan, kind, q, k) / (s * peak) / util, 1e-6, 1.0);
      }
  };
  grid(AttnKind::fwd_causal, m.fwd_causal_s, t.fwd_causal);
  grid(AttnKind::fwd_full, m.fwd_full_s, t.fwd_full);
  grid(AttnKind::bwd, m.bwd_s, t.bwd);
  nlohmann::json j;
  j["schema"] = "dcpbench.calibration.v1";
  j["name"] = meta.name;
  j["profile"] = base.name;
  j["obtained"] = meta.obtained;
  j["device"] = meta.device;
  j["date"] = meta.date;
  j["git_sha"] = meta.git_sha;
  j["script"] = meta.script;
  j["comment"] = "GEMM curve: one layer's forward GEMMs of the model timed per token count; attention table of "
                 "backend \"" + t.backend + "\" timed per (q, k) and divided by its tile utilisation; HBM from a "
                 "device-to-device copy (impl/cost/calibrate.h). Other keys are the base profile's.";
  j["gemm_efficiency"] = curve;
  j["attention_tables"] = nlohmann::json::array({attention_table_to_json(t)});
  if (m.copy_s > 0) j["hbm_bytes_per_s"] = 2.0 * static_cast<double>(plan.copy_bytes) / m.copy_s;
  return j;
}

}  // namespace dcp::cost
