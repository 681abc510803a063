// See gemm_lt.h. Column-major view of the row-major product: C^T [n, m] = op(B)^T op(A)^T, i.e.
// cuBLASLt's "A" is our B and its "B" our A; a row-major [r, c] buffer is a column-major [c, r]
// one with leading dimension c. So, per form (layouts as stored, then the op):
//   our B [k, n] (nn, tn): column-major n x k, ld n, op N;  stored [n, k] (nt): k x n, ld k, op T
//   our A [m, k] (nn, nt): column-major k x m, ld k, op N;  stored [k, m] (tn): m x k, ld m, op T
//   C [m, n]: column-major n x m, ld n (16-bit, or fp32 with beta = 1 when accumulating).
#include "exec/cuda/gemm_lt.h"

#include "core/cuda_check.h"
#include "core/error.h"

namespace dcp::exec {

namespace {
void check(cublasStatus_t st, const char* what) {
  DCP_CHECK(st == CUBLAS_STATUS_SUCCESS, "cuBLASLt: ", what, " failed (status ", static_cast<int>(st), ")");
}
}  // namespace

GemmLt::GemmLt(size_t workspace_bytes) : workspace_bytes_(workspace_bytes) {
  check(cublasLtCreate(&handle_), "cublasLtCreate");
  if (workspace_bytes_ > 0) DCP_CUDA_CHECK(cudaMalloc(&workspace_, workspace_bytes_));
}

GemmLt::~GemmLt() {
  for (auto& [key, p] : plans_) {
    cublasLtMatrixLayoutDestroy(p.la);
    cublasLtMatrixLayoutDestroy(p.lb);
    cublasLtMatrixLayoutDestroy(p.lc);
    cublasLtMatmulDescDestroy(p.op);
  }
  if (workspace_) cudaFree(workspace_);
  if (handle_) cublasLtDestroy(handle_);
}

const GemmLt::Plan& GemmLt::plan(bool bf16, GemmForm form, bool accumulate_fp32, int64_t m, int64_t n, int64_t k) {
  const auto key = std::make_tuple(bf16, form, accumulate_fp32, m, n, k);
  if (auto it = plans_.find(key); it != plans_.end()) return it->second;
  Plan p;
  cublasLtMatmulPreference_t pref = nullptr;
  try {
  const cudaDataType_t t = bf16 ? CUDA_R_16BF : CUDA_R_16F;
  check(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  const auto u = [](int64_t x) { return static_cast<uint64_t>(x); };
  const bool b_t = form == GemmForm::nt, a_t = form == GemmForm::tn;
  const cublasOperation_t op_a = b_t ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = a_t ? CUBLAS_OP_T : CUBLAS_OP_N;
  check(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)), "transa");
  check(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)), "transb");
  check(b_t ? cublasLtMatrixLayoutCreate(&p.la, t, u(k), u(n), k) : cublasLtMatrixLayoutCreate(&p.la, t, u(n), u(k), n),
        "layout A");
  check(a_t ? cublasLtMatrixLayoutCreate(&p.lb, t, u(m), u(k), m) : cublasLtMatrixLayoutCreate(&p.lb, t, u(k), u(m), k),
        "layout B");
  check(cublasLtMatrixLayoutCreate(&p.lc, accumulate_fp32 ? CUDA_R_32F : t, u(n), u(m), n), "layout C");
  check(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes_,
                                             sizeof(workspace_bytes_)),
        "workspace preference");
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(handle_, p.op, p.la, p.lb, p.lc, p.lc, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  pref = nullptr;
  check(st, "cublasLtMatmulAlgoGetHeuristic");
  DCP_CHECK(found > 0, "cuBLASLt: no algorithm for a ", m, " x ", n, " x ", k, " GEMM");
  p.algo = result.algo;
  } catch (...) {  // nothing created here outlives a failure
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (p.la) cublasLtMatrixLayoutDestroy(p.la);
    if (p.lb) cublasLtMatrixLayoutDestroy(p.lb);
    if (p.lc) cublasLtMatrixLayoutDestroy(p.lc);
    if (p.op) cublasLtMatmulDescDestroy(p.op);
    throw;
  }
  return plans_.emplace(key, p).first->second;
}

void GemmLt::run(bool bf16, GemmForm form, int64_t m, int64_t n, int64_t k, const uint16_t* a, const uint16_t* b,
                 void* c, bool accumulate_fp32, cudaStream_t stream) {
  DCP_CHECK(m > 0 && n > 0 && k > 0, "GemmLt: ", m, " x ", n, " x ", k, " is not a GEMM");
  const Plan& p = plan(bf16, form, accumulate_fp32, m, n, k);
  const float alpha = 1.f, beta = accumulate_fp32 ? 1.f : 0.f;
  check(cublasLtMatmul(handle_, p.op, &alpha, b, p.la, a, p.lb, &beta, c, p.lc, c, p.lc, &p.algo, workspace_,
                       workspace_bytes_, stream),
        "cublasLtMatmul");
}

}  // namespace dcp::exec
