// The work of one CTA of the tensor-core varlen attention forward: kBlockM query rows of one
// (sequence, head) against every key block they attend. One source for the CUDA kernel
// (cuda/flash_fwd.cu, Ctx = the device's intrinsics) and the host emulator (flash_emu.cpp,
// Ctx = 128 cooperative host fibers with barriers), so the emulator's tests check the kernel's own tiling,
// masking, fragment indexing and online softmax against the float64 reference.
//
// Algorithm (FlashAttention-2, Dao 2023, Algorithm 1 with the forward's warp split):
//   Q tile -> shared memory once; for each key block n: K, V tiles -> shared memory (prefetched);
//   each warp: S = Q_w K^T (16 x kBlockN, mma m16n8k16, fp32 accumulators), scaled to base-2
//   exponent units (scale * log2 e) and masked to -inf; running row max m (quad shuffles: a row
//   lives in the 4 lanes of a group), P = exp2(S - m), thread-partial row sums l, O *= exp2(m_old
//   - m); P rounded to the element type and reused from the S registers as the A operand of
//   O += P V (flash_common.h). At the end l is summed over the quad, O /= l, and
//   lse = m ln 2 + ln l (natural log). A row with no key (l = 0) gets O = 0, lse = -inf.
// Key blocks a causal block cannot see are skipped (n_max below). Rows beyond len_q inside the
// sequence's padded extent are written as padding. The whole CTA returns early only when its
// rows start past the padded extent (uniform over the CTA: no warp collective is left waiting).
// Fragments come from shared memory by ldmatrix (flash_common.h); global -> shared copies are
// cp.async, the next K, V block in flight while the current one computes (two stages). Larger
// tiles and warp specialisation are the device session's tuning, measured against
// FlashAttention-2 (issue 9).
#pragma once

#include "attn/flash/flash_common.h"
#include "attn/flash/flash_params.h"

