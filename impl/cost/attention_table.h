// Attention kernel efficiency as a table over (query length, key length), one table per backend
// ("fa2", "fa3", "cudnn") and head dim.
//
// Efficiency = fraction of the GPU's peak at which one varlen attention kernel processes a
// sequence whose query block has q tokens and whose key/value block has k tokens, counting the
// FLOPs the way the FA3 paper does (causal forward = half of 4*d*q*k; backward = 2.5 x forward):
//
//   eff(kind, q, k) = grid(kind, q, k) * util(q, tile_q) * util(k, tile_k)
//   util(x, B)      = x / (ceil(x / B) * B)       (a partial tile costs a whole tile)
//
// grid() is bilinear in (log2 q, log2 k) between the grid points and flat outside them; it holds
// the efficiency of whole tiles. The tile factor is what makes short sequences honest: a 40-token
// sequence still runs one 128-row tile, so it gets 40/128 of the 128-token efficiency instead of
// the flat clamp of the old 1-D curves (issue 8). Tile sizes are the kernels' own (attention_table.cpp
// cites them).
//
// The backward grid is non-causal: the FA3 paper's backward figures and our calibration probes
// (calibrate.cpp) have no mask. A causal backward (a diagonal ring step, a cp = 1 sequence) is
// read as bwd_causal = bwd x fwd_causal / fwd_full at the same (q, k) [estimate]: the causal
// kernels lose the same things in both directions, the masked half of every diagonal tile and
// the CTAs with little work (a causal forward CTA owns a query tile and loops over the key tiles
// up to the diagonal; a causal backward CTA owns a key tile and loops over the query tiles from
// the diagonal down). On the FA3 tables that is 0.45 of the non-causal backward at 128 tokens,
// 0.63 at 512, 0.75 at 1k, 0.91 at 4k and 0.95 at 16k; the ratio is capped at 1 (a measured
// causal forward aligned bottom-right may beat the full one where q < k). (Until 2026-11-26 the
// non-causal backward was used for causal blocks too, which rated every diagonal and cp = 1
// backward up to 2.2x too fast at 128 tokens, 1.6x at 512.)
//
// Why the grid depends on one axis in the built-in tables: the forward kernel gives each CTA one
// q tile and loops over the k tiles, so the fixed prologue/epilogue of a CTA is amortised over k;
// the backward kernel gives each CTA one k tile and loops over q. The published curves (FA3
// paper, q = k) therefore fill the forward grid along k and the backward grid along q. A measured
// calibration may give a full 2-D grid.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <vector>

namespace dcp::cost {

// bwd: the non-causal backward (the table's grid); bwd_causal: derived from it (above).
enum class AttnKind { fwd_causal, fwd_full, bwd, bwd_causal };

struct AttentionTable {
  std::string backend;          // "fa2" | "fa3" | "cudnn" (or a calibration's own name)
  int head_dim = 128;
  std::vector<double> lengths;  // grid points in tokens, ascending, > 0; both axes
  // Row-major [iq * n + ik], n = lengths.size(); fractions of peak in (0, 1].
  std::vector<double> fwd_causal;
  std::vector<double> fwd_full;
  std::vector<double> bwd;  // non-causal
  int fwd_tile_q = 128;  // forward CTA tile: query rows, key rows per iteration
  int fwd_tile_k = 128;
  int bwd_tile_q = 64;   // backward CTA tile
  int bwd_tile_k = 128;

  // Efficiency at query length q and key length k (tokens, > 0; fractional local lengths allowed).
  double at(AttnKind kind, double q_tokens, double k_tokens) const;
};

// Backends with built-in H100 tables (head dim 128).
std::vector<std::string> attention_backend_names();

// Built-in H100 SXM tables, one per backend (sources in attention_table.cpp).
std::vector<AttentionTable> h100_attention_tables();

// Tile-quantisation factor util(x, B) above.
double tile_utilization(double tokens, int tile);

// Throws InputError naming the first bad field.
void validate_attention_table(const AttentionTable& t, const std::string& profile);

nlohmann::json attention_table_to_json(const AttentionTable& t);
// Parses one table object; `where` names it in messages. Unknown keys are InputErrors.
AttentionTable attention_table_from_json(const nlohmann::json& j, const std::string& where);

}  // namespace dcp::cost
