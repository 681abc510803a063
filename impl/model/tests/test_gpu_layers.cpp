// The model's GPU layer kernels (gpu/layer_blocks.h) run on the host (gpu_layers.h: RMSNorm
// through the CTA emulator) against the float64 CPU kernels (gpu_layer_checks.h). The CUDA build
// runs the same checks on the device (cuda/tests/test_layer_cuda.cpp, label gpu).
#include <gtest/gtest.h>

#include "gpu_layer_checks.h"
#include "model/gpu_layers.h"

namespace dcp::model {
namespace {

using namespace dcp::model::testing;

const LayerImpl kEmulated{rmsnorm_fwd_emulated, rmsnorm_bwd_emulated, swiglu_fwd_emulated, swiglu_bwd_emulated,
                          rope_emulated,        add_emulated,         cross_entropy_emulated};

class GpuLayers : public ::testing::TestWithParam<Half> {};

TEST_P(GpuLayers, RmsNormMatchesFloat64) { check_rmsnorm(kEmulated, GetParam()); }
TEST_P(GpuLayers, SwigluMatchesFloat64) { check_swiglu(kEmulated, GetParam()); }
TEST_P(GpuLayers, RopeMatchesFloat64BothWays) { check_rope(kEmulated, GetParam()); }
TEST_P(GpuLayers, AddMatchesFloat64) { check_add(kEmulated, GetParam()); }
TEST_P(GpuLayers, CrossEntropyMatchesFloat64) { check_cross_entropy(kEmulated, GetParam()); }

// The acceptance is not vacuous: the rotation the other way fails it.
TEST(GpuLayersRule, RejectsTheOtherRotation) {
  const auto ref = make_cpu_kernels<double>();
  const Half16 x = random16(kRows * 2 * 64, 6, Half::bf16);
  std::vector<int32_t> pos(kRows);
  for (int64_t t = 0; t < kRows; ++t) pos[t] = static_cast<int32_t>(t * 31);
  std::vector<double> r = x.v;
  ref->rope(r.data(), pos.data(), kRows, 2, 64, 10000.0, false);
  std::vector<uint16_t> g = x.b;
  rope_emulated(Half::bf16, g, pos, kRows, 2, 64, 10000.0, true);
  const double m = max_abs(r);
  EXPECT_GT(max_err(decode(g, Half::bf16), r), 10 * (ulp16(m, Half::bf16) + 1e-5 * m));
}

INSTANTIATE_TEST_SUITE_P(Types, GpuLayers, ::testing::Values(Half::bf16, Half::fp16));

}  // namespace
}  // namespace dcp::model
