// Attention efficiency tables (see attention_table.h).
//
// Built-in H100 SXM numbers, head dim 128, bf16. Series at q = k = L in TFLOP/s, from the FA3
// paper (arXiv 2407.08608) H100 figures as read in shared/reference/landscape.md section 5 (read
// off figure images: approximate). The paper starts at L = 512, so the 128 and 256 points have
// no source. The FA3 ones (causal 90 / 165, full 200 / 330, backward 110 / 200 TFLOP/s, set in
// 653061e) are [estimate]s by judgement, not derived from any measurement or rule: at 128 tokens
// one 128-row tile per (sequence, head) leaves each CTA a single block after its prologue, so
// they sit at 0.31 / 0.57 (causal), 0.43 / 0.71 (full) and 0.35 / 0.63 (backward) of the FA3
// series' 512 point; the FA2 and cuDNN points continue their series with those same ratios.
// What they are worth: --sensitivity varies them alone (attention_efficiency_short, harness/
// tune.cpp: +-20% moved Llama-13B GitHub's dcp speedup by about 1.3%, helper-66), and a measured
// calibration (dcpbench calibrate, on a GPU) replaces them. (Until 2026-11-26 the FA2 points at
// 128 and 256 tokens sat 10-20% above that rule: 70 / 125, 150 / 240, 90 / 150.)
// Tiles (query rows x key rows of one CTA), from the kernels' sources:
//   fa2   fwd 128 x 64  (flash-attention csrc/flash_attn/src/flash_fwd_launch_template.h:262,
//                        run_mha_fwd_hdim128, the path H100 takes), bwd 64 x 128 (flash_bwd_launch_
//                        template.h:248, run_mha_bwd_hdim128 with >= 144 KB smem)
//   fa3   fwd 128 x 128 (hopper/tile_size.h:31-33: 128 x 128 causal, 128 x 176 non-causal; 128 is
//                        used for both here, so partial-tile losses of non-causal blocks shorter
//                        than 176 keys are underestimated), bwd 64 x 128 (hopper/
//                        flash_bwd_launch_template.h:350-353: 64 causal, 80 non-causal)
//   cudnn [estimate] the FA3 tiles (cuDNN's are not published).
#include "cost/attention_table.h"

#include "core/error.h"
#include "core/json_io.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <set>

