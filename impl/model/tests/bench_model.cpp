// Forward + backward of one micro-batch of the convergence model (scenarios/converge-moby.json's
// sizes: hidden 32, attention + Mamba + attention blocks, MTP, vocab 256) on one rank (CP 1), in
// float64 and float32: tokens per second of the CPU kernels, the number that sets how long a
// `dcpbench converge` run takes. Lengths: a packed micro-batch like the scenario's (one 512-token
// document and shorter ones).
#include <benchmark/benchmark.h>

#include "comm/thread_comm.h"
#include "core/rng.h"
#include "model/batch.h"
#include "model/model.h"

namespace dcp::model {
namespace {

ModelConfig converge_config() {
  ModelConfig c;
  c.mixers = {MixerKind::attention, MixerKind::mamba, MixerKind::attention};
  return c;  // every other size: config.h defaults = the scenario's
}

template <typename T>
void BM_ModelForwardBackward(benchmark::State& state) {
  const std::vector<int> lengths{512, 300, 120, 64, 30};
  Rng rng(1);
  std::vector<std::vector<int32_t>> seqs;
  int64_t tokens = 0;
  for (int l : lengths) {
    std::vector<int32_t> s(l);
    for (auto& t : s) t = static_cast<int32_t>(rng.uniform_int(0, 255));
    seqs.push_back(std::move(s));
    tokens += l;
  }
  comm::run_threads(1, [&](comm::Communicator& g) {
    auto k = make_cpu_kernels<T>();
    Model<T> m(converge_config(), *k);
    const std::vector<std::span<const int32_t>> spans(seqs.begin(), seqs.end());
    const MicroBatchInput in = make_microbatch_input(spans, g);
    for (auto _ : state) {
      const LossSums s = m.forward_backward(in, {1.0 / static_cast<double>(tokens), 0.1 / static_cast<double>(tokens)});
      benchmark::DoNotOptimize(s.main);
    }
  });
  state.counters["tokens_per_s"] =
      benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_ModelForwardBackward<double>)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ModelForwardBackward<float>)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace dcp::model

BENCHMARK_MAIN();
