// Built-in hardware profiles, curve interpolation and calibration files (see hardware.h).
//
// Every h100-sxm number carries its source. Where no public measurement exists the number is
// marked [estimate] with the reasoning, so that a calibration file can replace it.
#include "cost/hardware.h"

#include "core/error.h"
#include "core/json_io.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <set>

namespace dcp::cost {
namespace {

constexpr double kH100PeakFlops = 989e12;  // H100 SXM dense BF16 tensor peak (NVIDIA datasheet)

// TFLOP/s table -> efficiency curve.
Curve tflops_curve(std::initializer_list<std::pair<double, double>> pts) {
  Curve c;
  for (auto [x, tf] : pts) c.points.push_back({x, tf * 1e12 / kH100PeakFlops});
  return c;
}

HardwareProfile h100_sxm() {
  HardwareProfile p;
  p.name = "h100-sxm";
  p.calibration = "h100-sxm-public";
  p.obtained = "public";
  p.peak_flops_per_s = kH100PeakFlops;
  // GEMM efficiency vs tokens (M) for hidden-size K, N (~4k-14k):
  //   8192 and above: 798 TFLOP/s measured on an 8192^3 bf16 GEMM (public cuBLAS number quoted in
  //   the issue; landscape §5) -> 0.807.
  //   Below: [estimate] roofline with the weights read once per GEMM: intensity ~ M FLOP/byte,
  //   so at HBM 3.35 TB/s the ceiling is 3.35e12*M FLOP/s (429 TFLOP/s at M=128); points sit
  //   ~70% of min(roofline, 798) to account for tile/wave quantization.
  p.gemm_efficiency = tflops_curve({{128, 300}, {256, 495}, {512, 640}, {1024, 710},
                                    {2048, 750}, {4096, 780}, {8192, 798}});
  AttentionCurves a;
  a.head_dim = 128;
  // FA3 paper (arXiv 2407.08608) figures, H100 SXM5, hdim 128, bf16, as read in landscape §5
  // (values read off figure images: approximate). 512..16k are the paper's points; 128 and 256
  // are [estimate]: the paper's log-linear trend continued (about -45% per halving).
  a.fwd_causal = tflops_curve({{128, 90}, {256, 165}, {512, 292}, {1024, 423}, {2048, 521},
                               {4096, 579}, {8192, 602}, {16384, 616}});
  a.fwd_full = tflops_curve({{128, 200}, {256, 330}, {512, 467}, {1024, 565}, {2048, 625},
                             {4096, 638}, {8192, 646}, {16384, 648}});
  // FA3 backward figure (causality not labelled in the source; used for both).
  a.bwd = tflops_curve({{128, 110}, {256, 200}, {512, 316}, {1024, 424}, {2048, 501},
                        {4096, 542}, {8192, 559}, {16384, 561}});
  p.attention.push_back(a);
  p.intra_node_bytes_per_s = 450e9;  // NVLink 4: 900 GB/s bidirectional = 450 GB/s per direction
  p.intra_node_latency_s = 10e-6;    // [estimate] NCCL p2p small-message latency incl. launch
  p.inter_node_bytes_per_s = 50e9;   // ConnectX-7 NDR 400 Gb/s = 50 GB/s per GPU per direction
  p.inter_node_latency_s = 20e-6;    // [estimate] IB RDMA + NCCL proxy latency
  p.gpus_per_node = 8;               // HGX/DGX H100
  p.microbatch_overhead_s = 0;       // no fixed overhead by default (calibration may add one)
  p.hbm_bytes_per_s = 3.35e12;       // H100 SXM HBM3 (datasheet)
  // [estimate] element-wise traffic per token per layer forward, in units of hidden x 1 byte:
  // 2 RMSNorm (read+write: 4h), 2 residual adds (6h), RoPE on q,k (4h), SwiGLU activation
  // (3*ffn ~ 8h for ffn/h ~ 2.7) = 22 h-values x 2 bytes (bf16) = 44.
  p.elementwise_bytes_per_token_hidden = 44;
  // [estimate] cross-entropy over the logits (Megatron's fused vocab-parallel CE computes in fp32):
  // read bf16 logits (2), write + read fp32 softmax (8), write bf16 grad (2) = 12 bytes per logit.
  p.loss_bytes_per_token_vocab = 12;
  return p;
}

HardwareProfile unit_profile() {
  HardwareProfile p;
  p.name = "unit";
  p.calibration = "unit";
  p.obtained = "synthetic";
  p.peak_flops_per_s = 1e12;
  p.gemm_efficiency.points = {{1, 1.0}};
  AttentionCurves a;
  a.head_dim = 128;
  a.fwd_causal.points = {{1, 1.0}};
  a.fwd_full.points = {{1, 1.0}};
  a.bwd.points = {{1, 1.0}};
  p.attention.push_back(a);
  p.intra_node_bytes_per_s = 1e9;
  p.inter_node_bytes_per_s = 1e9;
  p.gpus_per_node = 4;
  return p;
}

const AttentionCurves* pick(const HardwareProfile& p, int head_dim, const AttentionCurves** hi,
                            double* w) {
  DCP_CHECK(!p.attention.empty(), "profile ", p.name, " has no attention curves");
  const auto& at = p.attention;
  *w = 0;
  *hi = nullptr;
  if (head_dim <= at.front().head_dim) return &at.front();
  if (head_dim >= at.back().head_dim) return &at.back();
  for (size_t i = 0; i + 1 < at.size(); ++i) {
    if (head_dim >= at[i].head_dim && head_dim <= at[i + 1].head_dim) {
      *hi = &at[i + 1];
      *w = double(head_dim - at[i].head_dim) / double(at[i + 1].head_dim - at[i].head_dim);
      return &at[i];
    }
  }
  return &at.back();
}

template <typename F>
double attn_eff(const HardwareProfile& p, int head_dim, double x, F member) {
  const AttentionCurves* hi = nullptr;
  double w = 0;
  const AttentionCurves* lo = pick(p, head_dim, &hi, &w);
  const double a = (lo->*member).at(x);
  return hi ? (1 - w) * a + w * (hi->*member).at(x) : a;
}

void merge_points(Curve& curve, const nlohmann::json& j, const std::string& where) {
  DCP_REQUIRE(j.is_array(), where, " must be an array of [x, y] pairs");
  for (size_t i = 0; i < j.size(); ++i) {
    const auto& e = j[i];
    DCP_REQUIRE(e.is_array() && e.size() == 2 && e[0].is_number() && e[1].is_number(), where, "[",
                i, "] must be a pair of numbers, got ", e.dump());
    const double x = e[0].get<double>(), y = e[1].get<double>();
    auto it = std::find_if(curve.points.begin(), curve.points.end(),
                           [&](const CurvePoint& c) { return c.x == x; });
    if (it != curve.points.end())
      it->y = y;
    else
      curve.points.push_back({x, y});
  }
  std::sort(curve.points.begin(), curve.points.end(),
            [](const CurvePoint& a, const CurvePoint& b) { return a.x < b.x; });
}

nlohmann::json curve_json(const Curve& c) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& p : c.points) a.push_back({p.x, p.y});
  return a;
}

