// Power-of-two helpers and the CP-size rule (DESIGN.md "CP-size rule"):
//   cp_min(L) = max(min_cp, next_pow2(ceil(L / M)))
// computed in exact integer arithmetic. (The Megatron ports use their own float version,
// which gives the same result for every integer L, M they accept.)
#pragma once

#include <cstdint>

namespace dcp::plan {

constexpr bool is_pow2(int64_t x) { return x > 0 && (x & (x - 1)) == 0; }

// Smallest power of two >= x (x >= 1); saturates at 2^62 for larger x (no overflow).
constexpr int64_t next_pow2(int64_t x) {
  int64_t p = 1;
  while (p < x && p < (int64_t{1} << 62)) p <<= 1;
  return p;
}

// Largest power of two <= x (x >= 1).
constexpr int64_t prev_pow2(int64_t x) {
  int64_t p = 1;
  while (p * 2 <= x) p <<= 1;
  return p;
}

// ceil(a / b) for a >= 0, b >= 1, without the overflow of (a + b - 1) / b near INT64_MAX.
constexpr int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

// Minimum CP size of a sample of length L with per-rank budget M. L >= 1, M >= 1.
constexpr int64_t cp_min(int64_t length, int64_t max_seqlen_per_rank, int64_t min_cp = 1) {
  const int64_t k = next_pow2(ceil_div(length, max_seqlen_per_rank));
  return k > min_cp ? k : min_cp;
}

}  // namespace dcp::plan
