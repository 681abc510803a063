// The model's math behind one small interface (llm.c's shape: one model definition, one set of
// kernels per backend). The layers (attention.h, mlp.h, mamba.h, mtp.h, model.h) orchestrate;
// every floating-point operation on activations and parameters goes through Kernels<T>, so a
// CUDA backend implements this interface (device pointers) and runs the same model. CpuKernels
// (cpu_kernels.h) is the CPU implementation in T = float or double, which is also the
// accumulation type (the float64 instantiation is the reference the tests compare with).
//
// Conventions (row-major, one row per local packed token):
//   linear: y[n, out] = x[n, in] · w[out, in]^T (Megatron's Linear, no bias).
//   Backward functions OVERWRITE input gradients (dx) and ACCUMULATE (+=) parameter gradients
//   (dw, dg, dtable), so gradients of every micro-batch add up in the ParamStore.
//   Pointers to int32 hold token ids / labels / positions; uint8 holds loss masks.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "attn/attn_shape.h"
#include "attn/cp_attn.h"
#include "attn/thd.h"
#include "comm/communicator.h"

namespace dcp::model {

// AdamW (Loshchilov & Hutter 2019, decoupled weight decay; the form of torch.optim.AdamW and of
// Megatron's FusedAdam with adam_w_mode): p -= lr*wd*p; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
// p -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps).
struct AdamWHyper {
  double lr = 1e-3;
  double beta1 = 0.9;      // Megatron --adam-beta1 default
  double beta2 = 0.999;    // Megatron --adam-beta2 default
  double eps = 1e-8;       // Megatron --adam-eps default
  double weight_decay = 0.01;  // Megatron --weight-decay default (matrices only, see optimizer.h)
};

template <typename T>
class Kernels {
 public:
  virtual ~Kernels() = default;
  virtual std::string name() const = 0;

