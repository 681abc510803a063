// NumPy's legacy random stream and Megatron's mock lengths (algorithm and sources in numpy_legacy.h).
#include "data/numpy_legacy.h"

#include "core/error.h"

#include <algorithm>
#include <cmath>

namespace dcp::data {

double NumpyLegacyRandom::random() {
  const uint32_t a = static_cast<uint32_t>(mt_()) >> 5;
  const uint32_t b = static_cast<uint32_t>(mt_()) >> 6;
  return (a * 67108864.0 + b) / 9007199254740992.0;
}

double NumpyLegacyRandom::gauss() {
  if (has_gauss_) {
    has_gauss_ = false;
    return gauss_;
  }
  double x1, x2, r2;
  do {
    x1 = 2.0 * random() - 1.0;
    x2 = 2.0 * random() - 1.0;
    r2 = x1 * x1 + x2 * x2;
  } while (r2 >= 1.0 || r2 == 0.0);
  const double f = std::sqrt(-2.0 * std::log(r2) / r2);
  gauss_ = f * x1;
  has_gauss_ = true;
  return f * x2;
}

double NumpyLegacyRandom::lognormal(double mu, double sigma) { return std::exp(mu + sigma * gauss()); }

std::vector<int64_t> megatron_mock_lognormal_lengths(uint32_t seed, int64_t count, double mean, double sigma,
                                                     int64_t min_tokens, int64_t max_tokens) {
  DCP_REQUIRE(count >= 0, "megatron-mock: count ", count, " must be >= 0");
  DCP_REQUIRE(mean > 0 && sigma > 0, "megatron-mock: mean ", mean, " and sigma ", sigma, " must be > 0");
  DCP_REQUIRE(min_tokens >= 1 && max_tokens >= min_tokens, "megatron-mock: bounds [", min_tokens, ", ",
              max_tokens, "] must satisfy 1 <= min <= max");
  NumpyLegacyRandom rng(seed);
  const double mu = std::log(mean) - sigma * sigma / 2;
  const double lo = static_cast<double>(min_tokens), hi = static_cast<double>(max_tokens);
  std::vector<int64_t> out(static_cast<size_t>(count));
  // np.clip then astype(int): truncation toward zero of a value already in [min, max].
  for (auto& l : out) l = static_cast<int64_t>(std::clamp(rng.lognormal(mu, sigma), lo, hi));
  return out;
}

}  // namespace dcp::data
