// See gemm_lt.h. Column-major view of the row-major product: C^T [n, m] = op(B)^T op(A)^T, i.e.
// cuBLASLt's "A" is our B and its "B" our A; a row-major [r, c] buffer is a column-major [c, r]
// one with leading dimension c. So, per form (layouts as stored, then the op):
//   our B [k, n] (nn, tn): column-major n x k, ld n, op N;  stored [n, k] (nt): k x n, ld k, op T
//   our A [m, k] (nn, nt): column-major k x m, ld k, op N;  stored [k, m] (tn): m x k, ld m, op T
//   C [m, n]: column-major n x m, ld n (16-bit, or fp32 with beta = 1 when accumulating).
#include "exec/cuda/gemm_lt.h"

#include "core/cuda_check.h"
#include "core/error.h"

#include <dlfcn.h>

#include <string>
#include <type_traits>

namespace dcp::exec {

namespace {
void check(cublasStatus_t st, const char* what) {
  DCP_CHECK(st == CUBLAS_STATUS_SUCCESS, "cuBLASLt: ", what, " failed (status ", static_cast<int>(st), ")");
}

// cuBLASLt is loaded when the first GemmLt is made, not linked: its static initialisers ran in
// every process that linked it, ~0.3 s of each `dcpbench` start (perf on the 2-core VM:
// `dcpbench --help` took 0.38 s, 79% of it in the libraries' initialisers, most in
// libcublasLt.so.13's), although only the CUDA backend (run/calibrate --backend cuda) runs a
// GEMM: CI's ~250 CLI calls (robustness corpus, Python module, gate) paid ~75 s of it. The
// signatures are the header's (decltype); the soname is libcublasLt.so.<the toolkit's major
// version> (CMake; cuBLAS has followed the toolkit's major since CUDA 11). dlopen searches
// LD_LIBRARY_PATH, the run path of the object that calls it (dcpbench, a test, the Python module:
// CMake puts the toolkit's folder there for cudart) and ld.so.cache; then the full path in the
// build's toolkit folder (the same folder as that run path: for a binary installed without it).

// The entry points GemmLt calls, each once: a member of LtApi typed by the header's declaration,
// and looked up by its name.
#define DCP_LT_ENTRY_POINTS(X)                                                                      \
  X(Create) X(Destroy) X(Matmul) X(MatmulAlgoGetHeuristic) X(MatmulDescCreate) X(MatmulDescDestroy) \
  X(MatmulDescSetAttribute) X(MatmulPreferenceCreate) X(MatmulPreferenceDestroy)                    \
  X(MatmulPreferenceSetAttribute) X(MatrixLayoutCreate) X(MatrixLayoutDestroy)

struct LtApi {
#define DCP_LT_MEMBER(name) decltype(&cublasLt##name) name;
  DCP_LT_ENTRY_POINTS(DCP_LT_MEMBER)
#undef DCP_LT_MEMBER
};

std::string dl_error() {
  const char* e = dlerror();
  return e ? e : "no reason given";
}

LtApi load_lt() {
  void* h = dlopen(DCP_CUBLASLT_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const std::string first = dl_error();
    h = dlopen(DCP_CUBLASLT_DIR "/" DCP_CUBLASLT_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!h)
      DCP_FAIL("cuBLASLt (the CUDA backend's GEMMs): put the folder of " DCP_CUBLASLT_SONAME
               " on LD_LIBRARY_PATH; dlopen: ", first, "; by the build's path: ", dl_error());
  }
  LtApi api{};
  const auto sym = [h](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
    if (!fn) DCP_FAIL("cuBLASLt: " DCP_CUBLASLT_SONAME " has no ", name, " (", dl_error(), ")");
  };
#define DCP_LT_LOOKUP(name) sym(api.name, "cublasLt" #name);
  DCP_LT_ENTRY_POINTS(DCP_LT_LOOKUP)
#undef DCP_LT_LOOKUP
  return api;  // the handle stays open for the process (after a failed dlsym too: the retry reuses it)
}
#undef DCP_LT_ENTRY_POINTS  // (a unity batch goes on with the next file)

// Loaded once (a failed load throws and the next call tries again).
const LtApi& lt() {
  static const LtApi api = load_lt();
  return api;
}
}  // namespace

void load_cublaslt() { lt(); }

GemmLt::GemmLt(size_t workspace_bytes) : workspace_bytes_(workspace_bytes) {
  check(lt().Create(&handle_), "cublasLtCreate");
  if (workspace_bytes_ > 0) DCP_CUDA_CHECK(cudaMalloc(&workspace_, workspace_bytes_));
}

GemmLt::~GemmLt() {
  for (auto& [key, p] : plans_) {
    lt().MatrixLayoutDestroy(p.la);
    lt().MatrixLayoutDestroy(p.lb);
    lt().MatrixLayoutDestroy(p.lc);
    lt().MatmulDescDestroy(p.op);
  }
  if (workspace_) cudaFree(workspace_);
  if (handle_) lt().Destroy(handle_);
}

const GemmLt::Plan& GemmLt::plan(bool bf16, GemmForm form, bool accumulate_fp32, int64_t m, int64_t n, int64_t k) {
  const auto key = std::make_tuple(bf16, form, accumulate_fp32, m, n, k);
  if (auto it = plans_.find(key); it != plans_.end()) return it->second;
  Plan p;
  cublasLtMatmulPreference_t pref = nullptr;
  try {
  const cudaDataType_t t = bf16 ? CUDA_R_16BF : CUDA_R_16F;
  check(lt().MatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  const auto u = [](int64_t x) { return static_cast<uint64_t>(x); };
  const bool b_t = form == GemmForm::nt, a_t = form == GemmForm::tn;
  const cublasOperation_t op_a = b_t ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = a_t ? CUBLAS_OP_T : CUBLAS_OP_N;
  check(lt().MatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)), "transa");
  check(lt().MatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)), "transb");
  check(b_t ? lt().MatrixLayoutCreate(&p.la, t, u(k), u(n), k) : lt().MatrixLayoutCreate(&p.la, t, u(n), u(k), n),
        "layout A");
  check(a_t ? lt().MatrixLayoutCreate(&p.lb, t, u(m), u(k), m) : lt().MatrixLayoutCreate(&p.lb, t, u(k), u(m), k),
        "layout B");
  check(lt().MatrixLayoutCreate(&p.lc, accumulate_fp32 ? CUDA_R_32F : t, u(n), u(m), n), "layout C");
  check(lt().MatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  check(lt().MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes_,
                                          sizeof(workspace_bytes_)),
        "workspace preference");
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st =
      lt().MatmulAlgoGetHeuristic(handle_, p.op, p.la, p.lb, p.lc, p.lc, pref, 1, &result, &found);
  lt().MatmulPreferenceDestroy(pref);
  pref = nullptr;
  check(st, "cublasLtMatmulAlgoGetHeuristic");
  DCP_CHECK(found > 0, "cuBLASLt: no algorithm for a ", m, " x ", n, " x ", k, " GEMM");
  p.algo = result.algo;
  } catch (...) {  // nothing created here outlives a failure
    if (pref) lt().MatmulPreferenceDestroy(pref);
    if (p.la) lt().MatrixLayoutDestroy(p.la);
    if (p.lb) lt().MatrixLayoutDestroy(p.lb);
    if (p.lc) lt().MatrixLayoutDestroy(p.lc);
    if (p.op) lt().MatmulDescDestroy(p.op);
    throw;
  }
  return plans_.emplace(key, p).first->second;
}

void GemmLt::run(bool bf16, GemmForm form, int64_t m, int64_t n, int64_t k, const uint16_t* a, const uint16_t* b,
                 void* c, bool accumulate_fp32, cudaStream_t stream) {
  DCP_CHECK(m > 0 && n > 0 && k > 0, "GemmLt: ", m, " x ", n, " x ", k, " is not a GEMM");
  const Plan& p = plan(bf16, form, accumulate_fp32, m, n, k);
  const float alpha = 1.f, beta = accumulate_fp32 ? 1.f : 0.f;
  check(lt().Matmul(handle_, p.op, &alpha, b, p.la, a, p.lb, &beta, c, p.lc, c, p.lc, &p.algo, workspace_,
                    workspace_bytes_, stream),
        "cublasLtMatmul");
}

}  // namespace dcp::exec
