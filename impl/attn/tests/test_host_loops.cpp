// The host references' loops (attn/host_loops.h) and the fp32 rounding of the naive algorithm
// (round_half on a float) give, bit for bit, what the textbook element-at-a-time loops and the
// float64 rounding give: the references' speed-ups must not move a single result. Seeded random
// values over many exponents, lengths around the eight-wide blocks (tails included), and the
// rounding's edge cases (ties, subnormals, the largest bf16, overflow, inf, NaN).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "attn/bf16_rule.h"
#include "attn/host_loops.h"

namespace dcp::attn {
namespace {

template <class T>
std::vector<T> random_values(size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> mant(-1.0, 1.0);
  std::uniform_int_distribution<int> expo(-12, 12);
  std::vector<T> x(n);
  for (auto& v : x) v = static_cast<T>(std::ldexp(mant(rng), expo(rng)));
  return x;
}

// Bitwise equality that also holds for NaN and tells -0 from +0.
template <class T>
bool same_bits(T a, T b) {
  if constexpr (sizeof(T) == 4) return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
  else return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b);
}

template <class T>
void check_loops(uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (int d : {1, 3, 7, 8, 9, 24, 64, 127, 128}) {
    for (int64_t rows : {1, 5, 8, 17, 40}) {
      const auto x = random_values<T>(static_cast<size_t>(rows) * d, rng);
      const auto a = random_values<T>(static_cast<size_t>(d), rng);
      std::vector<T> xt;
      host::transpose(x.data(), rows, d, xt);
      for (int64_t r = 0; r < rows; ++r)
        for (int e = 0; e < d; ++e) ASSERT_TRUE(same_bits(xt[e * rows + r], x[r * d + e]));
      // dots over a prefix of the rows, as the causal rows use them.
      for (int64_t n : {rows, rows / 2}) {
        std::vector<T> got(static_cast<size_t>(n) + 1, T(-7));
        host::dots(a.data(), xt, rows, n, d, got.data());
        for (int64_t p = 0; p < n; ++p) {
          T want = 0;
          for (int e = 0; e < d; ++e) want += a[e] * x[p * d + e];
          ASSERT_TRUE(same_bits(got[p], want)) << "d " << d << " rows " << rows << " p " << p;
        }
        EXPECT_EQ(got[n], T(-7)) << "dots wrote past n";
      }
      // A chain of axpys in a fixed order: acc_e = ((0 + w0 x0e) + w1 x1e) + ...
      const auto w = random_values<T>(static_cast<size_t>(rows), rng);
      std::vector<T> acc(static_cast<size_t>(d) + 1, T(0)), want(static_cast<size_t>(d), T(0));
      acc[d] = T(-7);
      for (int64_t r = 0; r < rows; ++r) {
        host::axpy(w[r], &x[r * d], acc.data(), d);
        for (int e = 0; e < d; ++e) want[e] += w[r] * x[r * d + e];
      }
      for (int e = 0; e < d; ++e) ASSERT_TRUE(same_bits(acc[e], want[e])) << "d " << d << " e " << e;
      EXPECT_EQ(acc[d], T(-7)) << "axpy wrote past d";
    }
  }
}

TEST(HostLoops, FloatChainsAreTheTextbookLoopsBitForBit) { check_loops<float>(3); }
TEST(HostLoops, DoubleChainsAreTheTextbookLoopsBitForBit) { check_loops<double>(4); }

TEST(HostLoops, HeadRowsGathersOneHead) {
  const int heads = 3, d = 5;
  const int64_t tokens = 6;
  std::vector<double> x(static_cast<size_t>(tokens * heads * d));
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.1 * static_cast<double>(i) + 1.0 / 3.0;
  std::vector<float> rows;
  host::head_rows(x, 2, 3, heads, 1, d, rows);
  ASSERT_EQ(rows.size(), 15u);
  for (int r = 0; r < 3; ++r)
    for (int e = 0; e < d; ++e) EXPECT_EQ(rows[r * d + e], static_cast<float>(x[((2 + r) * heads + 1) * d + e]));
}

// round_half(float) against round_half(double) of the same value: every exponent, random
// significands, the bit patterns next to every rounding tie, and the special values.
TEST(HostLoops, FloatRoundingIsTheDoubleRoundingBitForBit) {
  std::mt19937_64 rng(5);
  std::vector<uint32_t> bits;
  for (uint32_t sign : {0u, 0x80000000u})
    for (uint32_t e = 0; e <= 0xffu; ++e) {
      const uint32_t base = sign | (e << 23);
      for (uint32_t m : {0u, 1u, 0x7fffu, 0x8000u, 0x8001u, 0x17fffu, 0x18000u, 0x18001u, 0x7f8000u, 0x7fffffu,
                         0x400000u, 0x3f8000u})
        bits.push_back(base | m);
      for (int i = 0; i < 64; ++i) bits.push_back(base | static_cast<uint32_t>(rng() & 0x7fffffu));
    }
  int checked = 0;
  for (Half h : {Half::bf16, Half::fp16})
    for (uint32_t b : bits) {
      const float x = std::bit_cast<float>(b);
      const float want = static_cast<float>(round_half(static_cast<double>(x), h));
      const float got = round_half(x, h);
      ASSERT_TRUE(same_bits(got, want) || (std::isnan(got) && std::isnan(want)))
          << std::hex << "bits 0x" << b << (h == Half::bf16 ? " bf16" : " fp16") << ": " << got << " vs " << want;
      ++checked;
    }
  EXPECT_EQ(checked, 2 * 2 * 256 * 76);
  // The largest finite bf16 stays; the next tie above it rounds to inf, as round_bf16 does.
  const float max_bf16 = std::bit_cast<float>(0x7f7f0000u);
  EXPECT_EQ(round_half(max_bf16, Half::bf16), max_bf16);
  EXPECT_EQ(round_half(std::bit_cast<float>(0x7f7f8000u), Half::bf16), std::numeric_limits<float>::infinity());
}

}  // namespace
}  // namespace dcp::attn
