// THD ring helper kernels (cuda/thd_kernels.h) on the GPU against the host functions they mirror
// (label gpu; skips without a device): the checks of thd_kernel_checks.h through the CUDA host
// entries (cuda/thd_cuda.h), at cp 1, 2 and 4. test_thd_emu.cpp runs the same checks on the CPU
// through the host emulator of the same kernel bodies.
#include <gtest/gtest.h>

#include <limits>
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

// The constant fill writes its value at every index (-inf, as the ring's LSE accumulator starts),
// also past the grid-stride cap, and nothing past n.
TEST(ThdCudaFill, FillValueWritesEveryElementAndNoMore) {
  DCP_SKIP_WITHOUT_GPU();
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (const int64_t n : {int64_t{1}, int64_t{1000003}, int64_t{65535} * 8 * 256 + 17}) {
    cuda::DeviceArray<float> f(static_cast<size_t>(n + 1));
    ASSERT_EQ(cuda::fill_value(f.get(), n + 1, 3.5f, nullptr), cudaSuccess);
    ASSERT_EQ(cuda::fill_value(f.get(), n, neg_inf, nullptr), cudaSuccess);
    std::vector<float> h(static_cast<size_t>(n + 1));
    f.to_host(h);
    for (int64_t i = 0; i < n; i += (n > 2000000 ? 9973 : 1)) ASSERT_EQ(h[static_cast<size_t>(i)], neg_inf) << "n " << n << " i " << i;
    ASSERT_EQ(h[static_cast<size_t>(n - 1)], neg_inf) << "n " << n;
    ASSERT_EQ(h[static_cast<size_t>(n)], 3.5f) << "n " << n << ": written past n";
  }
}

// The busy wait holds the stream for about the time asked (events around it: at least 90% of 200 us,
// and it ends: well under the 2^24-poll cap's worst case), and 0 launches nothing.
TEST(ThdCudaBusyWait, HoldsTheStreamForTheTimeAsked) {
  DCP_SKIP_WITHOUT_GPU();
  cudaEvent_t a = nullptr, b = nullptr;
  ASSERT_EQ(cudaEventCreate(&a), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&b), cudaSuccess);
  ASSERT_EQ(cuda::busy_wait(0, nullptr), cudaSuccess);
  // An untimed first launch: the module's lazy load (CUDA's default since 12.2) is not timed.
  ASSERT_EQ(cuda::busy_wait(1000, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (const int64_t us : {200, 2000}) {
    ASSERT_EQ(cudaEventRecord(a, nullptr), cudaSuccess);
    ASSERT_EQ(cuda::busy_wait(us * 1000, nullptr), cudaSuccess);
    ASSERT_EQ(cudaEventRecord(b, nullptr), cudaSuccess);
    ASSERT_EQ(cudaEventSynchronize(b), cudaSuccess);
    float ms = 0;
    ASSERT_EQ(cudaEventElapsedTime(&ms, a, b), cudaSuccess);
    EXPECT_GE(ms * 1000.0f, 0.9f * static_cast<float>(us)) << us << " us asked";
    EXPECT_LT(ms * 1000.0f, 20.0f * static_cast<float>(us) + 1000.0f) << us << " us asked";
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
}

INSTANTIATE_TEST_SUITE_P(Thd, ThdCuda, ::testing::Values(1, 2, 4),
                         [](const auto& info) { return "cp" + std::to_string(info.param); });

}  // namespace
}  // namespace dcp::attn
