// CPU attention throughput for regression tracking (not a speed goal): the float64 reference
// and ring / all-gather CP over the thread backend, forward + backward, tokens_per_s counter.
// The CP numbers include starting the rank threads (run_threads) once per iteration.
#include <benchmark/benchmark.h>

#include "attn/attn_ref.h"
#include "attn/cp_attn.h"
#include "attn_test_util.h"
#include "comm/thread_comm.h"

namespace dcp::attn {
namespace {

using namespace dcp::attn::testing;

const std::vector<int32_t> kLengths = {384, 200, 96, 37, 13, 1};

AttnShape bench_shape() {
  AttnShape s;
  s.heads = 4;
  s.kv_heads = 2;
  s.head_dim = 64;
  return s;
}

int64_t real_tokens() {
  int64_t n = 0;
  for (int32_t l : kLengths) n += l;
  return n;
}

void BM_AttnRefFwdBwd(benchmark::State& state) {
  const ThdBatch b = make_thd_batch(kLengths, 1);
  const AttnShape s = bench_shape();
  for (auto _ : state) {
    auto r = reference<double>(b, s, 1);
    benchmark::DoNotOptimize(r.dq.data());
  }
  state.counters["tokens_per_s"] =
      benchmark::Counter(static_cast<double>(real_tokens()), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_AttnRefFwdBwd)->Unit(benchmark::kMillisecond);

template <typename T>
void BM_CpAttnFwdBwd(benchmark::State& state) {
  const auto algo = static_cast<CpAlgo>(state.range(0));
  const int cp = static_cast<int>(state.range(1));
  const ThdBatch b = make_thd_batch(kLengths, cp);
  const AttnShape s = bench_shape();
  std::vector<std::vector<T>> q(cp), k(cp), v(cp), dout(cp);
  for (int r = 0; r < cp; ++r) {
    q[r] = local_tensor<T>(1, kQ, b, cp, r, s.q_row());
    k[r] = local_tensor<T>(1, kK, b, cp, r, s.kv_row());
    v[r] = local_tensor<T>(1, kV, b, cp, r, s.kv_row());
    dout[r] = local_tensor<T>(1, kDout, b, cp, r, s.q_row());
  }
  for (auto _ : state) {
    comm::run_threads(cp, [&](comm::Communicator& g) {
      const int r = g.rank();
      std::vector<T> out(q[r].size()), lse(q[r].size() / s.head_dim), dq(q[r].size()),
          dk(k[r].size()), dv(v[r].size());
      cp_attn_fwd_fn<T>(algo)(g, b, s, q[r], k[r], v[r], out, lse);
      cp_attn_bwd_fn<T>(algo)(g, b, s, q[r], k[r], v[r], out, lse, dout[r], dq, dk, dv);
      benchmark::DoNotOptimize(dq.data());
    });
  }
  state.SetLabel(std::string(cp_algo_name(algo)) + " cp=" + std::to_string(cp));
  state.counters["tokens_per_s"] =
      benchmark::Counter(static_cast<double>(real_tokens()), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_CpAttnFwdBwd<double>)
    ->ArgsProduct({{static_cast<int>(CpAlgo::ring), static_cast<int>(CpAlgo::all_gather)},
                   {1, 2, 4}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_CpAttnFwdBwd<float>)
    ->ArgsProduct({{static_cast<int>(CpAlgo::ring), static_cast<int>(CpAlgo::all_gather)},
                   {1, 2, 4}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace dcp::attn

BENCHMARK_MAIN();