namespace dcp::attn::flash {

// Shared memory of one CTA in elements: the Q tile and two stages of K and V tiles, padded rows.
DCP_HD constexpr int fwd_smem_elems(int head_dim) { return (kBlockM + 4 * kBlockN) * smem_stride(head_dim); }

// Number of key blocks query rows [row0, row_end) of a sequence attend (0 if none).
DCP_HD int fwd_key_blocks(int row0, int row_end, int len_q, int len_k, bool causal) {
  if (len_k <= 0 || row0 >= row_end) return 0;
  int keys = len_k;
  if (causal) {
    const int last = row_end - 1 + len_k - len_q;  // the last key the last row attends
    if (last < 0) return 0;
    keys = last + 1 < len_k ? last + 1 : len_k;
  }
  return (keys + kBlockN - 1) / kBlockN;
}

template <class Ctx, class E, int D>
DCP_HD void flash_fwd_block(Ctx& c, const FwdParams& p, int m_block, int h, int b, uint16_t* smem) {
  static_assert(D % 16 == 0 && D <= 256, "head_dim must be a multiple of 16, at most 256");
  constexpr int kStride = smem_stride(D);
  const int tid = c.tid(), warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const SeqExtent sx = seq_extent(p, b);
  const int len_q = sx.len_q, len_k = sx.len_k, rows_q = sx.rows_q;
  const int64_t q0 = sx.q0, k0 = sx.k0;
  const int row0 = m_block * kBlockM;
  if (row0 >= rows_q) return;
  const int hk = h / (p.heads / p.kv_heads);
  const int64_t q_row = static_cast<int64_t>(p.heads) * D;
  const int64_t kv_row = static_cast<int64_t>(p.kv_heads) * D;

  uint16_t* sQ = smem;
  uint16_t* const sKV = sQ + kBlockM * kStride;  // stage s: K at sKV + 2 s kBlockN kStride, V after it

  const int q_end = row0 + kBlockM < len_q ? row0 + kBlockM : len_q;  // real rows of this block
  const int n_max = fwd_key_blocks(row0, q_end, len_q, len_k, p.causal);

  // Asynchronous copies (cp.async; rows past the real length zero-filled): the Q tile and the
  // first K, V block in one group, then block n + 1 into the other stage while block n computes.
  for (int idx = tid; idx < kBlockM * (D / 8); idx += kThreads) {
    const int r = idx / (D / 8);
    const int col = (idx % (D / 8)) * 8;
    const int i = row0 + r;
    c.cp_async16(sQ + r * kStride + col, p.q + (q0 + (i < len_q ? i : 0)) * q_row + static_cast<int64_t>(h) * D + col,
                 i < len_q);
  }
  const auto load_kv = [&](int n) {
    uint16_t* sk = sKV + (n % 2) * 2 * kBlockN * kStride;
    uint16_t* sv = sk + kBlockN * kStride;
    for (int idx = tid; idx < kBlockN * (D / 8); idx += kThreads) {
      const int r = idx / (D / 8);
      const int col = (idx % (D / 8)) * 8;
      const int j = n * kBlockN + r;
      const int64_t off = (k0 + (j < len_k ? j : 0)) * kv_row + static_cast<int64_t>(hk) * D + col;
      c.cp_async16(sk + r * kStride + col, p.k + off, j < len_k);
      c.cp_async16(sv + r * kStride + col, p.v + off, j < len_k);
    }
  };
  if (n_max > 0) load_kv(0);
  c.cp_async_commit();

  float acc[D / 8][4];
  DCP_UNROLL
  for (int nt = 0; nt < D / 8; ++nt)
    for (int e = 0; e < 4; ++e) acc[nt][e] = 0.f;
  float m_run[2] = {-INFINITY, -INFINITY};  // running max of the two rows (g, g + 8), base-2 units
  float l_run[2] = {0.f, 0.f};              // this lane's partial row sums
  const int r_lo = warp * 16 + g;           // the warp's rows in the tile
  const int i_row[2] = {row0 + r_lo, row0 + r_lo + 8};

  for (int n = 0; n < n_max; ++n) {
    if (n + 1 < n_max) {  // prefetch: the other stage was last read before the previous sync
      load_kv(n + 1);
      c.cp_async_commit();
      c.cp_async_wait_one();  // every group but the newest (this thread's copies of block n)
    } else {
      c.cp_async_wait_all();
    }
    c.sync();  // every thread's copies of block n visible
    const int key0 = n * kBlockN;
    const uint16_t* sK = sKV + (n % 2) * 2 * kBlockN * kStride;
    const uint16_t* sV = sK + kBlockN * kStride;

    // S = Q_w K^T: kBlockN / 8 tiles of 16 x 8.
    float s[kBlockN / 8][4];
    DCP_UNROLL
    for (int nt = 0; nt < kBlockN / 8; ++nt)
      for (int e = 0; e < 4; ++e) s[nt][e] = 0.f;
    DCP_UNROLL
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t a[4];
      c.ldsm_x4(a, sQ + (warp * 16 + ldsm_a_row(lane)) * kStride + kk * 16 + ldsm_a_col(lane));
      DCP_UNROLL
      for (int nt = 0; nt < kBlockN / 8; nt += 2) {  // B[k][n] = K[n][k], two key tiles per load
        uint32_t kb[4];
        c.ldsm_x4(kb, sK + (nt * 8 + ldsm_b_row(lane)) * kStride + kk * 16 + ldsm_b_col(lane));
        const uint32_t b0[2] = {kb[0], kb[1]}, b1[2] = {kb[2], kb[3]};
        c.template mma<E>(s[nt], a, b0);
        c.template mma<E>(s[nt + 1], a, b1);
      }
    }

    // Scale, mask, running max.
    float mx[2] = {-INFINITY, -INFINITY};
    DCP_UNROLL
    for (int nt = 0; nt < kBlockN / 8; ++nt)
      for (int e = 0; e < 4; ++e) {
        const int j = key0 + nt * 8 + 2 * t + (e & 1);
        const int i = i_row[e >> 1];
        const bool ok = j < len_k && (!p.causal || j <= i + len_k - len_q);
        s[nt][e] = ok ? s[nt][e] * p.scale_log2 : -INFINITY;
        mx[e >> 1] = s[nt][e] > mx[e >> 1] ? s[nt][e] : mx[e >> 1];
      }
    float corr[2], base[2];
    DCP_UNROLL
    for (int r = 0; r < 2; ++r) {
      float v = mx[r];
      const float v1 = c.shfl_xor(v, 1);
      v = v1 > v ? v1 : v;
      const float v2 = c.shfl_xor(v, 2);
      v = v2 > v ? v2 : v;
      const float m_new = m_run[r] > v ? m_run[r] : v;
      base[r] = m_new == -INFINITY ? 0.f : m_new;  // no key yet: exp2(-inf - 0) = 0 everywhere
      corr[r] = fast_exp2(m_run[r] - base[r]);
      m_run[r] = m_new;
      l_run[r] *= corr[r];
    }
    DCP_UNROLL
    for (int nt = 0; nt < D / 8; ++nt)
      for (int e = 0; e < 4; ++e) acc[nt][e] *= corr[e >> 1];

    // P = exp2(S - m) in the element type, reused as A fragments; O += P V.
    uint32_t pa[kBlockN / 16][4];
    DCP_UNROLL
    for (int nt = 0; nt < kBlockN / 8; ++nt) {
      uint16_t pe[4];
      DCP_UNROLL
      for (int e = 0; e < 4; ++e) {
        const float pv = fast_exp2(s[nt][e] - base[e >> 1]);
        l_run[e >> 1] += pv;
        pe[e] = E::from_float(pv);
      }
      // tile 2kk: a0a1 (row g), a2a3 (row g + 8); tile 2kk + 1: a4a5, a6a7.
      pa[nt / 2][(nt % 2) * 2 + 0] = pack2(pe[0], pe[1]);
      pa[nt / 2][(nt % 2) * 2 + 1] = pack2(pe[2], pe[3]);
    }
    DCP_UNROLL
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      DCP_UNROLL
      for (int nt = 0; nt < D / 8; nt += 2) {  // B[k][n] = V[k][n], two column tiles per load
        uint32_t vb[4];
        c.ldsm_x4_t(vb, sV + (kk * 16 + ldsm_a_row(lane)) * kStride + nt * 8 + ldsm_a_col(lane));
        const uint32_t b0[2] = {vb[0], vb[1]}, b1[2] = {vb[2], vb[3]};
        c.template mma<E>(acc[nt], pa[kk], b0);
        c.template mma<E>(acc[nt + 1], pa[kk], b1);
      }
    }
    c.sync();  // block n's stage is free for the prefetch of block n + 2
  }
  if (n_max == 0) c.cp_async_wait_all();

  // Normalize and write the rows of this lane: out (row, cols nt*8 + 2t, +1), lse by t == 0.
  DCP_UNROLL
  for (int r = 0; r < 2; ++r) {
    float l = l_run[r];
    l += c.shfl_xor(l, 1);
    l += c.shfl_xor(l, 2);
    const int i = i_row[r];
    if (i >= rows_q) continue;
    const bool live = i < len_q && !(l == 0.f);  // a NaN sum propagates (NaN inputs are not hidden)
    const float inv = live ? 1.f / l : 0.f;
    uint16_t* o = p.out + (q0 + i) * q_row + static_cast<int64_t>(h) * D;
    DCP_UNROLL
    for (int nt = 0; nt < D / 8; ++nt) {
      o[nt * 8 + 2 * t] = E::from_float(acc[nt][r * 2] * inv);
      o[nt * 8 + 2 * t + 1] = E::from_float(acc[nt][r * 2 + 1] * inv);
    }
    if (t == 0) p.lse[(q0 + i) * p.heads + h] = live ? m_run[r] * kLn2 + fast_log(l) : -INFINITY;
  }
}

}  // namespace dcp::attn::flash