void check_curve(const Curve& c, const std::string& what, const std::string& profile) {
  DCP_REQUIRE(!c.points.empty(), "profile ", profile, ": curve ", what, " is empty");
  for (size_t i = 0; i < c.points.size(); ++i) {
    const auto& p = c.points[i];
    DCP_REQUIRE(p.x > 0, "profile ", profile, ": ", what, "[", i, "] x=", p.x, " must be > 0");
    DCP_REQUIRE(p.y > 0 && p.y <= 1, "profile ", profile, ": ", what, "[", i, "] efficiency=", p.y,
                " must be in (0, 1]");
    if (i > 0)
      DCP_REQUIRE(p.x > c.points[i - 1].x, "profile ", profile, ": ", what, "[", i, "] x=", p.x,
                  " is not above the previous point");
  }
}

}  // namespace

double Curve::at(double x) const {
  DCP_CHECK(!points.empty(), "empty curve");
  if (x <= points.front().x) return points.front().y;
  if (x >= points.back().x) return points.back().y;
  auto hi = std::upper_bound(points.begin(), points.end(), x,
                             [](double v, const CurvePoint& p) { return v < p.x; });
  auto lo = hi - 1;
  const double t = (std::log2(x) - std::log2(lo->x)) / (std::log2(hi->x) - std::log2(lo->x));
  return lo->y + t * (hi->y - lo->y);
}

double HardwareProfile::gemm_efficiency_at(double tokens) const { return gemm_efficiency.at(tokens); }
double HardwareProfile::attn_fwd_causal_efficiency(double s, int d) const {
  return attn_eff(*this, d, s, &AttentionCurves::fwd_causal);
}
double HardwareProfile::attn_fwd_full_efficiency(double s, int d) const {
  return attn_eff(*this, d, s, &AttentionCurves::fwd_full);
}
double HardwareProfile::attn_bwd_efficiency(double s, int d) const {
  return attn_eff(*this, d, s, &AttentionCurves::bwd);
}

