// The one tolerance table for attention paths compared with the float64 reference
// (compare.h: error relative to the largest reference magnitude of the tensor).
//
// Where the numbers come from (DESIGN.md "Numerics and checks"):
//   float64 CP vs float64 reference: 1e-10. CP only reorders sums (the LSE merge splits a
//     softmax over key blocks; dK/dV are summed across ranks in another order). Each reordering
//     moves a result by a few ulps (2^-52 ~ 2.2e-16) times the number of terms (<= a few
//     thousand keys in our tests): ~1e-13 at worst, so 1e-10 leaves three orders of margin and
//     still catches any wrong key, missing step or double-counted block (those are O(1e-2)).
//   float32 vs float64 reference: 1e-5. Inputs are rounded to float32 (2^-24 ~ 6e-8 relative),
//     the scores, exponentials and sums accumulate in float32 over <= ~1000 keys: observed
//     errors are ~1e-7..1e-6; 1e-5 is DESIGN.md's bound. A wrong mask is O(1e-2), far above.
//   bf16 on GPU (CUDA kernels, later): 2e-2, DESIGN.md's bound (8 mantissa bits), as a ceiling;
//     the kernels' tests use the input-derived rule of bf16_rule.h (FlashAttention-3's: at most
//     2 x the error of the naive bf16 algorithm on the same inputs, plus the output type's
//     rounding floor), which is tighter (0.008-0.017 absolute for outputs of magnitude < 1).
#pragma once

namespace dcp::attn {

struct Tolerance {
  double rel_to_max;
  const char* why;
};

inline constexpr Tolerance kTolCpF64{1e-10, "float64: CP reorders sums only (ulp-level)"};
inline constexpr Tolerance kTolF32{1e-5, "float32 inputs and accumulation vs float64"};
inline constexpr Tolerance kTolBf16{2e-2, "bf16 inputs, fp32 accumulation (GPU kernels)"};

template <typename T>
constexpr Tolerance tolerance_for();
template <>
constexpr Tolerance tolerance_for<double>() { return kTolCpF64; }
template <>
constexpr Tolerance tolerance_for<float>() { return kTolF32; }

}  // namespace dcp::attn
