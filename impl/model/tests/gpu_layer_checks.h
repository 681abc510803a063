// Checks shared by the tests of the model's GPU layer kernels on the host (test_gpu_layers.cpp,
// the emulated bodies) and on the device (cuda/tests/test_layer_cuda.cpp): the float64 CPU
// kernels on the same 16-bit inputs (seeded, non-zero), awkward sizes (rows not a multiple of the
// CTA's warps, widths not a multiple of 32, positions up to 8191).
// Acceptance, per output tensor: max |got - ref| <= one unit in the last place of the output
// type at max |ref| (the output's own rounding, plus the fp32 math moving a value across a
// rounding boundary) + 1e-5 max |ref| (fp32 arithmetic); fp32 outputs (rstd, dg) 1e-5 max |ref|.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <span>
#include <vector>

#include "attn/bf16_rule.h"
#include "attn/flash/flash_common.h"
#include "core/rng.h"
#include "model/kernels.h"

namespace dcp::model::testing {

using attn::Half;

// An implementation of the kernels with gpu_layers.h's signatures.
struct LayerImpl {
  std::function<void(Half, std::span<const uint16_t>, std::span<const uint16_t>, std::span<uint16_t>, std::span<float>,
                     int64_t, int, double)>
      rmsnorm_fwd;
  std::function<void(Half, std::span<const uint16_t>, std::span<const uint16_t>, std::span<const float>,
                     std::span<const uint16_t>, std::span<uint16_t>, std::span<float>, int64_t, int)>
      rmsnorm_bwd;
  std::function<void(Half, std::span<const uint16_t>, std::span<uint16_t>, int64_t, int)> swiglu_fwd;
  std::function<void(Half, std::span<const uint16_t>, std::span<const uint16_t>, std::span<uint16_t>, int64_t, int)>
      swiglu_bwd;
  std::function<void(Half, std::span<uint16_t>, std::span<const int32_t>, int64_t, int, int, double, bool)> rope;
  std::function<void(Half, std::span<const uint16_t>, std::span<const uint16_t>, std::span<uint16_t>)> add;
  std::function<double(Half, std::span<const uint16_t>, std::span<const int32_t>, std::span<const uint8_t>, double,
                       std::span<uint16_t>, int64_t, int)>
      cross_entropy;
};

struct Half16 {
  std::vector<double> v;    // the values (exact in the type)
  std::vector<uint16_t> b;  // their bits
};

inline Half16 random16(size_t n, uint64_t seed, Half h, double scale = 1.0) {
  Half16 r;
  for (size_t i = 0; i < n; ++i) {
    const double x = attn::round_half(scale * (2.0 * hash_uniform(seed, i) - 1.0), h);
    r.v.push_back(x);
    r.b.push_back(h == Half::bf16 ? attn::flash::Bf16::from_float(static_cast<float>(x))
                                  : attn::flash::Fp16::from_float(static_cast<float>(x)));
  }
  return r;
}

inline std::vector<double> decode(const std::vector<uint16_t>& b, Half h) {
  std::vector<double> d;
  for (uint16_t x : b) d.push_back(h == Half::bf16 ? attn::flash::Bf16::to_float(x) : attn::flash::Fp16::to_float(x));
  return d;
}

inline double max_abs(const std::vector<double>& x) {
  double m = 0;
  for (double v : x) m = std::max(m, std::fabs(v));
  return m;
}

// One unit in the last place of the type at magnitude m (bf16: 8 significant bits, fp16: 11).
inline double ulp16(double m, Half h) {
  if (m == 0) return 0;
  int e = 0;
  std::frexp(m, &e);
  return std::ldexp(1.0, e - (h == Half::bf16 ? 8 : 11));
}

// max |got - ref|, infinite when an output is not finite where the reference is (a NaN never
// hides in a max).
inline double max_err(const std::vector<double>& got, const std::vector<double>& ref) {
  double m = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) return std::isfinite(ref[i]) ? INFINITY : m;
    m = std::max(m, std::fabs(got[i] - ref[i]));
  }
  return m;
}

// Element by element: |got_i - ref_i| <= ulp(|ref_i|) (the output's own rounding, plus the fp32
// math moving a value across a rounding boundary) + 1e-5 max |ref| (fp32 arithmetic, incl. the
// cancellations of the backward formulas); every element finite where the reference is.
inline void expect16(const std::vector<uint16_t>& got, const std::vector<double>& ref, Half h, const char* what) {
  const std::vector<double> g = decode(got, h);
  const double m = max_abs(ref);
  for (size_t i = 0; i < ref.size(); ++i) {
    const double tol = ulp16(std::fabs(ref[i]), h) + 1e-5 * m;
    ASSERT_TRUE(std::isfinite(g[i]) && std::fabs(g[i] - ref[i]) <= tol)
        << what << (h == Half::bf16 ? " bf16" : " fp16") << "[" << i << "]: got " << g[i] << ", ref " << ref[i]
        << " (tolerance " << tol << ")";
  }
}

template <class T>
void expect32(const std::vector<T>& got, const std::vector<double>& ref, const char* what) {
  std::vector<double> g(got.begin(), got.end());
  const double m = max_abs(ref), err = max_err(g, ref);
  EXPECT_LE(err, 1e-5 * m) << what << ": max |got - ref| " << err;
}

