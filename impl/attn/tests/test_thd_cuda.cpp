// THD ring helper kernels (cuda/thd_kernels.h) on the GPU against the host functions they mirror
// (label gpu; skips without a device): the checks of thd_kernel_checks.h through the CUDA host
// entries (cuda/thd_cuda.h), at cp 1, 2 and 4. test_thd_emu.cpp runs the same checks on the CPU
// through the host emulator of the same kernel bodies.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "attn/cuda/device_array.h"
#include "attn/cuda/thd_kernels.h"

#include "attn/cuda/thd_cuda.h"
#include "gpu_test_util.h"
#include "thd_kernel_checks.h"

namespace dcp::attn {
namespace {

using namespace dcp::attn::testing;

DCP_THD_ENTRIES(ThdCudaEntries, cuda);

class ThdCuda : public ::testing::TestWithParam<int> {};

TEST_P(ThdCuda, PartitionUnpartitionReadHalfMatchTheHost) {
  DCP_SKIP_WITHOUT_GPU();
  check_thd_partition_unpartition_read_half<ThdCudaEntries>(GetParam());
}

TEST_P(ThdCuda, LseMergeAndGradientCorrectionMatchTheHost) {
  DCP_SKIP_WITHOUT_GPU();
  check_thd_lse_merge_and_gradient_correction<ThdCudaEntries>(GetParam());
}

// The random fill (the benchmark's and the measured runs' inputs) draws on the device what the host
// computes for the same (seed, index): bf16, fp16 and float, at 1 element, an odd count and past
// the grid-stride cap of 65535 x 8 blocks of 256 threads (134,215,680 elements).
TEST(ThdCudaFill, DrawsTheHostsValues) {
  DCP_SKIP_WITHOUT_GPU();
  for (const int64_t n : {int64_t{1}, int64_t{1000003}, int64_t{65535} * 8 * 256 + 17}) {
    const uint64_t seed = 7 + static_cast<uint64_t>(n);
    const auto check = [&](const auto& got, auto expect, const char* type) {
      for (int64_t i = 0; i < n; i += (n > 2000000 ? 9973 : 1))
        ASSERT_EQ(got[static_cast<size_t>(i)], expect(i)) << type << " n " << n << " i " << i;
      ASSERT_EQ(got[static_cast<size_t>(n - 1)], expect(n - 1)) << type << " n " << n;
    };
    for (const bool bf16 : {true, false}) {
      cuda::DeviceArray<uint16_t> d(static_cast<size_t>(n));
      d.poison();
      ASSERT_EQ(cuda::fill_uniform(d.get(), n, seed, 0.5f, bf16, nullptr), cudaSuccess);
      std::vector<uint16_t> h(static_cast<size_t>(n));
      d.to_host(h);
      check(h, [&](int64_t i) {
        return bf16 ? flash::uniform_elem<flash::Bf16>(seed, i, 0.5f) : flash::uniform_elem<flash::Fp16>(seed, i, 0.5f);
      }, bf16 ? "bf16" : "fp16");
    }
    cuda::DeviceArray<float> f(static_cast<size_t>(n));
    f.poison();
    ASSERT_EQ(cuda::fill_uniform(f.get(), n, seed, 2.0f, nullptr), cudaSuccess);
    std::vector<float> h(static_cast<size_t>(n));
    f.to_host(h);
    check(h, [&](int64_t i) { return flash::uniform_value(seed, i, 2.0f); }, "float");
  }
}

INSTANTIATE_TEST_SUITE_P(Thd, ThdCuda, ::testing::Values(1, 2, 4),
                         [](const auto& info) { return "cp" + std::to_string(info.param); });

}  // namespace
}  // namespace dcp::attn
