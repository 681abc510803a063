// CPU implementation of Kernels<T> (kernels.h): plain loops in the order a reader expects,
// written so the inner loop runs over contiguous memory. T is also the accumulation type,
// except the cross-entropy loss value, which is summed in double for reporting.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "model/kernels.h"

namespace dcp::model {

namespace {

template <typename T>
T silu(T x) { return x / (T(1) + std::exp(-x)); }

template <typename T>
T sigmoid(T x) { return T(1) / (T(1) + std::exp(-x)); }

// softplus(x) = log(1 + e^x), written so neither branch overflows; its derivative is sigmoid(x).
template <typename T>
T softplus(T x) { return std::max(x, T(0)) + std::log1p(std::exp(-std::abs(x))); }

template <typename T>
class CpuKernels final : public Kernels<T> {
 public:
  std::string name() const override { return "cpu"; }

  void linear_fwd(const T* __restrict x, const T* __restrict w, T* __restrict y, int64_t n, int in,
                  int out) override {
    for (int64_t i = 0; i < n; ++i) {
      const T* xi = x + i * in;
      T* yi = y + i * out;
      for (int o = 0; o < out; ++o) {
        const T* wo = w + static_cast<int64_t>(o) * in;
        T acc = 0;
        for (int k = 0; k < in; ++k) acc += xi[k] * wo[k];
        yi[o] = acc;
      }
    }
  }

  void linear_bwd(const T* __restrict x, const T* __restrict w, const T* __restrict dy,
                  T* __restrict dx, T* __restrict dw, int64_t n, int in, int out) override {
    for (int64_t i = 0; i < n; ++i) {
      const T* xi = x + i * in;
      const T* dyi = dy + i * out;
      if (dx) {
        T* dxi = dx + i * in;
        std::fill(dxi, dxi + in, T(0));
        for (int o = 0; o < out; ++o) {
          const T g = dyi[o];
          const T* wo = w + static_cast<int64_t>(o) * in;
          for (int k = 0; k < in; ++k) dxi[k] += g * wo[k];
        }
      }
      for (int o = 0; o < out; ++o) {
        const T g = dyi[o];
        if (g == T(0)) continue;  // padding rows: exact zeros add nothing
        T* dwo = dw + static_cast<int64_t>(o) * in;
        for (int k = 0; k < in; ++k) dwo[k] += g * xi[k];
      }
    }
  }

  void rmsnorm_fwd(const T* x, const T* g, T* y, T* rstd, int64_t n, int d, double eps) override {
    for (int64_t i = 0; i < n; ++i) {
      const T* xi = x + i * d;
      T ss = 0;
      for (int j = 0; j < d; ++j) ss += xi[j] * xi[j];
      const T r = T(1) / std::sqrt(ss / static_cast<T>(d) + static_cast<T>(eps));
      rstd[i] = r;
      for (int j = 0; j < d; ++j) y[i * d + j] = xi[j] * r * g[j];
    }
  }

  // y_j = g_j r x_j, r = (mean x^2 + eps)^-1/2:
  // dx_j = r (g_j dy_j) - r^3 x_j / d * sum_k (g_k dy_k x_k);  dg_j += dy_j r x_j.
  void rmsnorm_bwd(const T* x, const T* g, const T* rstd, const T* dy, T* dx, T* dg, int64_t n,
                   int d) override {
    for (int64_t i = 0; i < n; ++i) {
      const T* xi = x + i * d;
      const T* dyi = dy + i * d;
      const T r = rstd[i];
      T dot = 0;
      for (int j = 0; j < d; ++j) dot += g[j] * dyi[j] * xi[j];
      const T c = r * r * r * dot / static_cast<T>(d);
      for (int j = 0; j < d; ++j) {
        dx[i * d + j] = r * g[j] * dyi[j] - c * xi[j];
        dg[j] += dyi[j] * r * xi[j];
      }
    }
  }

  void rope(T* x, const int32_t* pos, int64_t n, int heads, int head_dim, double theta,
            bool inverse) override {
    const int half = head_dim / 2;
    std::vector<double> inv_freq(half);
    for (int i = 0; i < half; ++i) inv_freq[i] = std::pow(theta, -2.0 * i / head_dim);
    for (int64_t t = 0; t < n; ++t) {
      for (int i = 0; i < half; ++i) {
        // The angle in double, then rounded to T: the same cos/sin in every run and rank.
        const double ang = static_cast<double>(pos[t]) * inv_freq[i];
        const T c = static_cast<T>(std::cos(ang));
        const T s = static_cast<T>(inverse ? -std::sin(ang) : std::sin(ang));
        for (int h = 0; h < heads; ++h) {
          T* xh = x + (t * heads + h) * head_dim;
          const T a = xh[i], b = xh[i + half];
          xh[i] = a * c - b * s;
          xh[i + half] = a * s + b * c;
        }
      }
    }
  }

