// bench_sched: scheduler solve time (single-threaded) for every registered planner over
// G in {256, 2048, 16384} samples x pool N in {8, 64, 256, 1024} ranks, log-normal lengths
// (mean 2000 tokens, sigma 1.7; mu = ln(mean) - sigma^2/2), M = 8192 tokens per rank.
// The pool is dp x cp with static cp = 8 (dp = N/8), so the static baselines see the same batch:
// lengths are clamped to [1, cp*M] = [1, 65536], the largest a static CP-8 group can hold.
// Reference: Megatron's Python default_dynamic_cp (dev) takes ~660 ms (G=2048, N=64), ~3.6 s
// (G=2048, N=256) and ~33 s (G=16384, N=64); the goal is >= 100x less with identical plans.
// Run: build/harness/bench_sched --benchmark_out=results/bench/bench_sched.json --benchmark_out_format=json
#include "core/rng.h"
#include "harness/registry.h"
#include "plan/validate.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <string>

namespace {

dcp::plan::Batch lognormal_batch(int g, uint64_t seed) {
  const double sigma = 1.7, mean = 2000.0;
  const double mu = std::log(mean) - sigma * sigma / 2;
  dcp::Rng rng(seed);
  dcp::plan::Batch b;
  b.lengths.reserve(g);
  for (int i = 0; i < g; ++i) {
    const double x = rng.lognormal(mu, sigma);
    b.lengths.push_back(std::clamp<int64_t>(static_cast<int64_t>(std::llround(x)), 1, 8 * 8192));
  }
  return b;
}

void bm_plan(benchmark::State& state, const std::string& planner_name) {
  const int g = static_cast<int>(state.range(0));
  const int n = static_cast<int>(state.range(1));
  const auto batch = lognormal_batch(g, 1234 + g);
  dcp::plan::PlanConfig cfg;
  cfg.cp = 8;
  cfg.dp = n / 8;
  cfg.max_seqlen_per_rank = 8192;
  const auto planner = dcp::harness::builtin_planners().make(planner_name);
  size_t microbatches = 0;
  try {
    const auto check = planner->plan(batch, cfg);
    dcp::plan::validate(check, batch);
    microbatches = check.microbatches.size();
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  for (auto _ : state) {
    auto p = planner->plan(batch, cfg);
    benchmark::DoNotOptimize(p.microbatches.data());
  }
  state.counters["microbatches"] = static_cast<double>(microbatches);
  state.counters["samples_per_s"] = benchmark::Counter(static_cast<double>(g), benchmark::Counter::kIsIterationInvariantRate);
}

void register_all() {
  for (const auto& name : dcp::harness::builtin_planners().names()) {
    auto* b = benchmark::RegisterBenchmark(("plan/" + name).c_str(), bm_plan, name);
    b->Unit(benchmark::kMillisecond)->ArgNames({"G", "N"});
    for (int g : {256, 2048, 16384}) {
      for (int n : {8, 64, 256, 1024}) b->Args({g, n});
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::AddCustomContext("lengths", "lognormal mean 2000 sigma 1.7, clamp [1, 65536], M 8192, cp 8, dp N/8");
#ifdef DCP_GIT_SHA
  benchmark::AddCustomContext("git_sha", DCP_GIT_SHA);
#endif
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
