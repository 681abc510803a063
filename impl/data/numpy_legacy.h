// NumPy's legacy global random stream (np.random.seed(s) and then np.random.random / lognormal, the
// RandomState API), reproduced from its published algorithm, so that a scenario can replay the exact
// sequence lengths Megatron's mock datasets generate (MockSFTLowLevelDataset, `source: megatron-mock`
// in scenarios/SCHEMA.md). Our own C++ from the algorithm's description, not NumPy's code:
//   * seeding: an integer seed s is MT19937's init_genrand(s) (numpy/random/_mt19937.pyx,
//     _legacy_seeding -> mt19937_seed), which std::mt19937(s) implements to the bit (both follow
//     Matsumoto and Nishimura's reference generator);
//   * random(): a 53-bit double from two 32-bit outputs a, b: ((a >> 5) * 2^26 + (b >> 6)) / 2^53
//     (numpy/random/src/mt19937/mt19937.h, mt19937_next_double);
//   * gauss(): the polar Box-Muller method of legacy_gauss (numpy/random/src/legacy/
//     legacy-distributions.c): x1, x2 = 2 random() - 1 until 0 < r2 = x1^2 + x2^2 < 1,
//     f = sqrt(-2 ln(r2) / r2); returns f x2 and keeps f x1 for the next call;
//   * lognormal(mu, sigma) = exp(mu + sigma gauss()) (legacy_lognormal, legacy_normal).
// The known outputs of np.random.seed(0) hold in the tests (test_dataset.cpp): random() =
// 0.5488135039273248, and the first normals 1.764052345967664, 0.4001572083672233, ...
// exp, log and sqrt are the C library's, as NumPy's are: the same values on glibc x86-64; another
// libm may differ in the last bit, which moves a length only where exp lands within one ulp of an
// integer.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace dcp::data {

class NumpyLegacyRandom {
 public:
  explicit NumpyLegacyRandom(uint32_t seed) : mt_(seed) {}
  double random();
  double gauss();
  double lognormal(double mu, double sigma);

 private:
  std::mt19937 mt_;
  bool has_gauss_ = false;
  double gauss_ = 0;
};

// The first `count` lengths of Megatron's MockSFTLowLevelDataset in distribution mode, lognormal
// (192cbc3554 megatron/training/datasets/sft_dataset.py:242-281): np.random.seed(seed), then
// np.random.lognormal(ln(mean) - sigma^2/2, sigma, size), np.clip(., min, max), astype(int). The
// draws are sequential, so the first `count` do not depend on `size` (count <= size).
std::vector<int64_t> megatron_mock_lognormal_lengths(uint32_t seed, int64_t count, double mean, double sigma,
                                                     int64_t min_tokens, int64_t max_tokens);

}  // namespace dcp::data