  void swiglu_fwd(const T* gate_up, T* out, int64_t n, int f) override {
    for (int64_t i = 0; i < n; ++i)
      for (int j = 0; j < f; ++j) {
        const T gt = gate_up[i * 2 * f + j], up = gate_up[i * 2 * f + f + j];
        out[i * f + j] = silu(gt) * up;
      }
  }

  // silu'(x) = s(x) (1 + x (1 - s(x))), s = sigmoid.
  void swiglu_bwd(const T* gate_up, const T* dout, T* dgate_up, int64_t n, int f) override {
    for (int64_t i = 0; i < n; ++i)
      for (int j = 0; j < f; ++j) {
        const T gt = gate_up[i * 2 * f + j], up = gate_up[i * 2 * f + f + j];
        const T sg = T(1) / (T(1) + std::exp(-gt));
        const T d = dout[i * f + j];
        dgate_up[i * 2 * f + j] = d * up * sg * (T(1) + gt * (T(1) - sg));
        dgate_up[i * 2 * f + f + j] = d * gt * sg;
      }
  }

  void embedding_fwd(const int32_t* tokens, const T* table, T* out, int64_t n, int d) override {
    for (int64_t i = 0; i < n; ++i) std::copy(table + static_cast<int64_t>(tokens[i]) * d,
                                              table + static_cast<int64_t>(tokens[i]) * d + d,
                                              out + i * d);
  }

  void embedding_bwd(const int32_t* tokens, const T* dout, T* dtable, int64_t n, int d) override {
    for (int64_t i = 0; i < n; ++i) {
      T* row = dtable + static_cast<int64_t>(tokens[i]) * d;
      for (int j = 0; j < d; ++j) row[j] += dout[i * d + j];
    }
  }

  double cross_entropy(const T* logits, const int32_t* labels, const uint8_t* mask, double scale,
                       T* dlogits, int64_t n, int vocab) override {
    double loss = 0;
    for (int64_t i = 0; i < n; ++i) {
      const T* li = logits + i * vocab;
      T* di = dlogits + i * vocab;
      if (!mask[i]) {
        std::fill(di, di + vocab, T(0));
        continue;
      }
      DCP_CHECK(labels[i] >= 0 && labels[i] < vocab, "cross_entropy: label ", labels[i],
                " outside the vocabulary of ", vocab, " at row ", i);
      const T m = *std::max_element(li, li + vocab);
      T sum = 0;
      for (int v = 0; v < vocab; ++v) {  // one exp per logit, kept in di
        di[v] = std::exp(li[v] - m);
        sum += di[v];
      }
      const T lse = m + std::log(sum);
      loss += static_cast<double>(lse - li[labels[i]]);
      const T c = static_cast<T>(scale) / sum;
      for (int v = 0; v < vocab; ++v) di[v] *= c;
      di[labels[i]] -= static_cast<T>(scale);
    }
    return loss;
  }

  void add(const T* a, const T* b, T* y, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
  }
  void add_inplace(T* y, const T* x, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) y[i] += x[i];
  }

  void attention_fwd(attn::CpAlgo algo, comm::Communicator& g, const attn::ThdBatch& b,
                     const attn::AttnShape& s, const T* q, const T* k, const T* v, T* out,
                     T* lse) override {
    const size_t rows = static_cast<size_t>(b.total_tokens() / g.size());
    attn::cp_attn_fwd_fn<T>(algo)(g, b, s, {q, rows * s.q_row()}, {k, rows * s.kv_row()},
                                  {v, rows * s.kv_row()}, {out, rows * s.q_row()},
                                  {lse, rows * s.heads});
  }

  void attention_bwd(attn::CpAlgo algo, comm::Communicator& g, const attn::ThdBatch& b,
                     const attn::AttnShape& s, const T* q, const T* k, const T* v, const T* out,
                     const T* lse, const T* dout, T* dq, T* dk, T* dv) override {
    const size_t rows = static_cast<size_t>(b.total_tokens() / g.size());
    const size_t qn = rows * s.q_row(), kn = rows * s.kv_row();
    attn::cp_attn_bwd_fn<T>(algo)(g, b, s, {q, qn}, {k, kn}, {v, kn}, {out, qn},
                                  {lse, rows * s.heads}, {dout, qn}, {dq, qn}, {dk, kn}, {dv, kn});
  }

