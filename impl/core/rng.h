// Deterministic, platform-independent random numbers (std:: distributions differ between
// standard libraries, so they are not used for anything that must repeat bit-for-bit).
//
//   Rng: splitmix64-seeded xoshiro256** stream (Blackman & Vigna, https://prng.di.unimi.it/).
//   hash_u64(seed, index): stateless counter-based value, so every CP rank can regenerate the
//   element of a global token index without gathering (nccl-tests' "verifiable" idea).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

// The counter hash below is also device code (the CUDA fill kernels draw the same values as the
// host: attn/flash/thd_elems.h).
#if defined(__CUDACC__)
#define DCP_RNG_HD __host__ __device__
#else
#define DCP_RNG_HD
#endif

namespace dcp {

constexpr DCP_RNG_HD uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// FNV-1a over bytes (Fowler/Noll/Vo): a stable 64-bit fingerprint (parameter-name streams,
// bitwise-equality checks of whole tensors and of the ranks' parameters). Not for adversarial
// inputs. The default seed is FNV's 64-bit offset basis without its last digit (that basis is
// 14695981039346656037): any seed gives a stable fingerprint, and this one is kept so that the
// hashes already written into converge reports stay comparable.
inline uint64_t fnv1a(const void* data, size_t n, uint64_t h = 1469598103934665603ull) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

constexpr DCP_RNG_HD uint64_t hash_u64(uint64_t seed, uint64_t index) {
  return splitmix64(splitmix64(seed) ^ (index * 0xD1B54A32D192ED03ull));
}

// Uniform in [0, 1) with 53 random bits.
constexpr DCP_RNG_HD double to_unit(uint64_t x) { return static_cast<double>(x >> 11) * 0x1.0p-53; }

inline double hash_uniform(uint64_t seed, uint64_t index) { return to_unit(hash_u64(seed, index)); }

class Rng {
 public:
  explicit Rng(uint64_t seed) {
    uint64_t x = seed;
    for (auto& w : s_) {
      x = splitmix64(x);
      w = x;
    }
  }
  uint64_t next_u64() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  double uniform() { return to_unit(next_u64()); }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Uniform integer in [lo, hi] (inclusive); the tiny modulo bias is irrelevant for test data.
  int64_t uniform_int(int64_t lo, int64_t hi) {
    const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
    return lo + static_cast<int64_t>(span == 0 ? next_u64() : next_u64() % span);
  }
  // Standard normal by Box-Muller (one value per call; simple and reproducible).
  double normal() {
    double u1 = uniform();
    while (u1 <= 0.0) u1 = uniform();
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  double lognormal(double mu, double sigma) { return std::exp(mu + sigma * normal()); }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace dcp