HardwareProfile hardware_preset(const std::string& name) {
  if (name == "h100-sxm") return h100_sxm();
  if (name == "unit") return unit_profile();
  throw InputError("unknown hardware profile \"" + name + "\" (known: h100-sxm, unit)");
}

std::vector<std::string> hardware_preset_names() { return {"h100-sxm", "unit"}; }

void validate_profile(const HardwareProfile& p) {
  DCP_REQUIRE(p.peak_flops_per_s > 0, "profile ", p.name, ": peak_flops_per_s=", p.peak_flops_per_s,
              " must be > 0");
  DCP_REQUIRE(p.intra_node_bytes_per_s > 0, "profile ", p.name,
              ": intra_node_bytes_per_s=", p.intra_node_bytes_per_s, " must be > 0");
  DCP_REQUIRE(p.inter_node_bytes_per_s > 0, "profile ", p.name,
              ": inter_node_bytes_per_s=", p.inter_node_bytes_per_s, " must be > 0");
  DCP_REQUIRE(p.intra_node_latency_s >= 0 && p.inter_node_latency_s >= 0 &&
                  p.microbatch_overhead_s >= 0 && p.hbm_bytes_per_s >= 0 &&
                  p.elementwise_bytes_per_token_hidden >= 0 && p.loss_bytes_per_token_vocab >= 0,
              "profile ", p.name, ": latencies, overheads and hbm numbers must be >= 0");
  DCP_REQUIRE(p.gpus_per_node >= 1, "profile ", p.name, ": gpus_per_node=", p.gpus_per_node,
              " must be >= 1");
  check_curve(p.gemm_efficiency, "gemm_efficiency", p.name);
  DCP_REQUIRE(!p.attention.empty(), "profile ", p.name, ": no attention curves");
  for (size_t i = 0; i < p.attention.size(); ++i) {
    const auto& a = p.attention[i];
    const std::string tag = "attention[head_dim=" + std::to_string(a.head_dim) + "].";
    check_curve(a.fwd_causal, tag + "fwd_causal", p.name);
    check_curve(a.fwd_full, tag + "fwd_full", p.name);
    check_curve(a.bwd, tag + "bwd", p.name);
    if (i > 0)
      DCP_REQUIRE(a.head_dim > p.attention[i - 1].head_dim, "profile ", p.name,
                  ": attention head dims must ascend");
  }
}