  void silu_gate_fwd(const T* z, int64_t ldz, const T* y, T* out, int64_t n, int d) override {
    for (int64_t i = 0; i < n; ++i) {
      const T* zi = z + i * ldz;
      for (int j = 0; j < d; ++j) out[i * d + j] = y[i * d + j] * silu(zi[j]);
    }
  }

  // out = y silu(z):  dy = dout silu(z);  dz = dout y silu'(z), silu'(z) = s (1 + z (1 - s)).
  void silu_gate_bwd(const T* z, int64_t ldz, const T* y, const T* dout, T* dz, int64_t lddz,
                     T* dy, int64_t n, int d) override {
    for (int64_t i = 0; i < n; ++i) {
      const T* zi = z + i * ldz;
      T* dzi = dz + i * lddz;
      for (int j = 0; j < d; ++j) {
        const T s = T(1) / (T(1) + std::exp(-zi[j]));
        const T g = dout[i * d + j];
        dy[i * d + j] = g * zi[j] * s;
        dzi[j] = g * y[i * d + j] * s * (T(1) + zi[j] * (T(1) - s));
      }
    }
  }

  void ssm_scan_fwd(const attn::ThdBatch& b, const T* xs, const T* dt, const T* B, const T* C,
                    const T* dt_bias, const T* A_log, const T* D, T* y, int heads, int head_dim,
                    int state) override {
    const int P = head_dim, N = state;
    std::vector<T> S(static_cast<size_t>(P) * N);
    for (int h = 0; h < heads; ++h) {
      const T A = std::exp(A_log[h]);
      for (int j = 0; j < b.batch(); ++j) {
        const int64_t start = b.cu_seqlens_padded[j], len = b.seqlen(j);
        for (int64_t t = start + len; t < b.cu_seqlens_padded[j + 1]; ++t)
          std::fill_n(y + (t * heads + h) * P, P, T(0));
        std::fill(S.begin(), S.end(), T(0));
        for (int64_t t = start; t < start + len; ++t) {
          const T dta = softplus(dt[t * heads + h] + dt_bias[h]);
          const T a = std::exp(-A * dta);
          const T* x = xs + (t * heads + h) * P;
          const T* Bt = B + t * N;
          const T* Ct = C + t * N;
          T* yt = y + (t * heads + h) * P;
          for (int p = 0; p < P; ++p) {
            const T xp = dta * x[p];
            T* Sp = S.data() + p * N;
            T acc = 0;
            for (int n = 0; n < N; ++n) {
              Sp[n] = a * Sp[n] + xp * Bt[n];
              acc += Sp[n] * Ct[n];
            }
            yt[p] = acc + D[h] * x[p];
          }
        }
      }
    }
  }

