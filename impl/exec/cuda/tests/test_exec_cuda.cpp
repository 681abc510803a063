// The GPU replay pieces (label gpu; skip without a device, fail under DCP_REQUIRE_GPU=1):
// cuBLASLt's row-major GEMM against float64 at awkward sizes, and a rank's micro-batch replayed
// and timed end to end (a tiny model: every op kind, ring steps with device copies).
#include <gtest/gtest.h>

#include <cmath>
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

TEST(GemmLtCuda, RowMajorProductMatchesFloat64) {
  DCP_SKIP_WITHOUT_GPU();
  GemmLt gemm;
  for (const auto& [m, n, k] : std::vector<std::tuple<int, int, int>>{{37, 45, 64}, {1, 8, 16}, {128, 256, 200}}) {
    std::vector<double> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n));
    std::vector<uint16_t> ab(a.size()), bb(b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      a[i] = attn::round_bf16(2 * hash_uniform(1, i) - 1);
      ab[i] = attn::flash::Bf16::from_float(static_cast<float>(a[i]));
    }
    for (size_t i = 0; i < b.size(); ++i) {
      b[i] = attn::round_bf16(2 * hash_uniform(2, i) - 1);
      bb[i] = attn::flash::Bf16::from_float(static_cast<float>(b[i]));
    }
    DeviceArray<uint16_t> da{std::span<const uint16_t>(ab)}, db{std::span<const uint16_t>(bb)},
        dc(static_cast<size_t>(m * n));
    dc.poison();
    gemm.run(true, m, n, k, da.get(), db.get(), dc.get(), nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<uint16_t> c(static_cast<size_t>(m * n));
    dc.to_host(c);
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        double ref = 0, mag = 0;
        for (int t = 0; t < k; ++t) {
          ref += a[i * k + t] * b[t * n + j];
          mag += std::fabs(a[i * k + t] * b[t * n + j]);
        }
        // bf16 output rounding (half an ulp at |ref|, 2^-9 relative) + fp32 accumulation.
        const double got = attn::flash::Bf16::to_float(c[static_cast<size_t>(i * n + j)]);
        ASSERT_LE(std::fabs(got - ref), std::ldexp(std::fabs(ref), -8) + 1e-6 * mag) << m << "x" << n << "x" << k;
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