// Outputs start as NaN (16-bit 0x7fff, float quiet NaN): an element a kernel skips fails.
inline std::vector<uint16_t> poisoned16(size_t n) { return std::vector<uint16_t>(n, 0x7fff); }

inline constexpr int64_t kRows = 37;  // not a multiple of the 4 warps of a CTA

inline void check_rmsnorm(const LayerImpl& k, Half h) {
  const auto ref = make_cpu_kernels<double>();
  for (const int d : {200, 64, 5}) {
    const Half16 x = random16(kRows * d, 1, h, 3.0), g = random16(d, 2, h), dy = random16(kRows * d, 3, h);
    std::vector<double> y(x.v.size()), rstd(kRows), dx(x.v.size()), dg(d, 0.0);
    ref->rmsnorm_fwd(x.v.data(), g.v.data(), y.data(), rstd.data(), kRows, d, 1e-5);
    ref->rmsnorm_bwd(x.v.data(), g.v.data(), rstd.data(), dy.v.data(), dx.data(), dg.data(), kRows, d);
    std::vector<uint16_t> yg = poisoned16(x.b.size()), dxg = poisoned16(x.b.size());
    std::vector<float> rg(kRows, NAN), dgg(d, 0.f);  // dg accumulates from 0
    k.rmsnorm_fwd(h, x.b, g.b, yg, rg, kRows, d, 1e-5);
    k.rmsnorm_bwd(h, x.b, g.b, rg, dy.b, dxg, dgg, kRows, d);
    expect16(yg, y, h, "rmsnorm y");
    expect32(rg, rstd, "rmsnorm rstd");
    expect16(dxg, dx, h, "rmsnorm dx");
    expect32(dgg, dg, "rmsnorm dg");
  }
}

inline void check_swiglu(const LayerImpl& k, Half h) {
  const auto ref = make_cpu_kernels<double>();
  const int f = 45;
  const Half16 gu = random16(kRows * 2 * f, 4, h, 4.0), dout = random16(kRows * f, 5, h);
  std::vector<double> out(kRows * f), dgu(gu.v.size());
  ref->swiglu_fwd(gu.v.data(), out.data(), kRows, f);
  ref->swiglu_bwd(gu.v.data(), dout.v.data(), dgu.data(), kRows, f);
  std::vector<uint16_t> og = poisoned16(out.size()), dg = poisoned16(gu.b.size());
  k.swiglu_fwd(h, gu.b, og, kRows, f);
  k.swiglu_bwd(h, gu.b, dout.b, dg, kRows, f);
  expect16(og, out, h, "swiglu out");
  expect16(dg, dgu, h, "swiglu dgate_up");
}

inline void check_rope(const LayerImpl& k, Half h) {
  const auto ref = make_cpu_kernels<double>();
  for (const int hd : {64, 8}) {
    const int heads = 3;
    const Half16 x = random16(kRows * heads * hd, 6, h);
    std::vector<int32_t> pos(kRows);
    for (int64_t t = 0; t < kRows; ++t) pos[t] = static_cast<int32_t>(t == 0 ? 0 : (t * 997) % 8192);
    for (const bool inverse : {false, true}) {
      std::vector<double> r = x.v;
      ref->rope(r.data(), pos.data(), kRows, heads, hd, 10000.0, inverse);
      std::vector<uint16_t> g = x.b;
      k.rope(h, g, pos, kRows, heads, hd, 10000.0, inverse);
      expect16(g, r, h, inverse ? "rope inverse" : "rope");
    }
  }
}

inline void check_add(const LayerImpl& k, Half h) {
  const Half16 a = random16(kRows * 77, 7, h, 2.0), b = random16(kRows * 77, 8, h, 2.0);
  std::vector<double> r(a.v.size());
  make_cpu_kernels<double>()->add(a.v.data(), b.v.data(), r.data(), static_cast<int64_t>(r.size()));
  std::vector<uint16_t> g = poisoned16(a.b.size());
  k.add(h, a.b, b.b, g);
  expect16(g, r, h, "add");
}

// Logits up to +-8 over a vocabulary not a multiple of 32, some rows masked; the loss (a sum of
// fp32 row losses) within 1e-5 relative, dlogits by the 16-bit rule.
inline void check_cross_entropy(const LayerImpl& k, Half h) {
  const int vocab = 1000;
  const Half16 logits = random16(kRows * vocab, 9, h, 8.0);
  std::vector<int32_t> labels(kRows);
  std::vector<uint8_t> mask(kRows);
  for (int64_t i = 0; i < kRows; ++i) {
    labels[i] = static_cast<int32_t>((i * 379) % vocab);
    mask[i] = i % 5 != 3;
  }
  std::vector<double> dref(logits.v.size());
  const double lref = make_cpu_kernels<double>()->cross_entropy(logits.v.data(), labels.data(), mask.data(), 0.25,
                                                                dref.data(), kRows, vocab);
  std::vector<uint16_t> dg = poisoned16(logits.b.size());
  const double lg = k.cross_entropy(h, logits.b, labels, mask, 0.25, dg, kRows, vocab);
  EXPECT_NEAR(lg, lref, 1e-5 * std::fabs(lref)) << "cross_entropy loss";
  expect16(dg, dref, h, "cross_entropy dlogits");
}

}  // namespace dcp::model::testing
