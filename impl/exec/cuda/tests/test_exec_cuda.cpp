// The GPU replay pieces (label gpu; skip without a device, fail under DCP_REQUIRE_GPU=1):
// cuBLASLt's row-major GEMM against float64 at awkward sizes, and a rank's micro-batch replayed
// and timed end to end (a tiny model: every op kind, ring steps with device copies).
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>
#include <utility>
#include <vector>

#include "attn/bf16_rule.h"
#include "attn/cuda/device_array.h"
#include "attn/flash/flash_common.h"
#include "core/rng.h"
#include "exec/cuda/gemm_lt.h"
#include "exec/cuda/stage_runner.h"
#include "gpu_test_util.h"

namespace dcp::exec {
namespace {

using attn::cuda::DeviceArray;

// cuBLASLt is loaded, not linked (gemm_lt.cpp): the library is found and has every entry point
// GemmLt calls. No device needed (runs in CI without one): a misspelt name or a soname the toolkit
// does not have fails here, not on the GPU machine.
TEST(GemmLtLoad, FindsTheLibraryAndEveryEntryPoint) {
  EXPECT_NO_THROW(load_cublaslt());
  EXPECT_NO_THROW(load_cublaslt());  // and again (the loaded entry points are kept)
}

// Every stored form (nn, nt, tn: exec/stage_ops.h GemmForm) with a 16-bit output, and the wgrad's
// tn with fp32 accumulation into a non-zero C, against float64 at awkward sizes.
TEST(GemmLtCuda, RowMajorProductMatchesFloat64) {
  DCP_SKIP_WITHOUT_GPU();
  GemmLt gemm;
  for (const auto& [m, n, k] : std::vector<std::tuple<int, int, int>>{{37, 45, 64}, {1, 8, 16}, {128, 256, 200}})
    for (const auto& [form, acc] : std::vector<std::pair<GemmForm, bool>>{
             {GemmForm::nn, false}, {GemmForm::nt, false}, {GemmForm::tn, false}, {GemmForm::tn, true}}) {
      // The logical A [m, k] and B [k, n], stored as the form says.
      std::vector<double> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n)), c0(static_cast<size_t>(m * n));
      std::vector<uint16_t> ab(a.size()), bb(b.size());
      for (int i = 0; i < m; ++i)
        for (int t = 0; t < k; ++t) {
          const double v = attn::round_bf16(2 * hash_uniform(1, static_cast<uint64_t>(i * k + t)) - 1);
          a[static_cast<size_t>(i * k + t)] = v;
          ab[static_cast<size_t>(form == GemmForm::tn ? t * m + i : i * k + t)] =
              attn::flash::Bf16::from_float(static_cast<float>(v));
        }
      for (int t = 0; t < k; ++t)
        for (int j = 0; j < n; ++j) {
          const double v = attn::round_bf16(2 * hash_uniform(2, static_cast<uint64_t>(t * n + j)) - 1);
          b[static_cast<size_t>(t * n + j)] = v;
          bb[static_cast<size_t>(form == GemmForm::nt ? j * k + t : t * n + j)] =
              attn::flash::Bf16::from_float(static_cast<float>(v));
        }
      for (size_t i = 0; i < c0.size(); ++i) c0[i] = static_cast<float>(2 * hash_uniform(3, i) - 1);
      DeviceArray<uint16_t> da{std::span<const uint16_t>(ab)}, db{std::span<const uint16_t>(bb)},
          dc(static_cast<size_t>(m * n));
      std::vector<float> c0f(c0.begin(), c0.end());
      DeviceArray<float> dcf{std::span<const float>(c0f)};
      dc.poison();
      gemm.run(true, form, m, n, k, da.get(), db.get(), acc ? static_cast<void*>(dcf.get()) : static_cast<void*>(dc.get()),
               acc, nullptr);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      std::vector<uint16_t> c(static_cast<size_t>(m * n));
      std::vector<float> cf(static_cast<size_t>(m * n));
      dc.to_host(c);
      dcf.to_host(cf);
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
          double ref = 0, mag = 0;
          for (int t = 0; t < k; ++t) {
            ref += a[static_cast<size_t>(i * k + t)] * b[static_cast<size_t>(t * n + j)];
            mag += std::fabs(a[static_cast<size_t>(i * k + t)] * b[static_cast<size_t>(t * n + j)]);
          }
          const size_t ij = static_cast<size_t>(i * n + j);
          if (acc) {  // fp32 out: C0 + AB within fp32 summation's bound, (k + 1) 2^-24 x 2 of the magnitudes
            ASSERT_LE(std::fabs(cf[ij] - (c0[ij] + ref)), std::ldexp(k + 1.0, -23) * (mag + std::fabs(c0[ij])))
                << m << "x" << n << "x" << k << " tn+acc";
          } else {  // bf16 output rounding (half an ulp at |ref|, 2^-9 relative) + fp32 accumulation
            const double got = attn::flash::Bf16::to_float(c[ij]);
            ASSERT_LE(std::fabs(got - ref), std::ldexp(std::fabs(ref), -8) + 1e-6 * mag)
                << m << "x" << n << "x" << k << " form " << static_cast<int>(form);
          }
        }
    }
}

TEST(StageRunnerCuda, ReplaysAndTimesAMicrobatch) {
  DCP_SKIP_WITHOUT_GPU();
  cost::ModelConfig model = cost::model_preset("tiny");  // with head_dim 64 (the kernels' 64 / 128)
  model.hidden = 256;
  model.ffn = 512;
  model.head_dim = 64;
  StageRunner runner(model, attn::Half::bf16);
  for (const int k : {1, 4}) {
    const StageWork w = stage_ops(model, {300, 65, 1}, k, k - 1, 2, true, true);
    const MeasuredMicrobatch t = runner.measure(w, 3);
    EXPECT_GT(t.fwd_s, 0) << k;
    EXPECT_GT(t.bwd_s, t.fwd_s) << k;  // recompute + backward
    EXPECT_LT(t.fwd_s + t.bwd_s, 1.0) << k;
    if (k == 1) EXPECT_EQ(t.copy_fwd_s + t.copy_bwd_s, 0.0);
    else EXPECT_GT(t.copy_fwd_s, 0) << k;
  }
}

}  // namespace
}  // namespace dcp::exec