  virtual void linear_fwd(const T* x, const T* w, T* y, int64_t n, int in, int out) = 0;
  // dx[n, in] = dy · w (skipped when dx is null); dw[out, in] += dy^T · x.
  virtual void linear_bwd(const T* x, const T* w, const T* dy, T* dx, T* dw, int64_t n, int in,
                          int out) = 0;
  // y = x * rstd * g with rstd[i] = 1 / sqrt(mean_j x[i, j]^2 + eps).
  virtual void rmsnorm_fwd(const T* x, const T* g, T* y, T* rstd, int64_t n, int d, double eps) = 0;
  virtual void rmsnorm_bwd(const T* x, const T* g, const T* rstd, const T* dy, T* dx, T* dg,
                           int64_t n, int d) = 0;
  // Rotary embedding in place on x [n, heads, head_dim] (GPT-NeoX / Megatron non-interleaved
  // form: element i pairs with i + head_dim/2), angle pos[t] * theta^(-2i/head_dim);
  // inverse = true rotates by the negative angle (the backward).
  virtual void rope(T* x, const int32_t* pos, int64_t n, int heads, int head_dim, double theta,
                    bool inverse) = 0;
  // gate_up: [n, 2f] (gate in the first f columns); out[n, f] = silu(gate) * up.
  virtual void swiglu_fwd(const T* gate_up, T* out, int64_t n, int f) = 0;
  virtual void swiglu_bwd(const T* gate_up, const T* dout, T* dgate_up, int64_t n, int f) = 0;
  virtual void embedding_fwd(const int32_t* tokens, const T* table, T* out, int64_t n, int d) = 0;
  virtual void embedding_bwd(const int32_t* tokens, const T* dout, T* dtable, int64_t n, int d) = 0;
  // Returns sum over rows with mask = 1 of -log softmax(logits)[label] (accumulated in double);
  // dlogits[i] = scale * mask[i] * (softmax(logits[i]) - onehot(label[i])) (overwritten).
  virtual double cross_entropy(const T* logits, const int32_t* labels, const uint8_t* mask,
                               double scale, T* dlogits, int64_t n, int vocab) = 0;
  virtual void add(const T* a, const T* b, T* y, int64_t n) = 0;  // y = a + b
  virtual void add_inplace(T* y, const T* x, int64_t n) = 0;       // y += x
  // Attention over the CP group `g` (impl/attn/cp_attn.h shapes; T rows = b.total_tokens()/g.size()).
  virtual void attention_fwd(attn::CpAlgo algo, comm::Communicator& g, const attn::ThdBatch& b,
                             const attn::AttnShape& s, const T* q, const T* k, const T* v, T* out,
                             T* lse) = 0;
  virtual void attention_bwd(attn::CpAlgo algo, comm::Communicator& g, const attn::ThdBatch& b,
                             const attn::AttnShape& s, const T* q, const T* k, const T* v,
                             const T* out, const T* lse, const T* dout, T* dq, T* dk, T* dv) = 0;
  // --- Mamba-2-style mixer (mamba.h; Dao & Gu 2024, "Transformers are SSMs", the SSD recurrence
  // with one scalar decay per head and one group of B/C) ---
  // out[n, d] = y * silu(z); z is strided (row i at z + i * ldz, as z inside in_proj's output).
  virtual void silu_gate_fwd(const T* z, int64_t ldz, const T* y, T* out, int64_t n, int d) = 0;
  // dz (row stride lddz, the first d columns of each row overwritten) = dout * y * silu'(z);
  // dy[n, d] = dout * silu(z) (overwritten).
  virtual void silu_gate_bwd(const T* z, int64_t ldz, const T* y, const T* dout, T* dz,
                             int64_t lddz, T* dy, int64_t n, int d) = 0;
  // Selective scan over the packed batch `b` in sequence order (T = b.total_tokens() rows), for
  // `heads` heads of head_dim P and state size N:
  //   xs [T, heads, P], dt [T, heads] (before the bias), B [T, N], C [T, N] (shared by the
  //   heads), dt_bias / A_log / D [heads]; y [T, heads, P] (overwritten).
  //   Per head h and sequence j, over its real rows t = cu_seqlens_padded[j] .. + len_j - 1 in
  //   order, with S [P, N] = 0 at the sequence start:
  //     dta = softplus(dt[t,h] + dt_bias[h]);  a = exp(-exp(A_log[h]) * dta)
  //     S = a S + dta * xs[t,h,:] (x) B[t,:];   y[t,h,:] = S C[t,:] + D[h] xs[t,h,:]
  //   Padding rows (after a sequence's real rows) get y = 0 and never touch the state.
  virtual void ssm_scan_fwd(const attn::ThdBatch& b, const T* xs, const T* dt, const T* B,
                            const T* C, const T* dt_bias, const T* A_log, const T* D, T* y,
                            int heads, int head_dim, int state) = 0;
  // Backward of ssm_scan_fwd (same inputs; the states are recomputed per sequence, so nothing
  // but the inputs is kept between forward and backward). Overwrites dxs [T, heads, P],
  // ddt [T, heads], dB [T, N], dC [T, N] (dB/dC summed over the heads; padding rows get 0);
  // accumulates (+=) ddt_bias, dA_log, dD [heads].
  virtual void ssm_scan_bwd(const attn::ThdBatch& b, const T* xs, const T* dt, const T* B,
                            const T* C, const T* dt_bias, const T* A_log, const T* D,
                            const T* dy, T* dxs, T* ddt, T* dB, T* dC, T* ddt_bias, T* dA_log,
                            T* dD, int heads, int head_dim, int state) = 0;
  // One AdamW step (1-based `step`) over n elements with weight decay `wd`.
  virtual void adamw(T* p, const T* g, T* m, T* v, int64_t n, const AdamWHyper& h, double wd,
                     int step) = 0;
};

// The CPU kernels in T (float or double).
template <typename T>
std::unique_ptr<Kernels<T>> make_cpu_kernels();

}  // namespace dcp::model
