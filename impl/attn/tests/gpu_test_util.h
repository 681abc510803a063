// GPU test guard: without a CUDA device a gpu-labelled test skips with a message, except under
// DCP_REQUIRE_GPU=1 (ci/gpu.sh), where a skip would hide a broken GPU setup and fails instead.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <cuda_runtime.h>

namespace dcp::attn::testing {

inline bool have_device() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

inline bool gpu_required() {
  const char* r = std::getenv("DCP_REQUIRE_GPU");
  return r && std::string(r) == "1";
}

}  // namespace dcp::attn::testing

#define DCP_SKIP_WITHOUT_GPU()                                                   \
  do {                                                                           \
    if (!::dcp::attn::testing::have_device()) {                                  \
      if (::dcp::attn::testing::gpu_required()) FAIL() << "no CUDA device";      \
      GTEST_SKIP() << "no CUDA device";                                          \
    }                                                                            \
  } while (0)
