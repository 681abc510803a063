// The work of one CTA of the tensor-core varlen attention forward: 16 * MT * kWarps query rows
// (kFwdBlockM = 128 in the kernel, flash_common.h) of one
// (sequence, head) against every key block they attend. One source for the CUDA kernel
// (cuda/flash_fwd.cu, Ctx = the device's intrinsics) and the host emulator (flash_emu.cpp,
// Ctx = 128 cooperative host fibers with barriers), so the emulator's tests check the kernel's own tiling,
// masking, fragment indexing and online softmax against the float64 reference.
//
// Algorithm (FlashAttention-2, Dao 2023, Algorithm 1 with the forward's warp split):
//   Q tile -> shared memory once; for each key block n: K, V tiles -> shared memory (prefetched);
//   each warp owns MT m16 tiles of rows: S = Q_w K^T (16 MT x kBlockN, mma m16n8k16, fp32
//   accumulators; each K fragment loaded once for the MT tiles), scaled to base-2
//   exponent units (scale * log2 e) and masked to -inf; running row max m (quad shuffles: a row
//   lives in the 4 lanes of a group), P = exp2(S - m), thread-partial row sums l, O *= exp2(m_old
//   - m); P rounded to the element type and reused from the S registers as the A operand of
//   O += P V (flash_common.h). At the end l is summed over the quad, O /= l, and
//   lse = m ln 2 + ln l (natural log). A row with no key (l = 0) gets O = 0, lse = -inf.
// Key blocks a causal block cannot see are skipped (n_max below); a key block every row of the
// CTA sees whole (below the diagonal and inside len_k) skips the mask. Rows beyond len_q inside the
// sequence's padded extent are written as padding. The whole CTA returns early only when its
// rows start past the padded extent (uniform over the CTA: no warp collective is left waiting).
// Fragments come from shared memory by ldmatrix (flash_common.h); global -> shared copies are
// cp.async, the next K, V block in flight while the current one computes (two stages). Warp
// specialisation and wgmma are the device session's tuning, measured against FlashAttention-2
// (issue 9).
#pragma once

#include "attn/flash/flash_common.h"
#include "attn/flash/flash_params.h"

