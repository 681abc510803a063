// One comparison helper for every fast path against the float64 reference (llm.c's
// validate_result): max absolute error, error relative to the largest reference magnitude,
// the worst index and the first few (ref, got) pairs, in one report string.
//
// Relative error here = max_i |got_i - ref_i| / max_i |ref_i| (relative to the max magnitude of
// the reference tensor, not elementwise: elementwise ratios explode on entries near zero).
// Non-finite values: equal infinities (e.g. lse = -inf on padding rows in both) count as exact;
// any other non-finite value, or an infinity on one side only, makes the comparison fail.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace dcp::attn {

struct Comparison {
  int64_t count = 0;
  double max_abs_err = 0;
  double max_ref_abs = 0;
  double rel_err = 0;        // max_abs_err / max_ref_abs (0 when both are 0)
  int64_t worst_index = -1;  // index of max_abs_err (or of the first non-finite mismatch)
  double worst_ref = 0, worst_got = 0;
  int64_t nonfinite_mismatches = 0;
  std::string first_pairs;   // "i: ref got" for the first few indices

  bool within(double rel_tol) const { return nonfinite_mismatches == 0 && rel_err <= rel_tol; }
  // One line: "<name>: n=.. max_abs=.. rel=.. worst[i]: ref=.. got=.. first: ..."
  std::string report(const std::string& name) const;
};

template <typename T>
Comparison compare_to_ref(std::span<const double> ref, std::span<const T> got,
                          int first_pairs = 4);

}  // namespace dcp::attn
