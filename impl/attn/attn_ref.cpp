// Float64 reference attention (the spec). Formulas, for one query row i and head h of a sequence,
// with kv head g = h / (heads / kv_heads) and the keys p it may attend (attn_shape.h):
//   s_p   = scale * <q_i, k_p>
//   lse_i = log sum_p exp(s_p)                (computed as m + log sum exp(s_p - m), m = max s_p)
//   P_p   = exp(s_p - lse_i)
//   out_i = sum_p P_p v_p
// Backward of L = sum(dout * out) (FlashAttention-2 paper, Dao 2023, Alg. 2):
//   D_i    = <dout_i, out_i>
//   dP_p   = <dout_i, v_p>,  dS_p = P_p (dP_p - D_i)
//   dq_i  += scale * dS_p k_p,  dk_p += scale * dS_p q_i,  dv_p += P_p dout_i
#include "attn/attn_ref.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "attn/host_loops.h"
#include "core/nvtx.h"

namespace dcp::attn {

void check_sizes(const AttnShape& s, int64_t q_tokens, int64_t k_tokens, size_t q, size_t k, size_t v,
                 size_t out, size_t lse) {
  const auto qn = static_cast<size_t>(q_tokens * s.q_row());
  const auto kn = static_cast<size_t>(k_tokens * s.kv_row());
  const auto ln = static_cast<size_t>(q_tokens * s.heads);
  DCP_CHECK(q == qn && out == qn, "attention: q/out have ", q, "/", out, " elements, expected ",
            q_tokens, " x ", s.heads, " x ", s.head_dim);
  DCP_CHECK(k == kn && v == kn, "attention: k/v have ", k, "/", v, " elements, expected ", k_tokens,
            " x ", s.kv_heads, " x ", s.head_dim);
  DCP_CHECK(lse == ln, "attention: lse has ", lse, " elements, expected ", q_tokens, " x ",
            s.heads);
}

void check_sizes(const AttnShape& s, int64_t tokens, size_t q, size_t k, size_t v, size_t out,
                 size_t lse) {
  check_sizes(s, tokens, tokens, q, k, v, out, lse);
}

namespace {
double dot(const double* a, const double* b, int n) {
  double acc = 0;
  for (int e = 0; e < n; ++e) acc += a[e] * b[e];
  return acc;
}

void validate_pair(const ThdBatch& bq, const ThdBatch& bk) {
  validate_layout(bq);
  if (&bq != &bk) validate_layout(bk);
  DCP_CHECK(bq.batch() == bk.batch(), "attention: the query batch has ", bq.batch(),
            " sequences, the key batch ", bk.batch());
}
}  // namespace

void begin_fwd(const ThdBatch& bq, const ThdBatch& bk, const AttnShape& s, std::span<const double> q,
               std::span<const double> k, std::span<const double> v, std::span<double> out,
               std::span<double> lse) {
  validate(s);
  validate_pair(bq, bk);
  check_sizes(s, bq.total_tokens(), bk.total_tokens(), q.size(), k.size(), v.size(), out.size(), lse.size());
  std::fill(out.begin(), out.end(), 0.0);
  std::fill(lse.begin(), lse.end(), -std::numeric_limits<double>::infinity());
}

void begin_fwd(const ThdBatch& b, const AttnShape& s, std::span<const double> q, std::span<const double> k,
               std::span<const double> v, std::span<double> out, std::span<double> lse) {
  begin_fwd(b, b, s, q, k, v, out, lse);
}

void begin_bwd(const ThdBatch& bq, const ThdBatch& bk, const AttnShape& s, std::span<const double> q,
               std::span<const double> k, std::span<const double> v, std::span<const double> dout,
               std::span<double> dq, std::span<double> dk, std::span<double> dv) {
  validate(s);
  validate_pair(bq, bk);
  const int64_t tq = bq.total_tokens(), tk = bk.total_tokens();
  const auto lse_size = static_cast<size_t>(tq * s.heads);
  check_sizes(s, tq, tk, q.size(), k.size(), v.size(), dout.size(), lse_size);
  check_sizes(s, tq, tk, dq.size(), dk.size(), dv.size(), dq.size(), lse_size);
  std::fill(dq.begin(), dq.end(), 0.0);
  std::fill(dk.begin(), dk.end(), 0.0);
  std::fill(dv.begin(), dv.end(), 0.0);
}

void begin_bwd(const ThdBatch& b, const AttnShape& s, std::span<const double> q, std::span<const double> k,
               std::span<const double> v, std::span<const double> dout, std::span<double> dq, std::span<double> dk,
               std::span<double> dv) {
  begin_bwd(b, b, s, q, k, v, dout, dq, dk, dv);
}

void attn_fwd_ref(const ThdBatch& bq, const ThdBatch& bk, const AttnShape& s, std::span<const double> q,
                  std::span<const double> k, std::span<const double> v, std::span<double> out,
                  std::span<double> lse) {
  DCP_NVTX_RANGE();
  begin_fwd(bq, bk, s, q, k, v, out, lse);
  const int d = s.head_dim;
  const double scale = s.scale();
  std::vector<double> scores, rows;
  std::vector<std::vector<double>> kt(s.kv_heads);  // per kv head: the sequence's keys transposed
  for (int j = 0; j < bq.batch(); ++j) {
    const int64_t start_q = bq.cu_seqlens_padded[j], start_k = bk.cu_seqlens_padded[j];
    const int32_t len_q = bq.seqlen(j), len_k = bk.seqlen(j);
    for (int g = 0; g < s.kv_heads; ++g) {
      host::head_rows(k, start_k, len_k, s.kv_heads, g, d, rows);
      host::transpose(rows.data(), len_k, d, kt[g]);
    }
    for (int32_t i = 0; i < len_q; ++i) {
      const int32_t nk = keys_attended(s, i, len_q, len_k);
      if (nk == 0) continue;  // attends nothing: out 0, lse -inf
      for (int h = 0; h < s.heads; ++h) {
        const int g = h / s.group();
        const double* qi = &q[((start_q + i) * s.heads + h) * d];
        scores.resize(nk);
        host::dots(qi, kt[g].data(), len_k, nk, d, scores.data());  // <q_i, k_p> (host_loops.h)
        double m = -std::numeric_limits<double>::infinity();
        for (int32_t p = 0; p < nk; ++p) {
          scores[p] *= scale;
          m = std::max(m, scores[p]);
        }
        double sum = 0;
        for (int32_t p = 0; p < nk; ++p) sum += std::exp(scores[p] - m);
        const double l = m + std::log(sum);
        lse[(start_q + i) * s.heads + h] = l;
        double* oi = &out[((start_q + i) * s.heads + h) * d];
        for (int32_t p = 0; p < nk; ++p)
          host::axpy(std::exp(scores[p] - l), &v[((start_k + p) * s.kv_heads + g) * d], oi, d);
      }
    }
  }
}

void attn_fwd_ref(const ThdBatch& b, const AttnShape& s, std::span<const double> q,
                  std::span<const double> k, std::span<const double> v, std::span<double> out,
                  std::span<double> lse) {
  attn_fwd_ref(b, b, s, q, k, v, out, lse);
}

void attn_bwd_ref(const ThdBatch& bq, const ThdBatch& bk, const AttnShape& s, std::span<const double> q,
                  std::span<const double> k, std::span<const double> v, std::span<const double> out,
                  std::span<const double> lse, std::span<const double> dout, std::span<double> dq,
                  std::span<double> dk, std::span<double> dv) {
  DCP_NVTX_RANGE();
  begin_bwd(bq, bk, s, q, k, v, dout, dq, dk, dv);
  check_sizes(s, bq.total_tokens(), bk.total_tokens(), q.size(), k.size(), v.size(), out.size(), lse.size());
  const int d = s.head_dim;
  const double scale = s.scale();
  std::vector<double> qk, dov, rows;
  std::vector<std::vector<double>> kt(s.kv_heads), vt(s.kv_heads);  // per kv head, transposed
  for (int j = 0; j < bq.batch(); ++j) {
    const int64_t start_q = bq.cu_seqlens_padded[j], start_k = bk.cu_seqlens_padded[j];
    const int32_t len_q = bq.seqlen(j), len_k = bk.seqlen(j);
    for (int g = 0; g < s.kv_heads; ++g) {
      host::head_rows(k, start_k, len_k, s.kv_heads, g, d, rows);
      host::transpose(rows.data(), len_k, d, kt[g]);
      host::head_rows(v, start_k, len_k, s.kv_heads, g, d, rows);
      host::transpose(rows.data(), len_k, d, vt[g]);
    }
    for (int32_t i = 0; i < len_q; ++i) {
      const int32_t nk = keys_attended(s, i, len_q, len_k);
      for (int h = 0; h < s.heads; ++h) {
        const int g = h / s.group();
        const int64_t qrow = ((start_q + i) * s.heads + h) * d;
        const double delta = dot(&dout[qrow], &out[qrow], d);
        const double l = lse[(start_q + i) * s.heads + h];
        qk.resize(nk);
        dov.resize(nk);
        host::dots(&q[qrow], kt[g].data(), len_k, nk, d, qk.data());      // <q_i, k_p>
        host::dots(&dout[qrow], vt[g].data(), len_k, nk, d, dov.data());  // dP_p = <dout_i, v_p>
        for (int32_t p = 0; p < nk; ++p) {
          const int64_t krow = ((start_k + p) * s.kv_heads + g) * d;
          const double prob = std::exp(scale * qk[p] - l);
          const double ds = prob * (dov[p] - delta);
          host::axpy(scale * ds, &k[krow], &dq[qrow], d);
          host::axpy(scale * ds, &q[qrow], &dk[krow], d);
          host::axpy(prob, &dout[qrow], &dv[krow], d);
        }
      }
    }
  }
}

void attn_bwd_ref(const ThdBatch& b, const AttnShape& s, std::span<const double> q,
                  std::span<const double> k, std::span<const double> v,
                  std::span<const double> out, std::span<const double> lse,
                  std::span<const double> dout, std::span<double> dq, std::span<double> dk,
                  std::span<double> dv) {
  attn_bwd_ref(b, b, s, q, k, v, out, lse, dout, dq, dk, dv);
}

}  // namespace dcp::attn