namespace dcp::attn::flash {

// Shared memory of one CTA in elements: the Q tile (16 * mt * kWarps rows) and two stages of K
// and V tiles, padded rows.
DCP_HD constexpr int fwd_smem_elems(int head_dim, int mt = kFwdTilesM) {
  return (fwd_block_rows(mt) + 4 * kBlockN) * smem_stride(head_dim);
}

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

template <class Ctx, class E, int D, int MT = kFwdTilesM>
DCP_HD void flash_fwd_block(Ctx& c, const FwdParams& p, int m_block, int h, int b, uint16_t* smem) {
  static_assert(D % 16 == 0 && D <= 256, "head_dim must be a multiple of 16, at most 256");
  static_assert(MT == 1 || MT == 2, "one or two m16 tiles per warp");
  constexpr int kStride = smem_stride(D);
  constexpr int kRows = fwd_block_rows(MT);  // query rows of the CTA
  const int tid = c.tid(), warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const SeqExtent sx = seq_extent(p, b);
  const int len_q = sx.len_q, len_k = sx.len_k, rows_q = sx.rows_q;
  const int64_t q0 = sx.q0, k0 = sx.k0;
  const int row0 = m_block * kRows;
  if (row0 >= rows_q) return;
  const int hk = h / (p.heads / p.kv_heads);
  const int64_t q_row = static_cast<int64_t>(p.heads) * D;
  const int64_t kv_row = static_cast<int64_t>(p.kv_heads) * D;

  uint16_t* sQ = smem;
  uint16_t* const sKV = sQ + kRows * kStride;  // stage s: K at sKV + 2 s kBlockN kStride, V after it

  const int q_end = row0 + kRows < len_q ? row0 + kRows : len_q;  // real rows of this block
  const int n_max = fwd_key_blocks(row0, q_end, len_q, len_k, p.causal);

  // Asynchronous copies (cp.async; rows past the real length zero-filled): the Q tile and the
  // first K, V block in one group, then block n + 1 into the other stage while block n computes.
  cp_async_tile<D, kRows, false>(c, sQ, p.q, nullptr, nullptr, q0, row0, len_q, q_row, static_cast<int64_t>(h) * D);
  const auto load_kv = [&](int n) {
    uint16_t* sk = sKV + (n % 2) * 2 * kBlockN * kStride;
    cp_async_tile<D, kBlockN, true>(c, sk, p.k, sk + kBlockN * kStride, p.v, k0, n * kBlockN, len_k, kv_row,
                              static_cast<int64_t>(hk) * D);
  };
  if (n_max > 0) load_kv(0);
  c.cp_async_commit();

  // Per m16 tile mt of the warp: rows warp * 16 MT + 16 mt + (g, g + 8) of the CTA's tile.
  float acc[MT][D / 8][4];
  DCP_UNROLL
  for (int mt = 0; mt < MT; ++mt)
    DCP_UNROLL
    for (int nt = 0; nt < D / 8; ++nt)
      for (int e = 0; e < 4; ++e) acc[mt][nt][e] = 0.f;
  float m_run[MT][2], l_run[MT][2];  // running max (base-2 units) and this lane's partial row sums
  DCP_UNROLL
  for (int mt = 0; mt < MT; ++mt)
    for (int r = 0; r < 2; ++r) {
      m_run[mt][r] = -INFINITY;
      l_run[mt][r] = 0.f;
    }
  const int warp_row = warp * 16 * MT;  // the warp's first row in the tile
  // Row r of tile mt of this lane, in the sequence (computed where needed: registers are scarce).
  const auto row_of = [&](int mt, int r) { return row0 + warp_row + 16 * mt + g + 8 * r; };

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

    // S = Q_w K^T: MT x kBlockN / 8 tiles of 16 x 8; each pair of key tiles loaded once.
    float s[MT][kBlockN / 8][4];
    DCP_UNROLL
    for (int mt = 0; mt < MT; ++mt)
      DCP_UNROLL
      for (int nt = 0; nt < kBlockN / 8; ++nt)
        for (int e = 0; e < 4; ++e) s[mt][nt][e] = 0.f;
    DCP_UNROLL
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t a[MT][4];
      DCP_UNROLL
      for (int mt = 0; mt < MT; ++mt)
        c.ldsm_x4(a[mt], sQ + (warp_row + 16 * mt + ldsm_a_row(lane)) * kStride + kk * 16 + ldsm_a_col(lane));
      DCP_UNROLL
      for (int nt = 0; nt < kBlockN / 8; nt += 2) {  // B[k][n] = K[n][k], two key tiles per load
        uint32_t kb[4];
        c.ldsm_x4(kb, sK + (nt * 8 + ldsm_b_row(lane)) * kStride + kk * 16 + ldsm_b_col(lane));
        const uint32_t b0[2] = {kb[0], kb[1]}, b1[2] = {kb[2], kb[3]};
        DCP_UNROLL
        for (int mt = 0; mt < MT; ++mt) {
          c.template mma<E>(s[mt][nt], a[mt], b0);
          c.template mma<E>(s[mt][nt + 1], a[mt], b1);
        }
      }
    }

