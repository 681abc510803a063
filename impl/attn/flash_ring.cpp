// See flash_ring.h: the zigzag layout of a rank and the host backend.
#include "attn/flash_ring.h"

#include "attn/attn_tiles.h"
#include "attn/flash/flash_common.h"
#include "attn/flash_emu.h"
#include "core/error.h"

namespace dcp::attn {

RingLayout ring_layout(const ThdBatch& b, int cp, int rank) {
  validate(b, cp);
  DCP_CHECK(rank >= 0 && rank < cp, "ring_layout: rank ", rank, " outside cp ", cp);
  const LocalRealLengths real = local_real_lengths(b, cp, rank);
  RingLayout l;
  for (ThdBatch* x : {&l.local, &l.front, &l.back}) {
    x->cu_seqlens = {0};
    x->cu_seqlens_padded = {0};
  }
  for (int j = 0; j < b.batch(); ++j) {
    const int32_t c = b.padded_seqlen(j) / (2 * cp);
    l.local.cu_seqlens.push_back(l.local.cu_seqlens.back() + real.front[j] + real.back[j]);
    l.local.cu_seqlens_padded.push_back(l.local.cu_seqlens_padded.back() + 2 * c);
    l.front.cu_seqlens.push_back(l.front.cu_seqlens.back() + real.front[j]);
    l.front.cu_seqlens_padded.push_back(l.front.cu_seqlens_padded.back() + c);
    l.back.cu_seqlens.push_back(l.back.cu_seqlens.back() + real.back[j]);
    l.back.cu_seqlens_padded.push_back(l.back.cu_seqlens_padded.back() + c);
  }
  l.front_rows = zigzag_half_rows(b, cp, 0);
  l.back_rows = zigzag_half_rows(b, cp, 1);
  return l;
}

namespace {
template <class T>
std::vector<T> gather_rows(const std::vector<T>& src, const std::vector<int64_t>& rows, int64_t row_elems) {
  std::vector<T> out(rows.size() * row_elems);
  for (size_t i = 0; i < rows.size(); ++i)
    for (int64_t e = 0; e < row_elems; ++e) out[i * row_elems + e] = src.at(rows[i] * row_elems + e);
  return out;
}
float to_f(uint16_t x, Half h) { return h == Half::bf16 ? flash::Bf16::to_float(x) : flash::Fp16::to_float(x); }
}  // namespace

HostFlashBackend::B16 HostFlashBackend::gather(const B16& src, const std::vector<int64_t>& rows, int64_t row_elems) const {
  return gather_rows(src, rows, row_elems);
}
HostFlashBackend::B32 HostFlashBackend::gather(const B32& src, const std::vector<int64_t>& rows, int64_t row_elems) const {
  return gather_rows(src, rows, row_elems);
}

HostFlashBackend::B16 HostFlashBackend::round(const B32& x) const {
  B16 out(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    out[i] = half == Half::bf16 ? flash::Bf16::from_float(x[i]) : flash::Fp16::from_float(x[i]);
  return out;
}

void HostFlashBackend::fwd(const ThdBatch& bq, const ThdBatch& bk, const AttnShape& s, const B16& q, const B16& k,
                           const B16& v, B16& out, B32& lse) const {
  out.assign(q.size(), 0);
  lse.assign(static_cast<size_t>(bq.total_tokens() * s.heads), 0.f);
  flash_fwd_emulated(half, bq, bk, s, q, k, v, out, lse);
}

void HostFlashBackend::bwd(const ThdBatch& bq, const ThdBatch& bk, const AttnShape& s, const B16& q, const B16& k,
                           const B16& v, const B16& out, const B32& lse, const B16& dout, B16& dq, B16& dk,
                           B16& dv) const {
  dq.assign(q.size(), 0);
  dk.assign(k.size(), 0);
  dv.assign(v.size(), 0);
  flash_bwd_emulated(half, bq, bk, s, q, k, v, out, lse, dout, dq, dk, dv);
}

void HostFlashBackend::merge(const AttnShape& s, const B16& out_step, const B32& lse_step, B32& out_acc, B32& lse_acc,
                             const std::vector<int64_t>& rows) const {
  const int64_t n = static_cast<int64_t>(lse_step.size()) / s.heads;
  std::vector<float> o(out_step.size());
  for (size_t i = 0; i < o.size(); ++i) o[i] = to_f(out_step[i], half);
  if (rows.empty()) {
    lse_merge<float>(s, n, o.data(), lse_step.data(), out_acc.data(), lse_acc.data());
    return;
  }
  std::vector<float> acc = gather_rows(out_acc, rows, s.q_row()), lacc = gather_rows(lse_acc, rows, s.heads);
  lse_merge<float>(s, n, o.data(), lse_step.data(), acc.data(), lacc.data());
  for (size_t i = 0; i < rows.size(); ++i) {
    for (int64_t e = 0; e < s.q_row(); ++e) out_acc[rows[i] * s.q_row() + e] = acc[i * s.q_row() + e];
    for (int h = 0; h < s.heads; ++h) lse_acc[rows[i] * s.heads + h] = lacc[i * s.heads + h];
  }
}

void HostFlashBackend::add(const B16& step, B32& acc, const std::vector<int64_t>& rows, int64_t row_elems) const {
  const size_t n = rows.empty() ? step.size() / row_elems : rows.size();
  for (size_t i = 0; i < n; ++i) {
    const int64_t dst = rows.empty() ? static_cast<int64_t>(i) : rows[i];
    for (int64_t e = 0; e < row_elems; ++e) acc.at(dst * row_elems + e) += to_f(step[i * row_elems + e], half);
  }
}

}  // namespace dcp::attn
