// Row-major GEMMs in 16-bit with fp32 accumulation through cuBLASLt (issue 10: the model's
// GEMMs on the GPU): C[m, n] = op(A) op(B) with A, B bf16 (or fp16) stored as GemmForm says
// (exec/stage_ops.h: nt for a linear layer's forward, nn for its dgrad, tn for its wgrad), and C
// either 16-bit and overwritten or fp32 with the product added (accumulate_fp32: the wgrad into
// Megatron's fp32 main_grad). The plan of each (type, form, output, m, n, k) (descriptors,
// layouts and the heuristic's first algorithm with the workspace) is made once and cached, so a
// timed run measures the matmuls, not their planning.
// Only built with CUDA; throws dcp::Error on a cuBLASLt or CUDA error.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <tuple>

#include "exec/stage_ops.h"

namespace dcp::exec {

// cuBLASLt is not linked but loaded (dlopen) by the first GemmLt: a process that never runs a GEMM
// on the GPU does not pay its start-up (gemm_lt.cpp). This loads it now; throws dcp::Error naming
// the library when it cannot be loaded or lacks an entry point (no device needed).
void load_cublaslt();

class GemmLt {
 public:
  explicit GemmLt(size_t workspace_bytes = size_t{32} << 20);
  ~GemmLt();
  GemmLt(const GemmLt&) = delete;
  GemmLt& operator=(const GemmLt&) = delete;

  // c: uint16_t[m * n] (16-bit, overwritten) or, with accumulate_fp32, float[m * n] (C += product).
  void run(bool bf16, GemmForm form, int64_t m, int64_t n, int64_t k, const uint16_t* a, const uint16_t* b, void* c,
           bool accumulate_fp32, cudaStream_t stream);

 private:
  struct Plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  const Plan& plan(bool bf16, GemmForm form, bool accumulate_fp32, int64_t m, int64_t n, int64_t k);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::map<std::tuple<bool, GemmForm, bool, int64_t, int64_t, int64_t>, Plan> plans_;
};

}  // namespace dcp::exec