    // Scale, mask (only where some row of the CTA does not see the whole block), running max.
    const bool unmasked = key_block_unmasked(key0, row0, len_q, len_k, p.causal);
    uint32_t pa[MT][kBlockN / 16][4];
    DCP_UNROLL
    for (int mt = 0; mt < MT; ++mt) {
      float mx[2] = {-INFINITY, -INFINITY};
      DCP_UNROLL
      for (int nt = 0; nt < kBlockN / 8; ++nt)
        for (int e = 0; e < 4; ++e) {
          const int j = key0 + nt * 8 + 2 * t + (e & 1);
          const int i = row_of(mt, e >> 1);
          const bool ok = unmasked || (j < len_k && (!p.causal || j <= i + len_k - len_q));
          s[mt][nt][e] = ok ? s[mt][nt][e] * p.scale_log2 : -INFINITY;
          mx[e >> 1] = s[mt][nt][e] > mx[e >> 1] ? s[mt][nt][e] : mx[e >> 1];
        }
      float corr[2], base[2];
      DCP_UNROLL
      for (int r = 0; r < 2; ++r) {
        float v = mx[r];
        const float v1 = c.shfl_xor(v, 1);
        v = v1 > v ? v1 : v;
        const float v2 = c.shfl_xor(v, 2);
        v = v2 > v ? v2 : v;
        const float m_new = m_run[mt][r] > v ? m_run[mt][r] : v;
        base[r] = m_new == -INFINITY ? 0.f : m_new;  // no key yet: exp2(-inf - 0) = 0 everywhere
        corr[r] = fast_exp2(m_run[mt][r] - base[r]);
        m_run[mt][r] = m_new;
        l_run[mt][r] *= corr[r];
      }
      DCP_UNROLL
      for (int nt = 0; nt < D / 8; ++nt)
        for (int e = 0; e < 4; ++e) acc[mt][nt][e] *= corr[e >> 1];

      // P = exp2(S - m) in the element type, reused as A fragments of O += P V.
      DCP_UNROLL
      for (int nt = 0; nt < kBlockN / 8; ++nt) {
        uint16_t pe[4];
        DCP_UNROLL
        for (int e = 0; e < 4; ++e) {
          const float pv = fast_exp2(s[mt][nt][e] - base[e >> 1]);
          l_run[mt][e >> 1] += pv;
          pe[e] = E::from_float(pv);
        }
        // tile 2kk: a0a1 (row g), a2a3 (row g + 8); tile 2kk + 1: a4a5, a6a7.
        pa[mt][nt / 2][(nt % 2) * 2 + 0] = pack2(pe[0], pe[1]);
        pa[mt][nt / 2][(nt % 2) * 2 + 1] = pack2(pe[2], pe[3]);
      }
    }
    DCP_UNROLL
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      DCP_UNROLL
      for (int nt = 0; nt < D / 8; nt += 2) {  // B[k][n] = V[k][n], two column tiles per load
        uint32_t vb[4];
        c.ldsm_x4_t(vb, sV + (kk * 16 + ldsm_a_row(lane)) * kStride + nt * 8 + ldsm_a_col(lane));
        const uint32_t b0[2] = {vb[0], vb[1]}, b1[2] = {vb[2], vb[3]};
        DCP_UNROLL
        for (int mt = 0; mt < MT; ++mt) {
          c.template mma<E>(acc[mt][nt], pa[mt][kk], b0);
          c.template mma<E>(acc[mt][nt + 1], pa[mt][kk], b1);
        }
      }
    }
    c.sync();  // block n's stage is free for the prefetch of block n + 2
  }
  if (n_max == 0) c.cp_async_wait_all();

  // Normalize and write the rows of this lane: out (row, cols nt*8 + 2t, +1), lse by t == 0.
  DCP_UNROLL
  for (int mt = 0; mt < MT; ++mt)
    DCP_UNROLL
    for (int r = 0; r < 2; ++r) {
      float l = l_run[mt][r];
      l += c.shfl_xor(l, 1);
      l += c.shfl_xor(l, 2);
      const int i = row_of(mt, r);
      if (i >= rows_q) continue;
      const bool live = i < len_q && !(l == 0.f);  // a NaN sum propagates (NaN inputs are not hidden)
      const float inv = live ? 1.f / l : 0.f;
      uint16_t* o = p.out + (q0 + i) * q_row + static_cast<int64_t>(h) * D;
      DCP_UNROLL
      for (int nt = 0; nt < D / 8; ++nt) {
        o[nt * 8 + 2 * t] = E::from_float(acc[mt][nt][r * 2] * inv);
        o[nt * 8 + 2 * t + 1] = E::from_float(acc[mt][nt][r * 2 + 1] * inv);
      }
      if (t == 0) p.lse[(q0 + i) * p.heads + h] = live ? m_run[mt][r] * kLn2 + fast_log(l) : -INFINITY;
    }
}

}  // namespace dcp::attn::flash