HardwareProfile apply_calibration(const HardwareProfile& base, const nlohmann::json& j,
                                  const std::string& source) {
  DCP_REQUIRE(j.is_object(), source, ": calibration must be a JSON object");
  HardwareProfile p = base;
  static const std::set<std::string> kScalars = {
      "peak_flops_per_s",      "intra_node_bytes_per_s", "intra_node_latency_s",
      "inter_node_bytes_per_s", "inter_node_latency_s",  "microbatch_overhead_s",
      "hbm_bytes_per_s",       "elementwise_bytes_per_token_hidden", "loss_bytes_per_token_vocab"};
  for (const auto& [key, value] : j.items()) {
    const std::string at = source + ": \"" + key + "\"";
    if (key == "schema") {
      DCP_REQUIRE(value == "dcpbench.calibration.v1", at, "=", value.dump(),
                  " (expected \"dcpbench.calibration.v1\")");
    } else if (key == "name") {
      DCP_REQUIRE(value.is_string() && !value.get<std::string>().empty(), at, " must be a string");
      p.calibration = value.get<std::string>();
    } else if (key == "profile") {
      DCP_REQUIRE(value.is_string() && value.get<std::string>() == base.name, at, "=", value.dump(),
                  " does not match the profile \"", base.name, "\"");
    } else if (key == "obtained") {
      DCP_REQUIRE(value == "public" || value == "measured" || value == "synthetic", at, "=",
                  value.dump(), " (expected \"public\", \"measured\" or \"synthetic\")");
      p.obtained = value.get<std::string>();
    } else if (key == "comment" || key == "sources" || key == "script" || key == "device") {
      // free-form provenance
    } else if (kScalars.count(key)) {
      DCP_REQUIRE(value.is_number(), at, "=", value.dump(), " must be a number");
      const double v = value.get<double>();
      if (key == "peak_flops_per_s") p.peak_flops_per_s = v;
      if (key == "intra_node_bytes_per_s") p.intra_node_bytes_per_s = v;
      if (key == "intra_node_latency_s") p.intra_node_latency_s = v;
      if (key == "inter_node_bytes_per_s") p.inter_node_bytes_per_s = v;
      if (key == "inter_node_latency_s") p.inter_node_latency_s = v;
      if (key == "microbatch_overhead_s") p.microbatch_overhead_s = v;
      if (key == "hbm_bytes_per_s") p.hbm_bytes_per_s = v;
      if (key == "elementwise_bytes_per_token_hidden") p.elementwise_bytes_per_token_hidden = v;
      if (key == "loss_bytes_per_token_vocab") p.loss_bytes_per_token_vocab = v;
    } else if (key == "gpus_per_node") {
      p.gpus_per_node = static_cast<int>(json_int(value, 1, 1 << 20, at));  // range-checked, never wrapped
    } else if (key == "gemm_efficiency") {
      merge_points(p.gemm_efficiency, value, at);
    } else if (key == "attention") {
      DCP_REQUIRE(value.is_array(), at, " must be an array");
      for (const auto& a : value) {
        DCP_REQUIRE(a.is_object() && a.contains("head_dim") && a["head_dim"].is_number_integer(),
                    at, ": every entry needs an integer \"head_dim\"");
        const int d = static_cast<int>(json_int(a["head_dim"], 1, 1 << 16, at + "[].\"head_dim\""));
        auto it = std::find_if(p.attention.begin(), p.attention.end(),
                               [&](const AttentionCurves& c) { return c.head_dim == d; });
        if (it == p.attention.end()) {
          AttentionCurves fresh;
          fresh.head_dim = d;
          p.attention.push_back(fresh);
          std::sort(p.attention.begin(), p.attention.end(),
                    [](const auto& x, const auto& y) { return x.head_dim < y.head_dim; });
          it = std::find_if(p.attention.begin(), p.attention.end(),
                            [&](const AttentionCurves& c) { return c.head_dim == d; });
        }
        for (const auto& [k, v] : a.items()) {
          const std::string w = at + "[head_dim=" + std::to_string(d) + "].\"" + k + "\"";
          if (k == "head_dim") continue;
          if (k == "fwd_causal")
            merge_points(it->fwd_causal, v, w);
          else if (k == "fwd_full")
            merge_points(it->fwd_full, v, w);
          else if (k == "bwd")
            merge_points(it->bwd, v, w);
          else
            throw InputError(w + " is not a known key (fwd_causal, fwd_full, bwd)");
        }
      }
    } else {
      throw InputError(at + " is not a known calibration key");
    }
  }
  validate_profile(p);
  return p;
}

HardwareProfile load_calibration_file(const HardwareProfile& base, const std::string& path) {
  const nlohmann::json j = read_json_file(path);
  // A file's numbers label every result ("simulated:<model>@<name>"), so it must say its name and
  // how its numbers were obtained; otherwise results would carry the built-in profile's label.
  for (const char* key : {"name", "obtained"}) {
    DCP_REQUIRE(j.is_object() && j.contains(key), path, ": \"", key,
                "\" is missing (a calibration file must name itself and say how it was obtained)");
  }
  return apply_calibration(base, j, path);
}

nlohmann::json profile_to_json(const HardwareProfile& p) {
  nlohmann::json j;
  j["schema"] = "dcpbench.calibration.v1";
  j["name"] = p.calibration;
  j["profile"] = p.name;
  j["obtained"] = p.obtained;
  j["peak_flops_per_s"] = p.peak_flops_per_s;
  j["intra_node_bytes_per_s"] = p.intra_node_bytes_per_s;
  j["intra_node_latency_s"] = p.intra_node_latency_s;
  j["inter_node_bytes_per_s"] = p.inter_node_bytes_per_s;
  j["inter_node_latency_s"] = p.inter_node_latency_s;
  j["gpus_per_node"] = p.gpus_per_node;
  j["microbatch_overhead_s"] = p.microbatch_overhead_s;
  j["hbm_bytes_per_s"] = p.hbm_bytes_per_s;
  j["elementwise_bytes_per_token_hidden"] = p.elementwise_bytes_per_token_hidden;
  j["loss_bytes_per_token_vocab"] = p.loss_bytes_per_token_vocab;
  j["gemm_efficiency"] = curve_json(p.gemm_efficiency);
  j["attention"] = nlohmann::json::array();
  for (const auto& a : p.attention)
    j["attention"].push_back({{"head_dim", a.head_dim},
                              {"fwd_causal", curve_json(a.fwd_causal)},
                              {"fwd_full", curve_json(a.fwd_full)},
                              {"bwd", curve_json(a.bwd)}});
  return j;
}

}  // namespace dcp::cost
