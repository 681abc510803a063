// The bf16 acceptance rule for attention kernels (issue 9, item 3), on the host: what a bf16
// kernel's output must satisfy against the float64 reference, derived the way FlashAttention-3's
// tests derive it, so that the rule is a property of the inputs, not a number picked to pass.
//
// FlashAttention's rule (hopper/test_flash_attn.py and tests/cute/test_flash_attn.py in
// Dao-AILab/flash-attention): out_ref is attention computed in fp32 from the bf16 inputs, out_pt
// is "the same naive algorithm" run in the input precision (bf16 matmuls, softmax, outputs), and
//   max|out - out_ref| <= 2 * max|out_pt - out_ref| + fwd_atol,
//   fwd_atol = 2 * max|(out_ref + 0.3 - 0.3) - out_ref|   (computed in the output dtype: the
//              rounding floor of bf16 around 0.3),
// and likewise for dq, dk, dv with their own floors. A kernel may be at most twice as inaccurate
// as the textbook bf16 algorithm on the same inputs.
//
// Ours, with the stronger float64 reference r (attn_ref.h) on the same bf16-rounded inputs:
//   naive = attn_fwd_naive_bf16 / attn_bwd_naive_bf16 below, the textbook algorithm with every
//           matmul output, the softmax probabilities and the outputs rounded to bf16 and every
//           sum accumulated in fp32, as PyTorch's bf16 matmul and softmax do (FlashAttention's
//           attention_ref(upcast=False, reorder_ops=True): k is scaled, after repeat_kv, before
//           the QK^T matmul, so the backward rounds dS^T Q and then its scaled copy);
//   tol   = 2 * max_i |naive_i - r_i| + 2 * max_i |o(o(r_i + 0.3) - 0.3) - r_i|,
//           o = rounding to the kernel's output type (bf16 for out, dq, dk, dv; fp32 for lse,
//           which every kernel we compare writes in fp32: its floor is fp32's, its naive error
//           that of an lse over bf16 scores);
//   pass  = max_i |got_i - r_i| <= tol, and no non-finite mismatch (compare.h).
// Measured on the host (test_bf16_rule.cpp, lengths 1..130, d 64/128, GQA): tol for out is
// 0.008-0.017 (naive 0.001-0.004, floor 0.005-0.009); an fp32-accumulating kernel with bf16
// outputs, keeping P in fp32, lands at 0.09-0.17 of tol on out, dq, dk, dv (a kernel that rounds
// P and dS to bf16, as FA3 does, sits nearer the naive error, which is under half of tol by
// construction); a dropped diagonal key, a missing softmax scale in dk or dv over one head of a
// GQA group exceed it by more than 40x, an lse stored in bf16 by about 6x. For the fp32 lse the
// naive error (from bf16 scores, 4e-4 to 1e-3) dominates, so the rule catches only lse errors
// above that;
// an fp32 kernel's lse is ~5e-7 off, and the kernels' tests also hold it to kTolF32
// (tolerances.h).
//
// bf16 here: 8 significand bits, round to nearest even, the float exponent range; values are
// kept in doubles that are exactly representable in bf16. Subnormals keep 8 bits (bf16 has fewer
// there; irrelevant at attention magnitudes).
#pragma once

#include <span>
#include <string>

#include "attn/attn_shape.h"
#include "attn/compare.h"
#include "attn/thd.h"

namespace dcp::attn {

// The 16-bit input type of a kernel: the naive algorithm rounds to it, and the rule's floor of
// a tensor the kernel writes in it. fp16 (IEEE binary16: 11 significand bits, subnormals below
// 2^-14, largest finite 65504) gets the same rule with its own rounding: FlashAttention's tests
// apply the rule to fp16 and bf16 alike.
enum class Half { bf16, fp16 };

// x rounded to the nearest bf16 value (ties to even); +-inf and NaN pass through; finite values
// beyond the largest bf16 become +-inf.
double round_bf16(double x);

// Rounds every element in place.
void round_bf16(std::span<double> x);

// x rounded to the nearest fp16 value (ties to even, subnormals kept, beyond 65504 to +-inf).
double round_fp16(double x);
double round_half(double x, Half h);
// round_half of an fp32 value, to fp32 (the value is one), bit for bit the same: the naive
// algorithm's rounding after each op. For bf16 and a normal x it rounds x's low 16 bits off, to
// nearest even, in its own bits (several times faster than through frexp); every other case
// goes through round_half (bf16 on an fp32 subnormal keeps 8 significant bits there, as
// round_bf16 does).
float round_half(float x, Half h);

// The naive bf16 algorithm (see top). Inputs must already be bf16 values (round_bf16); layouts
// and mask as attn_ref.h. lse stays fp32 (the kernels' lse is fp32). GQA: the query heads of a
// kv group contribute to dk/dv through one fp32 sum, rounded once (the repeat_kv backward).
void attn_fwd_naive_bf16(const ThdBatch& b, const AttnShape& s, std::span<const double> q,
                         std::span<const double> k, std::span<const double> v, std::span<double> out,
                         std::span<double> lse);
void attn_bwd_naive_bf16(const ThdBatch& b, const AttnShape& s, std::span<const double> q,
                         std::span<const double> k, std::span<const double> v,
                         std::span<const double> dout, std::span<double> dq, std::span<double> dk,
                         std::span<double> dv);

// The same in either 16-bit type over a rectangular problem (queries laid out by bq, keys by bk,
// mask keys_attended(s, i, len_q, len_k), attn_ref.h); the _bf16 forms above are these with
// bq = bk and Half::bf16.
void attn_fwd_naive(const ThdBatch& bq, const ThdBatch& bk, const AttnShape& s, Half half,
                    std::span<const double> q, std::span<const double> k, std::span<const double> v,
                    std::span<double> out, std::span<double> lse);
void attn_bwd_naive(const ThdBatch& bq, const ThdBatch& bk, const AttnShape& s, Half half,
                    std::span<const double> q, std::span<const double> k, std::span<const double> v,
                    std::span<const double> dout, std::span<double> dq, std::span<double> dk,
                    std::span<double> dv);

struct Bf16Rule {
  double naive_err = 0;  // max |naive - ref|
  double floor = 0;      // 2 * max |o(o(ref + 0.3) - 0.3) - ref|, o = the output type's rounding
  double tol() const { return 2.0 * naive_err + floor; }
};

// The output type a kernel writes a tensor in (sets the rule's floor).
enum class OutType { bf16, fp16, fp32 };

// The rule of one tensor from its float64 reference and the naive bf16 result.
Bf16Rule bf16_rule(std::span<const double> ref, std::span<const double> naive, OutType out = OutType::bf16);

struct Bf16Check {
  Bf16Rule rule;
  Comparison got;  // the kernel's output against the reference
  bool pass() const { return got.nonfinite_mismatches == 0 && got.max_abs_err <= rule.tol(); }
  // One line: "<name>: max_abs=.. <= tol=.. (2 x naive bf16 ..  + floor ..): pass|FAIL ..."
  std::string report(const std::string& name) const;
};

template <typename T>
Bf16Check check_bf16_rule(std::span<const double> ref, std::span<const double> naive,
                          std::span<const T> got, OutType out = OutType::bf16);

}  // namespace dcp::attn
