// CUDA attention throughput (issue 9): our tensor-core varlen forward and backward
// (cuda/flash_{fwd,bwd}.cu) in bf16 on the FlashAttention-3 paper's shapes and on packs of the
// scenarios' real length files (bench_shapes.h), each next to a cuBLAS bf16 GEMM of the same FLOP
// count timed in the same run (the ceiling). Manual time from CUDA events around one launch
// (the backward: its three passes), after 3 warm-up launches, with the L2 cache flushed (a
// cudaMemset over twice its size) before every timed launch. Counters: TFLOPS from the median
// launch time (TFLOPS_mean from the mean; FlashAttention's FLOP count: bench_shapes.h), tokens. Context: git sha, GPU, CUDA runtime, L2 size.
// harness/python/bench/attn_peers.py reads this benchmark's JSON (--benchmark_out), times
// PyTorch's FlashAttention-2 and cuDNN backends on the same shapes and writes
// results/bench/attn_h100.json (ci/gpu.sh runs both). tiles1_fwd/<case> times the forward with
// one m16 tile per warp beside the kernel's two (flash_common.h, kFwdTilesM).
// --dump-cases=FILE writes the cases (name, lengths, heads, head_dim, causal) as JSON and exits,
// without a device: the peers script times exactly these problems.
// Without a CUDA device (and no --dump-cases): exits 2 with a message (nothing to measure).
#include <benchmark/benchmark.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "attn/bench_shapes.h"
#include "attn/cuda/device_array.h"
#include "attn/cuda/event_timer.h"
#include "attn/cuda/flash_launch.h"
#include "attn/cuda/flash_ring_cuda.h"
#include "attn/cuda/thd_kernels.h"
#include "attn/flash/flash_common.h"
#include "attn/flash_emu.h"
#include "attn/thd.h"
#include "core/cuda_check.h"
#include "core/provenance.h"
#include "data/lengths_file.h"

#ifndef DCP_DATA_DIR
#define DCP_DATA_DIR "scenarios/data"
#endif

