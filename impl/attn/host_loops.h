// Loops shared by the host references (attn_ref.cpp in float64, the naive 16-bit algorithm in
// bf16_rule.cpp in fp32), arranged for speed without changing their arithmetic: each output
// element is one chain of multiply-adds in a fixed order (e ascending in a dot product, the
// caller's order in an axpy), as the textbook loops compute it: no reassociation, and no FMA (the
// build does not target it), so on finite inputs every result is the textbook loops' bit for bit
// (tests/test_host_loops.cpp; a NaN may come out with another sign or payload, which IEEE leaves
// open). Only independent chains run side by side, which the compiler vectorises at -O2. The
// stress cases' references (ci/device-run.sh's stress step) took 85-90 s of one core, timed on
// this project's VM, mostly in element-at-a-time loops: latency-bound dot products and axpys the
// compiler could not vectorise for fear of aliasing.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace dcp::attn::host {

// acc[e] += w * x[e] for e < n, eight elements at a time (packed by the compiler's straight-line
// vectoriser); x and acc must not overlap.
template <class T>
inline void axpy(T w, const T* __restrict x, T* __restrict acc, int64_t n) {
  int64_t e = 0;
  for (; e + 8 <= n; e += 8)
    for (int u = 0; u < 8; ++u) acc[e + u] += w * x[e + u];
  for (; e < n; ++e) acc[e] += w * x[e];
}

// Rows [start, start + len) of head `head` of x ([tokens, heads, d]) as a dense [len, d] block of
// T (static_cast per element, as the loops did at each use).
template <class T>
inline void head_rows(std::span<const double> x, int64_t start, int64_t len, int heads, int head, int d,
                      std::vector<T>& out) {
  out.resize(static_cast<size_t>(len) * d);
  for (int64_t r = 0; r < len; ++r)
    for (int e = 0; e < d; ++e)
      out[static_cast<size_t>(r) * d + e] = static_cast<T>(x[static_cast<size_t>(((start + r) * heads + head) * d + e)]);
}

// x [rows, d] (row-major) -> xt [d, rows].
template <class T>
inline void transpose(const T* x, int64_t rows, int d, std::vector<T>& xt) {
  xt.resize(static_cast<size_t>(rows) * d);
  for (int64_t r = 0; r < rows; ++r)
    for (int e = 0; e < d; ++e) xt[static_cast<size_t>(e) * rows + r] = x[static_cast<size_t>(r) * d + e];
}

// out[p] = sum over e ascending of a[e] * x[p][e] for p < n, given xt = x transposed with `ld`
// rows (n <= ld; ld = 0, an empty x, with n = 0): d axpys over p, each out[p] the same chain as
// a dot product of two rows.
template <class T>
inline void dots(const T* a, const T* xt, int64_t ld, int64_t n, int d, T* out) {
  std::fill(out, out + n, T(0));
  for (int e = 0; e < d; ++e) axpy(a[e], xt + static_cast<size_t>(e) * ld, out, n);
}

}  // namespace dcp::attn::host
