// The model's GPU layer kernels on the device (layer_cuda.h) under the same checks as their host
// run (gpu_layer_checks.h): label gpu, skips without a device, fails under DCP_REQUIRE_GPU=1.
#include <gtest/gtest.h>

#include "gpu_layer_checks.h"
#include "gpu_test_util.h"
#include "model/cuda/layer_cuda.h"

namespace dcp::model {
namespace {

using namespace dcp::model::testing;

const LayerImpl kCuda{rmsnorm_fwd_cuda, rmsnorm_bwd_cuda, swiglu_fwd_cuda, swiglu_bwd_cuda,
                      rope_cuda,        add_cuda,         cross_entropy_cuda};

class GpuLayersCuda : public ::testing::TestWithParam<Half> {};

TEST_P(GpuLayersCuda, RmsNormMatchesFloat64) {
  DCP_SKIP_WITHOUT_GPU();
  check_rmsnorm(kCuda, GetParam());
}
TEST_P(GpuLayersCuda, SwigluMatchesFloat64) {
  DCP_SKIP_WITHOUT_GPU();
  check_swiglu(kCuda, GetParam());
}
TEST_P(GpuLayersCuda, RopeMatchesFloat64BothWays) {
  DCP_SKIP_WITHOUT_GPU();
  check_rope(kCuda, GetParam());
}

TEST_P(GpuLayersCuda, AddMatchesFloat64) {
  DCP_SKIP_WITHOUT_GPU();
  check_add(kCuda, GetParam());
}
TEST_P(GpuLayersCuda, CrossEntropyMatchesFloat64) {
  DCP_SKIP_WITHOUT_GPU();
  check_cross_entropy(kCuda, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Types, GpuLayersCuda, ::testing::Values(Half::bf16, Half::fp16));

}  // namespace
}  // namespace dcp::model
