// Benchmark: simulating one step of the Llama-13B scenario (global batch 2048, 64 GPUs = PP8 x
// pool 8, up to 4096 GPUs = PP8 x pool 512) must take well under a second (issue 3 "Numbers to
// report"; issue 8: 2048 samples on 4096 GPUs under 1 s, with cost model v2's memory walk).
// mean_tokens 16384 gives ~70 micro-batches instead of ~8.
// The plans are built here by a simple least-loaded packer with static CP groups (this module may
// not depend on the planners); the lengths come from a seeded clamped log-normal (GitHub-like,
// mean 1500, sigma 1.7; shared/data/lengths/README.md).
#include "core/provenance.h"
#include "cost/time_model.h"
#include "core/rng.h"
#include "sim/simulator.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace {

using namespace dcp;

plan::Batch make_batch(int64_t g, int64_t max_len, uint64_t seed, double mean = 1500) {
  Rng rng(seed);
  plan::Batch b;
  const double sigma = 1.7, mu = std::log(mean) - sigma * sigma / 2;
  for (int64_t i = 0; i < g; ++i)
    b.lengths.push_back(std::clamp<int64_t>(std::llround(rng.lognormal(mu, sigma)), 256, max_len));
  return b;
}

// Static-CP packing: micro-batches of pool/cp groups, each sample (longest first) to the least
// loaded (micro-batch, group) slot whose token budget cp*M it fits.
plan::Plan make_plan(const plan::Batch& b, int pool, int cp, int64_t m_tokens) {
  plan::Plan p;
  p.planner = "bench-packing";
  p.config.dp = pool / cp;
  p.config.cp = cp;
  p.config.max_seqlen_per_rank = m_tokens;
  p.dynamic = false;
  const int groups = pool / cp;
  const double total = std::accumulate(b.lengths.begin(), b.lengths.end(), 0.0);
  int mbs = static_cast<int>(std::ceil(total / (0.85 * pool * m_tokens)));
  mbs = (mbs + 7) / 8 * 8;  // multiple of PP
  std::vector<int> order(b.lengths.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int x, int y) { return b.lengths[x] > b.lengths[y]; });
  std::vector<int64_t> load(static_cast<size_t>(mbs) * groups, 0);
  p.microbatches.resize(mbs);
  for (auto& mb : p.microbatches)
    for (int g = 0; g < groups; ++g) mb.groups.push_back({g * cp, cp, {}});
  for (int id : order) {
    size_t best = 0;
    for (size_t s = 1; s < load.size(); ++s)
      if (load[s] < load[best]) best = s;
    load[best] += b.lengths[id];
    p.microbatches[best / groups].groups[best % groups].samples.push_back(id);
  }
  return p;
}

cost::CostModel llama13b(int gpus) {
  cost::ClusterConfig c;
  c.gpus = gpus;
  c.pp = 8;
  c.cp = 8;
  cost::CostModel cm{cost::model_preset("llama-13b"), cost::hardware_preset("h100-sxm"), c, {}};
  cm.training.recompute_full = true;
  return cm;
}

void BM_SimulateStepLlama13b(benchmark::State& state) {
  const int gpus = static_cast<int>(state.range(0));
  const int cp = static_cast<int>(state.range(1));
  const auto cm = llama13b(gpus);
  const auto batch = make_batch(2048, 131072, 42, static_cast<double>(state.range(2)));
  const auto plan = make_plan(batch, cm.cluster.pool(), cp, 65536);
  double step_s = 0;
  int64_t events = 0;
  double tflops = 0;
  for (auto _ : state) {
    const auto r = sim::simulate_step(plan, batch, cm);
    // DoNotOptimize on a const value: the non-const overload of benchmark 1.7 ("+m,r") corrupts
    // doubles under GCC.
    benchmark::DoNotOptimize(r.step_s);
    step_s = r.step_s;
    events = r.schedule.events;
    tflops = r.tflops_per_gpu;
  }
  state.counters["simulated_step_s"] = step_s;
  state.counters["events"] = static_cast<double>(events);
  state.counters["microbatches"] = static_cast<double>(plan.microbatches.size());
  state.counters["tflops_per_gpu"] = tflops;
  state.SetLabel(cost::source_label(cm));
}
BENCHMARK(BM_SimulateStepLlama13b)
    ->ArgNames({"gpus", "cp", "mean_tokens"})
    ->Args({64, 8, 1500})
    ->Args({64, 1, 1500})
    ->Args({64, 8, 16384})
    ->Args({256, 8, 1500})
    ->Args({256, 1, 16384})
    ->Args({1024, 8, 16384})
    ->Args({4096, 8, 1500})
    ->Args({4096, 1, 16384})
    ->Unit(benchmark::kMillisecond);

void BM_SimulateScheduleOnly(benchmark::State& state) {
  const auto cm = llama13b(64);
  const auto batch = make_batch(2048, 131072, 42);
  const auto in = sim::build_schedule_input(make_plan(batch, 8, 1, 65536), batch, cm);
  for (auto _ : state) {
    const auto r = sim::simulate_schedule(in);
    benchmark::DoNotOptimize(r.step_s);
  }
}
BENCHMARK(BM_SimulateScheduleOnly)->Unit(benchmark::kMicrosecond);

// The same schedule with transfers that do not block (the model before 2026-12-06): what walking
// Megatron's blocking calls costs.
void BM_SimulateScheduleOnlyNonBlocking(benchmark::State& state) {
  const auto cm = llama13b(64);
  const auto batch = make_batch(2048, 131072, 42);
  auto in = sim::build_schedule_input(make_plan(batch, 8, 1, 65536), batch, cm);
  in.blocking_p2p = false;
  for (auto _ : state) {
    const auto r = sim::simulate_schedule(in);
    benchmark::DoNotOptimize(r.step_s);
  }
}
BENCHMARK(BM_SimulateScheduleOnlyNonBlocking)->Unit(benchmark::kMicrosecond);

// Interleaved 1F1B (VPP 5, the Llama-13B scenarios' tuned setting): walking Megatron's
// interleaved calls (the default) against transfers that do not block (training.interleaved_p2p_calls false).
void BM_SimulateScheduleOnlyInterleaved(benchmark::State& state) {
  auto cm = llama13b(64);
  cm.cluster.vpp = 5;
  const auto batch = make_batch(2048, 131072, 42);
  auto in = sim::build_schedule_input(make_plan(batch, 8, 1, 16384), batch, cm);
  in.interleaved_calls = state.range(0) != 0;
  for (auto _ : state) {
    const auto r = sim::simulate_schedule(in);
    benchmark::DoNotOptimize(r.step_s);
  }
  state.counters["microbatches"] = static_cast<double>(in.groups.size());
}
BENCHMARK(BM_SimulateScheduleOnlyInterleaved)->ArgName("calls")->Arg(1)->Arg(0)->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
  benchmark::AddCustomContext("model", "Llama-13B at PP8 (the harness's cost model, h100-sxm-public), log-normal lengths");
  benchmark::AddCustomContext("threads", "single-threaded (library_build_type is Google Benchmark's own build, not ours)");
  benchmark::AddCustomContext("git_sha", dcp::source_git_sha());
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
