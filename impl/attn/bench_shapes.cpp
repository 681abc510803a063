// See bench_shapes.h.
#include "attn/bench_shapes.h"

#include "core/error.h"
#include "core/rng.h"

namespace dcp::attn {

std::vector<AttnBenchCase> fa3_paper_cases() {
  std::vector<AttnBenchCase> out;
  for (const int d : {64, 128})
    for (const bool causal : {false, true})
      for (int64_t len = 512; len <= kBenchTokens; len *= 2) {
        AttnBenchCase c;
        c.name = "dense L=" + std::to_string(len) + " d=" + std::to_string(d) + (causal ? " causal" : "");
        c.lengths.assign(static_cast<size_t>(kBenchTokens / len), static_cast<int32_t>(len));
        c.heads = kBenchHidden / d;
        c.head_dim = d;
        c.causal = causal;
        out.push_back(std::move(c));
      }
  return out;
}

std::vector<int32_t> pack_lengths(const std::vector<int64_t>& docs, int64_t budget, uint64_t seed) {
  DCP_REQUIRE(budget >= 1, "pack_lengths: budget ", budget, " must be >= 1");
  bool any = false;
  for (int64_t d : docs) any = any || d > 0;
  DCP_REQUIRE(any, "pack_lengths: no document with a positive length among ", docs.size());
  std::vector<int32_t> out;
  int64_t left = budget;
  for (uint64_t i = 0; left > 0; ++i) {
    const auto pick = static_cast<size_t>(hash_uniform(seed, i) * static_cast<double>(docs.size()));
    const int64_t len = docs[pick < docs.size() ? pick : docs.size() - 1];
    if (len <= 0) continue;
    const int64_t take = len < left ? len : left;
    out.push_back(static_cast<int32_t>(take));
    left -= take;
  }
  return out;
}

double attn_flops(const AttnBenchCase& c, bool backward) {
  double sq = 0;
  for (int32_t l : c.lengths) sq += static_cast<double>(l) * static_cast<double>(l);
  double f = 4.0 * c.heads * c.head_dim * sq;
  if (c.causal) f /= 2;
  return backward ? 2.5 * f : f;
}

}  // namespace dcp::attn
