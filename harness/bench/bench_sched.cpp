// bench_sched: scheduler solve time (single-threaded) of every registered planner.
//   plan/NAME/G/N: log-normal lengths (mean 2000 tokens, sigma 1.7; mu = ln(mean) - sigma^2/2),
//     M = 8192 tokens per rank, G in {256, 2048, 16384} x pool N in {8, 64, 256, 1024}, plus the
//     scale points (2048, 4096) and (262144, 64). The pool is dp x cp with static cp = 8 (dp =
//     N/8), so the static baselines see the same batch: lengths are clamped to [1, cp*M] =
//     [1, 65536], the largest a static CP-8 group can hold. No planner options: dcp uses its
//     built-in time model and 1F1B estimate.
//   file/NAME/F/N: the real length files of scenarios/data (F: 0 go, 1 pydoc_rst, 2 sotu,
//     3 spamassassin_emails; the whole file is the batch), M = 16384 (the scenarios' budget),
//     N in {8, 64, 512, 4096}, lengths clamped to [1, 8*M] (static cp = 8 again).
//   cost/NAME/S: the harness's cost model (planner options built as `dcpbench run` builds them:
//     runner.h planner_options_of, i.e. the marginal sample time and the discrete-event simulator
//     with the memory model) on step 0 of a Llama-13B scenario at its published setting (S: 0
//     llama13b-github, 1 llama13b-commoncrawl).
// Reference: Megatron's Python default_dynamic_cp (dev) takes ~660 ms (G=2048, N=64), ~3.6 s
// (G=2048, N=256) and ~33 s (G=16384, N=64); the goal is >= 100x less with identical plans.
// Run (from the source tree; the JSON keeps the context below):
//   build/harness/bench_sched --benchmark_out=results/bench/bench_sched.json --benchmark_out_format=json
#include "core/provenance.h"
#include "core/rng.h"
#include "data/dataset.h"
#include "data/lengths_file.h"
#include "harness/registry.h"
#include "harness/runner.h"
#include "harness/scenario.h"
#include "plan/validate.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>

#ifndef DCP_SOURCE_DIR
#define DCP_SOURCE_DIR "."
#endif

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

// `planner_of()` gives the planner of each plan: the same one for the plan/ and file/ rows, a new
// one per plan for cost/ (bm_cost).
using PlannerOf = std::function<std::shared_ptr<const dcp::plan::Planner>()>;

void time_plans(benchmark::State& state, const PlannerOf& planner_of, const dcp::plan::Batch& batch,
                const dcp::plan::PlanConfig& cfg) {
  size_t microbatches = 0;
  try {
    const auto check = planner_of()->plan(batch, cfg);
    dcp::plan::validate(check, batch);
    microbatches = check.microbatches.size();
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  for (auto _ : state) {
    auto p = planner_of()->plan(batch, cfg);
    benchmark::DoNotOptimize(p.microbatches.data());
  }
  state.counters["microbatches"] = static_cast<double>(microbatches);
  state.counters["samples_per_s"] = benchmark::Counter(static_cast<double>(batch.size()), benchmark::Counter::kIsIterationInvariantRate);
}

// The one planner of a plan/ or file/ row.
PlannerOf same_planner(const std::string& name) {
  std::shared_ptr<const dcp::plan::Planner> planner = dcp::harness::builtin_planners().make(name);
  return [planner] { return planner; };
}

dcp::plan::PlanConfig static8(int n, int64_t m) {
  dcp::plan::PlanConfig cfg;
  cfg.cp = 8;
  cfg.dp = n / 8;
  cfg.max_seqlen_per_rank = m;
  return cfg;
}

void bm_plan(benchmark::State& state, const std::string& planner_name) {
  const int g = static_cast<int>(state.range(0));
  const int n = static_cast<int>(state.range(1));
  const auto batch = lognormal_batch(g, 1234 + g);
  time_plans(state, same_planner(planner_name), batch, static8(n, 8192));
}

const char* const kFiles[] = {"go.txt", "pydoc_rst.txt", "sotu.txt", "spamassassin_emails.txt"};

void bm_file(benchmark::State& state, const std::string& planner_name) {
  const int n = static_cast<int>(state.range(1));
  const int64_t m = 16384;
  dcp::plan::Batch batch{dcp::data::read_lengths_file(std::string(DCP_SOURCE_DIR) + "/scenarios/data/" +
                                                      kFiles[state.range(0)])};
  for (auto& L : batch.lengths) L = std::clamp<int64_t>(L, 1, 8 * m);
  state.SetLabel(kFiles[state.range(0)]);
  time_plans(state, same_planner(planner_name), batch, static8(n, m));
}

const char* const kScenarios[] = {"llama13b-github.json", "llama13b-commoncrawl.json"};

void bm_cost(benchmark::State& state, const std::string& planner_name) {
  const auto scenario = dcp::harness::load_scenario(std::string(DCP_SOURCE_DIR) + "/scenarios/" + kScenarios[state.range(0)]);
  dcp::harness::RunOptions run;
  run.steps = 1;
  const auto& registry = dcp::harness::builtin_planners();
  const auto prepared = dcp::harness::prepare_scenario(scenario, run, registry);
  const auto cfg = dcp::harness::plan_config_of(scenario);
  const auto sb = dcp::data::sample_global_batch(prepared.source, prepared.sampler, 0);  // step 0, as `run` draws it
  state.SetLabel(kScenarios[state.range(0)]);
  // A planner (and its options) per plan, as `dcpbench run` makes one per step: the options'
  // simulator memoises the samples' attention times for the planner's lifetime
  // (cost::AttnTermsMemo), which a planner reused across iterations would carry over.
  time_plans(
      state,
      [&]() -> std::shared_ptr<const dcp::plan::Planner> {
        return registry.make(planner_name, dcp::harness::planner_options_of(prepared.cm, sb, cfg.max_seqlen_per_rank));
      },
      sb.batch, cfg);
}

void register_all() {
  for (const auto& name : dcp::harness::builtin_planners().names()) {
    auto* b = benchmark::RegisterBenchmark(("plan/" + name).c_str(), bm_plan, name);
    b->Unit(benchmark::kMillisecond)->ArgNames({"G", "N"});
    for (int g : {256, 2048, 16384}) {
      for (int n : {8, 64, 256, 1024}) b->Args({g, n});
    }
    b->Args({2048, 4096})->Args({262144, 64});
    auto* f = benchmark::RegisterBenchmark(("file/" + name).c_str(), bm_file, name);
    f->Unit(benchmark::kMillisecond)->ArgNames({"F", "N"});
    for (int file = 0; file < 4; ++file)
      for (int n : {8, 64, 512, 4096}) f->Args({file, n});
  }
  for (const std::string name : {"dcp", "nvidia-prototype", "megatron-dev", "packing"}) {
    auto* c = benchmark::RegisterBenchmark(("cost/" + name).c_str(), bm_cost, name);
    c->Unit(benchmark::kMillisecond)->ArgNames({"S"})->Arg(0)->Arg(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::AddCustomContext("lengths", "plan/: lognormal mean 2000 sigma 1.7, clamp [1, 65536], M 8192, cp 8, dp N/8; "
                                         "file/: scenarios/data files, clamp [1, 131072], M 16384, cp 8, dp N/8; "
                                         "cost/: step 0 of the scenario at its published setting, harness cost model");
  benchmark::AddCustomContext("machine", "the project's 2-core VM, single-threaded, RelWithDebInfo");
  benchmark::AddCustomContext("git_sha", dcp::source_git_sha());
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