namespace dcp::attn {
namespace {

using cuda::DeviceArray;

#define DCP_CUBLAS_CHECK(x)                                                               \
  do {                                                                                    \
    const cublasStatus_t st_ = (x);                                                       \
    DCP_CHECK(st_ == CUBLAS_STATUS_SUCCESS, #x " failed: cuBLAS status ", static_cast<int>(st_)); \
  } while (0)

// Uniform in [-1, 1), never zero (a.s.), drawn on the device (cuda/thd_kernels.h fill_uniform): the
// host loop it replaces took ~0.26 s per 33.5M-element tensor and ran again at every call Google
// Benchmark makes of a benchmark (3 or more while it sizes the iterations): ~290 s for the 120
// benchmarks, past the device run's 150 s limit (helper-28). The same values as that loop.
DeviceArray<uint16_t> random_bf16(size_t n, uint64_t seed) {
  DeviceArray<uint16_t> d(n);
  DCP_CUDA_CHECK(cuda::fill_uniform(d.get(), static_cast<int64_t>(n), seed, 1.0f, true, nullptr));
  return d;
}

// Flushes L2 by writing a buffer of twice its size.
class L2Flush {
 public:
  L2Flush() {
    int dev = 0, l2 = 0;
    DCP_CUDA_CHECK(cudaGetDevice(&dev));
    DCP_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
    buf_ = DeviceArray<uint8_t>(static_cast<size_t>(2 * std::max(l2, 1 << 20)));
  }
  void operator()() { DCP_CUDA_CHECK(cudaMemsetAsync(buf_.get(), 0, buf_.size(), nullptr)); }

 private:
  DeviceArray<uint8_t> buf_;
};

// Times `launch` with CUDA events after warm-up and an L2 flush per repetition.
template <class F>
void run_timed(benchmark::State& state, double flops, F&& launch) {
  L2Flush flush;
  for (int i = 0; i < 3; ++i) launch();
  DCP_CUDA_CHECK(cudaDeviceSynchronize());
  cuda::EventTimer timer;
  std::vector<double> times;
  for (auto _ : state) {
    flush();
    timer.start();
    launch();
    const double s = timer.stop_s();
    state.SetIterationTime(s);
    times.push_back(s);
  }
  // The median over the repetitions (the peers script reports its peers' medians too), and the mean.
  std::sort(times.begin(), times.end());
  double sum = 0;
  for (double t : times) sum += t;
  const double median = times.empty() ? 0.0 : times[times.size() / 2];
  state.counters["TFLOPS"] = median > 0 ? flops / median / 1e12 : 0.0;
  state.counters["TFLOPS_mean"] = sum > 0 ? flops * static_cast<double>(times.size()) / sum / 1e12 : 0.0;
  state.counters["GFLOP"] = flops / 1e9;
}

// Our kernels on one case; `backward` times the backward's three passes. tiles_m: the forward's
// m16 tiles per warp (flash_common.h kFwdTilesM; 1 = the variant timed beside it).
void bm_attn(benchmark::State& state, const AttnBenchCase& c, bool backward, int tiles_m) {
  std::vector<int32_t> lengths(c.lengths);
  const ThdBatch b = make_thd_batch(lengths, 1);
  AttnShape s;
  s.heads = c.heads;
  s.kv_heads = c.heads;
  s.head_dim = c.head_dim;
  s.causal = c.causal;
  const int64_t t = b.total_tokens();
  const size_t nq = static_cast<size_t>(t * s.q_row()), nl = static_cast<size_t>(t * s.heads);
  DeviceArray<uint16_t> q = random_bf16(nq, 1), k = random_bf16(nq, 2), v = random_bf16(nq, 3), out(nq);
  DeviceArray<float> lse(nl);
  const DeviceBatchPair arrays(b, b);
  flash::FwdParams f = flash_fwd_params(b, b, s, nq, nq, nq, nq, nl);
  bind_fwd(f, arrays.arrays(), q.get(), k.get(), v.get(), out.get(), lse.get());
  const flash::FwdGrid grid = flash_fwd_grid(b, tiles_m);
  DCP_CUDA_CHECK(flash::flash_fwd(f, true, grid, nullptr));  // out and lse for the backward
  DCP_CUDA_CHECK(cudaDeviceSynchronize());
  if (!backward) {
    run_timed(state, attn_flops(c, false),
              [&] { DCP_CUDA_CHECK(flash::flash_fwd(f, true, grid, nullptr)); });
  } else {
    DeviceArray<uint16_t> dout = random_bf16(nq, 4), dq(nq), dk(nq), dv(nq);
    DeviceArray<float> delta(nl), acc(nq);
    flash::BwdParams p = flash_bwd_params(b, b, s, nq, nq, nq, nq, nl, nq, nq, nq, nq);
    bind_bwd(p, arrays.arrays(), q.get(), k.get(), v.get(), out.get(), lse.get(), dout.get(), delta.get(), acc.get(),
             dq.get(), dk.get(), dv.get());
    const int n_blocks = flash_bwd_n_blocks(b);
    run_timed(state, attn_flops(c, true), [&] { DCP_CUDA_CHECK(flash::flash_bwd(p, true, n_blocks, nullptr)); });
  }
  state.counters["tokens"] = static_cast<double>(t);
  state.SetLabel(c.name);
}

// A bf16 GEMM (fp32 accumulation) of about `flops`: M = the case's tokens, N = K chosen so that
// 2 M N K matches, rounded to multiples of 128.
void bm_cublas(benchmark::State& state, const AttnBenchCase& c, bool backward) {
  const double flops_case = attn_flops(c, backward);
  const int64_t m = kBenchTokens;
  const auto nk = std::max<int64_t>(128, static_cast<int64_t>(std::lround(std::sqrt(flops_case / (2.0 * m)) / 128.0)) * 128);
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(nk) * static_cast<double>(nk);
  DeviceArray<uint16_t> a = random_bf16(static_cast<size_t>(m * nk), 5), bm = random_bf16(static_cast<size_t>(nk * nk), 6),
                        cm(static_cast<size_t>(m * nk));
  cublasHandle_t h;
  DCP_CUBLAS_CHECK(cublasCreate(&h));
  const float alpha = 1.f, beta = 0.f;
  run_timed(state, flops, [&] {
    DCP_CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(nk), static_cast<int>(m),
                                  static_cast<int>(nk), &alpha, bm.get(), CUDA_R_16BF, static_cast<int>(nk), a.get(),
                                  CUDA_R_16BF, static_cast<int>(nk), &beta, cm.get(), CUDA_R_16BF, static_cast<int>(nk),
                                  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  });
  DCP_CUBLAS_CHECK(cublasDestroy(h));
  state.SetLabel(c.name + " | gemm " + std::to_string(m) + "x" + std::to_string(nk) + "x" + std::to_string(nk));
}

// The real length files: the tree this binary was configured from, else ./scenarios/data (a binary
// built elsewhere and run from another checkout's root: ci/device-bundle.sh, ci/device-run.sh).
std::string data_dir() {
  if (std::filesystem::is_directory(DCP_DATA_DIR)) return DCP_DATA_DIR;
  return "scenarios/data";
}

std::vector<AttnBenchCase> all_cases() {
  std::vector<AttnBenchCase> cases = fa3_paper_cases();
  for (const char* file : {"go.txt", "spamassassin_emails.txt", "pydoc_rst.txt", "sotu.txt"}) {
    AttnBenchCase c;
    c.name = std::string("varlen ") + file + " d=128 causal";
    c.lengths = pack_lengths(data::read_lengths_file(data_dir() + "/" + file), kBenchTokens, 17);
    c.heads = kBenchHidden / 128;
    c.head_dim = 128;
    c.causal = true;
    cases.push_back(std::move(c));
  }
  return cases;
}

int dump_cases(const std::string& path) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& c : all_cases())
    j.push_back({{"name", c.name}, {"lengths", c.lengths}, {"heads", c.heads}, {"head_dim", c.head_dim},
                 {"causal", c.causal}, {"flops_fwd", attn_flops(c, false)}, {"flops_bwd", attn_flops(c, true)}});
  std::ofstream f(path);
  f << j.dump(1) << "\n";
  if (!f) {
    std::fprintf(stderr, "bench_attn_cuda: cannot write %s\n", path.c_str());
    return 2;
  }
  return 0;
}

void register_all() {
  for (const auto& c : all_cases())
    for (const bool bwd : {false, true}) {
      const std::string dir = bwd ? "bwd" : "fwd";
      benchmark::RegisterBenchmark(("attn_" + dir + "/" + c.name).c_str(), bm_attn, c, bwd, flash::kFwdTilesM)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
      // The forward with one m16 tile per warp (64-row CTAs), on the 16k and varlen cases: the
      // measured check of flash_common.h's reason for two (shared-memory traffic per MMA).
      if (!bwd && (c.name.find("L=16384") != std::string::npos || c.name.rfind("varlen", 0) == 0))
        benchmark::RegisterBenchmark(("tiles1_fwd/" + c.name).c_str(), bm_attn, c, false, 1)
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark(("cublas_" + dir + "/" + c.name).c_str(), bm_cublas, c, bwd)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    }
}

}  // namespace
}  // namespace dcp::attn

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--dump-cases=", 13) == 0) return dcp::attn::dump_cases(argv[i] + 13);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "bench_attn_cuda: no CUDA device; run it on a GPU machine (ci/gpu.sh)\n");
    return 2;
  }
  cudaDeviceProp prop{};
  DCP_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  int runtime = 0;
  DCP_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  benchmark::AddCustomContext("gpu", prop.name);
  benchmark::AddCustomContext("cuda_runtime", std::to_string(runtime));
  benchmark::AddCustomContext("l2_bytes", std::to_string(prop.l2CacheSize));
  benchmark::AddCustomContext("timing", "CUDA events around one launch after 3 warm-ups, L2 flushed before each");
  benchmark::AddCustomContext("flops", "FlashAttention's count: fwd 4*heads*d*sum L^2 (/2 causal), bwd 2.5x fwd");
  benchmark::AddCustomContext("git_sha", dcp::source_git_sha());
  dcp::attn::register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
