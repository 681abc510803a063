// Seeded random scheduler inputs shared by the sched tests: pool N from 1 to max_n (powers of two
// and not), min_cp, VPP group, and lengths from 1 to N*M in log-normal, bimodal and tied shapes.
#pragma once

#include "core/rng.h"
#include "plan/cp_rule.h"
#include "plan/plan.h"

#include <algorithm>
#include <optional>
#include <sstream>
#include <string>

namespace dcp::sched::testing_inputs {

// A planning configuration of a dp x cp pool with M tokens per rank, min_cp and an optional VPP
// group (the hand-written cases of the sched tests).
inline plan::PlanConfig cfg(int dp, int cp, int64_t m, int min_cp = 1, std::optional<int> vpp = std::nullopt) {
  plan::PlanConfig c;
  c.dp = dp;
  c.cp = cp;
  c.max_seqlen_per_rank = m;
  c.min_cp = min_cp;
  c.vpp_group = vpp;
  return c;
}

struct Case {
  plan::Batch batch;
  plan::PlanConfig config;
};

inline std::string describe(const Case& c) {
  std::ostringstream os;
  os << "dp=" << c.config.dp << " cp=" << c.config.cp << " M=" << c.config.max_seqlen_per_rank
     << " min_cp=" << c.config.min_cp << " vpp=" << c.config.vpp_group.value_or(0) << " G=" << c.batch.size()
     << " lengths=[";
  for (size_t i = 0; i < c.batch.lengths.size() && i < 40; ++i) os << (i ? "," : "") << c.batch.lengths[i];
  if (c.batch.lengths.size() > 40) os << ",...";
  os << "]";
  return os.str();
}

inline Case random_case(uint64_t seed, int max_n, int max_g) {
  Rng rng(seed * 0x9E3779B97F4A7C15ull + 17);
  Case c;
  // Pool: half powers of two, half arbitrary (dp*cp with cp a power of two or not).
  int n = 1;
  if (rng.uniform() < 0.5) {
    const int max_log = static_cast<int>(std::log2(max_n));
    n = 1 << rng.uniform_int(0, max_log);
  } else {
    n = static_cast<int>(rng.uniform_int(1, max_n));
  }
  c.config.cp = 1;
  for (int d = 2; d <= 8; d *= 2)
    if (n % d == 0 && rng.uniform() < 0.5) c.config.cp = d;
  c.config.dp = n / c.config.cp;
  const int64_t ms[] = {1, 2, 3, 7, 64, 100, 1000, 4096, 8192};
  c.config.max_seqlen_per_rank = ms[rng.uniform_int(0, 8)];
  const int64_t m = c.config.max_seqlen_per_rank;
  c.config.min_cp = 1;
  if (rng.uniform() < 0.25) c.config.min_cp = static_cast<int>(plan::prev_pow2(rng.uniform_int(1, n)));
  const int vpps[] = {2, 4, 8};
  if (rng.uniform() < 0.3) c.config.vpp_group = vpps[rng.uniform_int(0, 2)];
  const int64_t max_len = static_cast<int64_t>(n) * m;
  const int64_t g = rng.uniform() < 0.05 ? rng.uniform_int(0, 3) : rng.uniform_int(1, max_g);
  const int shape = static_cast<int>(rng.uniform_int(0, 3));
  const double mu = std::log(std::max<double>(1.0, static_cast<double>(m) * rng.uniform(0.05, 2.0)));
  const int64_t tie_a = rng.uniform_int(1, max_len), tie_b = rng.uniform_int(1, max_len);
  for (int64_t i = 0; i < g; ++i) {
    double x = 1;
    switch (shape) {
      case 0: x = rng.lognormal(mu, 1.7); break;                                        // log-normal
      case 1: x = rng.uniform() < 0.8 ? rng.uniform(1, m) : rng.uniform(m, max_len); break;  // bimodal
      case 2: x = static_cast<double>(rng.uniform() < 0.5 ? tie_a : tie_b); break;     // ties
      default: x = static_cast<double>(rng.uniform_int(1, max_len)); break;            // uniform
    }
    c.batch.lengths.push_back(std::clamp<int64_t>(static_cast<int64_t>(x), 1, max_len));
  }
  return c;
}

}  // namespace dcp::sched::testing_inputs