  // Reverse-time adjoint of the recurrence. With G_t = dL/dS_t = dy_t (x) C_t + a_{t+1} G_{t+1}:
  //   dC_t += S_t^T dy_t;  dxs_t = D dy_t + dta_t G_t B_t;  dB_t += dta_t G_t^T xs_t;
  //   d dta_t = xs_t^T G_t B_t + (da_t/d dta_t) <G_t, S_{t-1}>, da/d dta = -exp(A_log) a;
  //   d dt_t = d dta_t * sigmoid(dt_t + dt_bias) (= ddt_bias contribution);
  //   dA_log += <G_t, S_{t-1}> * (-exp(A_log) dta_t a_t);  dD += <dy_t, xs_t>.
  // The states S_t of one sequence are recomputed into a scratch of (len + 1) P N values.
  void ssm_scan_bwd(const attn::ThdBatch& b, const T* xs, const T* dt, const T* B, const T* C,
                    const T* dt_bias, const T* A_log, const T* D, const T* dy, T* dxs, T* ddt,
                    T* dB, T* dC, T* ddt_bias, T* dA_log, T* dD, int heads, int head_dim,
                    int state) override {
    const int P = head_dim, N = state;
    const int64_t PN = static_cast<int64_t>(P) * N, rows = b.total_tokens();
    std::fill_n(dxs, rows * heads * P, T(0));
    std::fill_n(ddt, rows * heads, T(0));
    std::fill_n(dB, rows * N, T(0));
    std::fill_n(dC, rows * N, T(0));
    int64_t max_len = 0;
    for (int j = 0; j < b.batch(); ++j) max_len = std::max<int64_t>(max_len, b.seqlen(j));
    std::vector<T> Ss((max_len + 1) * PN), G(PN), dta_k(max_len), a_k(max_len), raw_k(max_len);
    for (int h = 0; h < heads; ++h) {
      const T A = std::exp(A_log[h]);
      T dbias = 0, dalog = 0, dd = 0;
      for (int j = 0; j < b.batch(); ++j) {
        const int64_t start = b.cu_seqlens_padded[j], len = b.seqlen(j);
        // Recompute S_{-1} = 0, S_0, ..., S_{len-1} (Ss[k + 1] = S at row start + k).
        std::fill_n(Ss.data(), PN, T(0));
        for (int64_t k = 0; k < len; ++k) {
          const int64_t t = start + k;
          raw_k[k] = dt[t * heads + h] + dt_bias[h];
          dta_k[k] = softplus(raw_k[k]);
          a_k[k] = std::exp(-A * dta_k[k]);
          const T* x = xs + (t * heads + h) * P;
          const T* Bt = B + t * N;
          const T* Sprev = Ss.data() + k * PN;
          T* Scur = Ss.data() + (k + 1) * PN;
          for (int p = 0; p < P; ++p) {
            const T xp = dta_k[k] * x[p];
            for (int n = 0; n < N; ++n) Scur[p * N + n] = a_k[k] * Sprev[p * N + n] + xp * Bt[n];
          }
        }
        std::fill(G.begin(), G.end(), T(0));
        T a_next = 0;
        for (int64_t k = len - 1; k >= 0; --k) {
          const int64_t t = start + k;
          const T dta = dta_k[k], a = a_k[k];
          const T* x = xs + (t * heads + h) * P;
          const T* dyt = dy + (t * heads + h) * P;
          const T* Bt = B + t * N;
          const T* Ct = C + t * N;
          const T* Scur = Ss.data() + (k + 1) * PN;
          const T* Sprev = Ss.data() + k * PN;
          T* dxt = dxs + (t * heads + h) * P;
          T* dBt = dB + t * N;
          T* dCt = dC + t * N;
          T ddta = 0, da = 0;
          for (int p = 0; p < P; ++p) {
            T* Gp = G.data() + p * N;
            const T* Sp = Scur + p * N;
            const T* Sq = Sprev + p * N;
            const T dyp = dyt[p], xp = x[p], cx = dta * x[p];
            T gb = 0;
            for (int n = 0; n < N; ++n) {
              Gp[n] = a_next * Gp[n] + dyp * Ct[n];
              gb += Gp[n] * Bt[n];
              dCt[n] += Sp[n] * dyp;
              dBt[n] += cx * Gp[n];
              da += Gp[n] * Sq[n];
            }
            dxt[p] = D[h] * dyp + dta * gb;
            ddta += xp * gb;
            dd += dyp * xp;
          }
          ddta -= A * a * da;
          const T draw = ddta * sigmoid(raw_k[k]);
          ddt[t * heads + h] = draw;
          dbias += draw;
          dalog -= da * A * dta * a;
          a_next = a;
        }
      }
      ddt_bias[h] += dbias;
      dA_log[h] += dalog;
      dD[h] += dd;
    }
  }

  void adamw(T* p, const T* g, T* m, T* v, int64_t n, const AdamWHyper& h, double wd,
             int step) override {
    const double bc1 = 1.0 - std::pow(h.beta1, step), bc2 = 1.0 - std::pow(h.beta2, step);
    const T lr = static_cast<T>(h.lr), b1 = static_cast<T>(h.beta1), b2 = static_cast<T>(h.beta2);
    const T decay = static_cast<T>(1.0 - h.lr * wd);
    const T c1 = static_cast<T>(1.0 / bc1), c2 = static_cast<T>(1.0 / bc2);
    const T eps = static_cast<T>(h.eps);
    for (int64_t i = 0; i < n; ++i) {
      m[i] = b1 * m[i] + (T(1) - b1) * g[i];
      v[i] = b2 * v[i] + (T(1) - b2) * g[i] * g[i];
      p[i] = p[i] * decay - lr * (m[i] * c1) / (std::sqrt(v[i] * c2) + eps);
    }
  }
};

}  // namespace

template <typename T>
std::unique_ptr<Kernels<T>> make_cpu_kernels() {
  return std::make_unique<CpuKernels<T>>();
}

template std::unique_ptr<Kernels<float>> make_cpu_kernels<float>();
template std::unique_ptr<Kernels<double>> make_cpu_kernels<double>();

}  // namespace dcp::model