namespace dcp::cost {
namespace {

constexpr double kH100PeakTflops = 989.0;  // H100 SXM dense BF16 (datasheet), as in hardware.cpp
const std::vector<double> kLengths = {128, 256, 512, 1024, 2048, 4096, 8192, 16384};

struct Series {
  const char* backend;
  double causal[8];
  double full[8];
  double bwd[8];
  int fwd_tile_q, fwd_tile_k, bwd_tile_q, bwd_tile_k;
};

// TFLOP/s at kLengths (see the file comment for sources and which points are estimates).
const Series kSeries[] = {
    {"fa2",
     {59, 109, 191, 260, 298, 319, 333, 335},
     {133, 219, 309, 350, 362, 368, 370, 370},
     {75, 135, 214, 260, 291, 310, 318, 322},
     128, 64, 64, 128},
    {"fa3",
     {90, 165, 292, 423, 521, 579, 602, 616},
     {200, 330, 467, 565, 625, 638, 646, 648},
     {110, 200, 316, 424, 501, 542, 559, 561},
     128, 128, 64, 128},
    {"cudnn",
     {97, 178, 315, 410, 484, 518, 529, 539},
     {213, 352, 497, 574, 617, 609, 600, 595},
     {107, 193, 305, 408, 465, 499, 518, 516},
     128, 128, 64, 128},
};

// Index and weight of x on the grid in log2 (clamped).
void locate(const std::vector<double>& g, double x, size_t* lo, double* w) {
  if (x <= g.front()) {
    *lo = 0;
    *w = 0;
    return;
  }
  if (x >= g.back()) {
    *lo = g.size() - 1;
    *w = 0;
    return;
  }
  const size_t hi = static_cast<size_t>(std::upper_bound(g.begin(), g.end(), x) - g.begin());
  *lo = hi - 1;
  *w = (std::log2(x) - std::log2(g[*lo])) / (std::log2(g[hi]) - std::log2(g[*lo]));
}

const std::vector<double>& grid_of(const AttentionTable& t, AttnKind kind) {
  switch (kind) {
    case AttnKind::fwd_causal: return t.fwd_causal;
    case AttnKind::fwd_full: return t.fwd_full;
    case AttnKind::bwd: return t.bwd;
    case AttnKind::bwd_causal: break;  // no grid of its own (AttentionTable::at derives it)
  }
  DCP_FAIL("attention table ", t.backend, ": no grid for the causal backward");
}

nlohmann::json grid_json(const std::vector<double>& v, size_t n) {
  nlohmann::json rows = nlohmann::json::array();
  for (size_t i = 0; i < n; ++i) rows.push_back(std::vector<double>(v.begin() + i * n, v.begin() + (i + 1) * n));
  return rows;
}

}  // namespace

double tile_utilization(double tokens, int tile) {
  if (tile <= 1 || tokens <= 0) return 1.0;
  const double tiles = std::ceil(tokens / tile - 1e-9);
  return tokens / (std::max(1.0, tiles) * tile);
}

double AttentionTable::at(AttnKind kind, double q, double k) const {
  const size_t n = lengths.size();
  DCP_CHECK(n > 0 && fwd_causal.size() == n * n && fwd_full.size() == n * n && bwd.size() == n * n,
            "attention table ", backend, " is empty or mis-sized");
  size_t iq = 0, ik = 0;
  double wq = 0, wk = 0;
  locate(lengths, q, &iq, &wq);
  locate(lengths, k, &ik, &wk);
  const size_t iq1 = std::min(iq + 1, n - 1), ik1 = std::min(ik + 1, n - 1);
  // Bilinear in (log2 q, log2 k) on one grid, whole tiles.
  const auto grid = [&](AttnKind g_kind) {
    const auto& g = grid_of(*this, g_kind);
    return (1 - wq) * ((1 - wk) * g[iq * n + ik] + wk * g[iq * n + ik1]) +
           wq * ((1 - wk) * g[iq1 * n + ik] + wk * g[iq1 * n + ik1]);
  };
  const bool fwd = kind == AttnKind::fwd_causal || kind == AttnKind::fwd_full;
  const double v = kind == AttnKind::bwd_causal
                       ? grid(AttnKind::bwd) * std::min(1.0, grid(AttnKind::fwd_causal) / grid(AttnKind::fwd_full))
                       : grid(kind);
  return v * tile_utilization(q, fwd ? fwd_tile_q : bwd_tile_q) * tile_utilization(k, fwd ? fwd_tile_k : bwd_tile_k);
}

std::vector<std::string> attention_backend_names() { return {"fa2", "fa3", "cudnn"}; }

std::vector<AttentionTable> h100_attention_tables() {
  std::vector<AttentionTable> out;
  const size_t n = kLengths.size();
  for (const auto& s : kSeries) {
    AttentionTable t;
    t.backend = s.backend;
    t.head_dim = 128;
    t.lengths = kLengths;
    t.fwd_tile_q = s.fwd_tile_q;
    t.fwd_tile_k = s.fwd_tile_k;
    t.bwd_tile_q = s.bwd_tile_q;
    t.bwd_tile_k = s.bwd_tile_k;
    t.fwd_causal.resize(n * n);
    t.fwd_full.resize(n * n);
    t.bwd.resize(n * n);
    for (size_t iq = 0; iq < n; ++iq) {
      for (size_t ik = 0; ik < n; ++ik) {
        // Forward: a CTA owns a q tile and loops over k -> amortised over k. Backward: a CTA
        // owns a k tile and loops over q -> amortised over q (attention_table.h).
        t.fwd_causal[iq * n + ik] = s.causal[ik] / kH100PeakTflops;
        t.fwd_full[iq * n + ik] = s.full[ik] / kH100PeakTflops;
        t.bwd[iq * n + ik] = s.bwd[iq] / kH100PeakTflops;
      }
    }
    out.push_back(std::move(t));
  }
  return out;
}

void validate_attention_table(const AttentionTable& t, const std::string& profile) {
  const std::string at = "profile " + profile + ": attention table " + t.backend + "/" + std::to_string(t.head_dim);
  DCP_REQUIRE(!t.backend.empty(), "profile ", profile, ": an attention table has no backend name");
  DCP_REQUIRE(t.head_dim >= 1, at, ": head_dim must be >= 1");
  DCP_REQUIRE(!t.lengths.empty(), at, ": no grid lengths");
  for (size_t i = 0; i < t.lengths.size(); ++i) {
    DCP_REQUIRE(t.lengths[i] > 0, at, ": lengths[", i, "]=", t.lengths[i], " must be > 0");
    if (i > 0) DCP_REQUIRE(t.lengths[i] > t.lengths[i - 1], at, ": lengths[", i, "] is not above the previous one");
  }
  const size_t nn = t.lengths.size() * t.lengths.size();
  for (const auto* g : {&t.fwd_causal, &t.fwd_full, &t.bwd}) {
    DCP_REQUIRE(g->size() == nn, at, ": a grid has ", g->size(), " values, expected ", nn);
    for (double v : *g) DCP_REQUIRE(v > 0 && v <= 1, at, ": efficiency ", v, " is not in (0, 1]");
  }
  for (int tile : {t.fwd_tile_q, t.fwd_tile_k, t.bwd_tile_q, t.bwd_tile_k})
    DCP_REQUIRE(tile >= 1, at, ": tile sizes must be >= 1");
}

nlohmann::json attention_table_to_json(const AttentionTable& t) {
  const size_t n = t.lengths.size();
  return {{"backend", t.backend},
          {"head_dim", t.head_dim},
          {"lengths", t.lengths},
          {"fwd_tile", {t.fwd_tile_q, t.fwd_tile_k}},
          {"bwd_tile", {t.bwd_tile_q, t.bwd_tile_k}},
          {"fwd_causal", grid_json(t.fwd_causal, n)},
          {"fwd_full", grid_json(t.fwd_full, n)},
          {"bwd", grid_json(t.bwd, n)}};
}

AttentionTable attention_table_from_json(const nlohmann::json& j, const std::string& where) {
  DCP_REQUIRE(j.is_object(), where, " must be an object");
  static const std::set<std::string> kKeys = {"backend", "head_dim", "lengths", "fwd_tile", "bwd_tile",
                                              "fwd_causal", "fwd_full", "bwd"};
  for (const auto& [k, v] : j.items())
    DCP_REQUIRE(kKeys.count(k), where, ".\"", k, "\" is not a known key (", "backend, head_dim, lengths, fwd_tile, bwd_tile, fwd_causal, fwd_full, bwd)");
  for (const char* k : {"backend", "lengths", "fwd_causal", "fwd_full", "bwd"})
    DCP_REQUIRE(j.contains(k), where, ".\"", k, "\" is missing");
  AttentionTable t;
  DCP_REQUIRE(j["backend"].is_string(), where, ".\"backend\" must be a string");
  t.backend = j["backend"].get<std::string>();
  if (j.contains("head_dim")) {
    t.head_dim = static_cast<int>(json_int(j["head_dim"], 1, 1 << 16, where + ".\"head_dim\""));  // never wrapped
  }
  DCP_REQUIRE(j["lengths"].is_array(), where, ".\"lengths\" must be an array of numbers");
  for (const auto& v : j["lengths"]) {
    DCP_REQUIRE(v.is_number(), where, ".\"lengths\" must be an array of numbers");
    t.lengths.push_back(v.get<double>());
  }
  auto tile = [&](const char* key, int* a, int* b) {
    if (!j.contains(key)) return;
    const auto& v = j[key];
    DCP_REQUIRE(v.is_array() && v.size() == 2 && v[0].is_number_integer() && v[1].is_number_integer(), where,
                ".\"", key, "\" must be [query rows, key rows]");
    *a = static_cast<int>(json_int(v[0], 1, 1 << 20, where + "." + key + "[0]"));  // never wrapped
    *b = static_cast<int>(json_int(v[1], 1, 1 << 20, where + "." + key + "[1]"));
  };
  tile("fwd_tile", &t.fwd_tile_q, &t.fwd_tile_k);
  tile("bwd_tile", &t.bwd_tile_q, &t.bwd_tile_k);
  auto grid = [&](const char* key, std::vector<double>* out) {
    const auto& rows = j[key];
    DCP_REQUIRE(rows.is_array() && rows.size() == t.lengths.size(), where, ".\"", key, "\" must have one row per length");
    for (const auto& row : rows) {
      DCP_REQUIRE(row.is_array() && row.size() == t.lengths.size(), where, ".\"", key,
                  "\" rows must have one value per length");
      for (const auto& v : row) {
        DCP_REQUIRE(v.is_number(), where, ".\"", key, "\" values must be numbers");
        out->push_back(v.get<double>());
      }
    }
  };
  grid("fwd_causal", &t.fwd_causal);
  grid("fwd_full", &t.fwd_full);
  grid("bwd", &t.bwd);
  return t;
}

}  // namespace dcp::cost
