// Finite-difference gradient checks in float64 for the model's layers.
//
// For a scalar function f of a tensor `var` (f recomputes the forward pass), compares the
// analytic gradient with central differences (f(v + e) - f(v - e)) / 2e on every element (or a
// seeded subset of at most max_checks). Error = max |fd - analytic| / max |analytic| (relative
// to the largest gradient entry, as attn/compare.h, since elementwise ratios explode near 0).
// With e = 1e-5 in float64 the truncation error is O(e^2 f''') ~ 1e-10 and the rounding error
// O(ulp(f) / e) ~ 1e-11 for the O(1) losses used here; tests accept 1e-6, which a wrong term in a
// backward (an O(1) relative error) cannot meet.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "attn/compare.h"
#include "core/rng.h"
#include "model/params.h"

namespace dcp::model::testing {

// The relative error the tests accept (derivation above).
inline constexpr double kFdTol = 1e-6;

struct FdResult {
  double rel_err = 0;
  double max_analytic = 0;
  int64_t worst = -1;
  double worst_fd = 0, worst_an = 0;
  std::string str() const {
    return "rel_err=" + std::to_string(rel_err) + " worst[" + std::to_string(worst) +
           "] fd=" + std::to_string(worst_fd) + " analytic=" + std::to_string(worst_an) +
           " max|analytic|=" + std::to_string(max_analytic);
  }
};

inline FdResult fd_check(const std::function<double()>& f, std::span<double> var,
                         std::span<const double> analytic, int64_t max_checks = 400,
                         uint64_t seed = 7, double eps = 1e-5) {
  FdResult r;
  for (double a : analytic) r.max_analytic = std::max(r.max_analytic, std::abs(a));
  std::vector<int64_t> idx;
  const int64_t n = static_cast<int64_t>(var.size());
  if (n <= max_checks) {
    for (int64_t i = 0; i < n; ++i) idx.push_back(i);
  } else {
    Rng rng(seed);
    for (int64_t c = 0; c < max_checks; ++c) idx.push_back(rng.uniform_int(0, n - 1));
  }
  double worst = 0;
  for (int64_t i : idx) {
    const double v0 = var[i];
    var[i] = v0 + eps;
    const double fp = f();
    var[i] = v0 - eps;
    const double fm = f();
    var[i] = v0;
    const double fd = (fp - fm) / (2 * eps);
    const double err = std::abs(fd - analytic[i]);
    if (err >= worst) {
      worst = err;
      r.worst = i;
      r.worst_fd = fd;
      r.worst_an = analytic[i];
    }
  }
  r.rel_err = r.max_analytic > 0 ? worst / r.max_analytic : worst;
  return r;
}

// Seeded values uniform in [-scale, scale), never exactly zero in practice.
inline std::vector<double> random_vec(int64_t n, uint64_t seed, double scale = 1.0) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = scale * (2 * hash_uniform(seed, i) - 1);
  return v;
}

inline double dot(std::span<const double> a, std::span<const double> b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// max |got - ref| / max |ref| (attn/compare.h); a non-finite mismatch is infinitely far.
inline double rel_diff(const std::vector<double>& ref, const std::vector<double>& got) {
  const attn::Comparison c = attn::compare_to_ref<double>(ref, got, 0);
  return c.nonfinite_mismatches > 0 ? std::numeric_limits<double>::infinity() : c.rel_err;
}

// rel_diff within each parameter tensor, the largest over the tensors (model::tensor_rel_diff, the
// measure `dcpbench converge` bounds).
inline double tensor_rel_diff(const std::vector<double>& ref, const std::vector<double>& got,
                              const std::vector<ParamInfo>& tensors) {
  return model::tensor_rel_diff<double>(got, ref, tensors).rel;
}

}  // namespace dcp::model::testing
