// Row-major GEMMs in 16-bit with fp32 accumulation through cuBLASLt (issue 10: the model's
// GEMMs on the GPU): C[m, n] = A[m, k] B[k, n], A, B, C bf16 (or fp16), C overwritten. The plan
// of each (type, m, n, k) (descriptors, layouts and the heuristic's first algorithm with the
// workspace) is made once and cached, so a timed run measures the matmuls, not their planning.
// Only built with CUDA; throws dcp::Error on a cuBLASLt or CUDA error.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <tuple>

namespace dcp::exec {

class GemmLt {
 public:
  explicit GemmLt(size_t workspace_bytes = size_t{32} << 20);
  ~GemmLt();
  GemmLt(const GemmLt&) = delete;
  GemmLt& operator=(const GemmLt&) = delete;

  void run(bool bf16, int64_t m, int64_t n, int64_t k, const uint16_t* a, const uint16_t* b, uint16_t* c,
           cudaStream_t stream);

 private:
  struct Plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  const Plan& plan(bool bf16, int64_t m, int64_t n, int64_t k);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::map<std::tuple<bool, int64_t, int64_t, int64_t>, Plan> plans_;
};

}  // namespace dcp::exec
