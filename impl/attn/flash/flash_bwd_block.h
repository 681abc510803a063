// The tensor-core varlen attention backward: the work of one CTA of each of its three passes,
// one source for the CUDA kernels (cuda/flash_bwd.cu) and the host emulator (flash_emu.cpp), as
// the forward (flash_fwd_block.h).
//
// Algorithm (FlashAttention-2, Dao 2023, Algorithm 2: parallel over key blocks, dQ accumulated
// in fp32 across them):
//   1. prep:  delta_i = <dO_i, O_i> per (query row, head), fp32 (0 on padding rows).
//   2. main, one CTA per (key block of kBlockN keys, kv head, sequence): for each query head of
//      the kv group and each query block of kBlockM rows that can see the key block, with the
//      K, V tile in shared memory and Q, dO, lse, delta of the query block loaded:
//        each warp (16 of the keys): S^T = K Q^T, P^T = exp2(S^T scale log2 e - lse log2 e)
//        (masked to 0), dV += P^T dO, dP^T = V dO^T, dS^T = P^T (dP^T - delta), dK += dS^T Q;
//        P^T and dS^T are rounded to the element type and reused from the accumulator registers
//        as A operands (flash_common.h); dS^T also goes to shared memory;
//        then each warp (16 of the queries): dQ_part = dS K, added in fp32 to dq_accum (atomic:
//        other key blocks add to the same rows).
//      dK = scale dK, dV written once per CTA (GQA: the group's query heads summed in the same
//      fp32 registers), padding key rows 0.
//   3. dq: dq = dq_accum in the element type (dq_accum already carries the softmax scale).
// The mask is the forward's (flash_params.h): key j of query i iff i < len_q, j < len_k and,
// causal, j <= i + len_k - len_q; a pair of blocks wholly inside it skips it. Fragments by
// ldmatrix as in the forward (the transposed loads for the k-major operands). Copies by cp.async
// in two stages: K, V with the first query block; each next query block's Q, dO (and its lse,
// delta through registers) into the other stage while the current block computes.
#pragma once

#include "attn/flash/flash_common.h"
#include "attn/flash/flash_params.h"

namespace dcp::attn::flash {

struct BwdParams : VarlenProblem {
  const uint16_t* q = nullptr;     // [rows_q, heads, d]
  const uint16_t* k = nullptr;     // [rows_k, kv_heads, d]
  const uint16_t* v = nullptr;
  const uint16_t* out = nullptr;   // the forward's output [rows_q, heads, d]
  const uint16_t* dout = nullptr;  // [rows_q, heads, d]
  const float* lse = nullptr;      // the forward's lse [rows_q, heads] (natural log)
  float* delta = nullptr;          // workspace [rows_q, heads]
  float* dq_accum = nullptr;       // workspace [rows_q, heads, d], zeroed before the main pass
  uint16_t* dq = nullptr;          // [rows_q, heads, d]
  uint16_t* dk = nullptr;          // [rows_k, kv_heads, d]
  uint16_t* dv = nullptr;
  int64_t rows_q = 0;  // total query rows (seqstart_q[batch])
  float scale = 0;     // softmax scale (scale_log2 = scale * log2 e)
};

// Shared memory of a main-pass CTA in elements of 16 bits: K, V tiles, two stages of the query
// block's Q, dO tiles, the dS^T tile and two stages of the block's lse, delta (2 x kBlockM floats
// each). d = 128: 114,688 bytes, so two CTAs fit an H100 SM (2 x (114,688 + 1,024 reserved per
// block) <= 233,472, the CUDA C Programming Guide's compute capability 9.0 table; one on an
// A100's 167,936); d = 64: 65,536 bytes.
DCP_HD constexpr int bwd_dst_stride() { return kBlockM + 8; }
DCP_HD constexpr int bwd_smem_elems(int head_dim) {
  return (2 * kBlockN + 4 * kBlockM) * smem_stride(head_dim) + kBlockN * bwd_dst_stride() + 2 * (2 * kBlockM * 2);
}

// Sequence whose padded query extent holds `row` (binary search over seqstart; empty sequences
// share their start with the next one and are skipped that way).
DCP_HD int bwd_seq_of_row(const int32_t* start, int batch, int64_t row) {
  int lo = 0, hi = batch - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (start[mid] <= row) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

// Pass 1: one (row, head) pair per thread, `pair` = row * heads + head (the launcher's grid covers
// rows_q * heads pairs).
template <class E, int D>
DCP_HD void flash_bwd_prep(const BwdParams& p, int64_t pair) {
  if (pair >= p.rows_q * p.heads) return;
  const int64_t row = pair / p.heads;
  const int b = bwd_seq_of_row(p.seqstart_q, p.batch, row);
  const int len_q = p.cu_seqlens_q[b + 1] - p.cu_seqlens_q[b];
  float acc = 0.f;
  if (row - p.seqstart_q[b] < len_q) {
    const uint16_t* o = p.out + pair * D;
    const uint16_t* g = p.dout + pair * D;
    for (int e = 0; e < D; ++e) acc += E::to_float(o[e]) * E::to_float(g[e]);
  }
  p.delta[pair] = acc;
}

// Pass 3: each thread one element of dq.
template <class E>
DCP_HD void flash_bwd_dq(const BwdParams& p, int64_t idx) {
  if (idx >= p.rows_q * p.heads * p.head_dim) return;
  p.dq[idx] = E::from_float(p.dq_accum[idx]);
}

template <class Ctx, class E, int D>
DCP_HD void flash_bwd_block(Ctx& c, const BwdParams& p, int n_block, int hk, int b, uint16_t* smem) {
  static_assert(D % 16 == 0 && D <= 256, "head_dim must be a multiple of 16, at most 256");
  constexpr int kStride = smem_stride(D);
  constexpr int kDst = bwd_dst_stride();
  const int tid = c.tid(), warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const SeqExtent sx = seq_extent(p, b);
  const int len_q = sx.len_q, len_k = sx.len_k, rows_k = sx.rows_k;
  const int64_t q0 = sx.q0, k0 = sx.k0;
  const int key0 = n_block * kBlockN;
  if (key0 >= rows_k) return;
  const int group = p.heads / p.kv_heads;
  const int64_t q_row = static_cast<int64_t>(p.heads) * D;
  const int64_t kv_row = static_cast<int64_t>(p.kv_heads) * D;
  const int shift = len_k - len_q;  // causal: key j of query i iff j <= i + shift

  uint16_t* sK = smem;
  uint16_t* sV = sK + kBlockN * kStride;
  uint16_t* const sQ0 = sV + kBlockN * kStride;  // stage s: Q at sQ0 + 2 s kBlockM kStride, dO after it
  uint16_t* sdS = sQ0 + 4 * kBlockM * kStride;   // [kBlockN keys][kBlockM queries]
  float* const sStats0 = reinterpret_cast<float*>(sdS + kBlockN * kDst);  // stage s: lse, delta at + 2 s kBlockM

  // K, V tiles (rows past len_k as zeros), asynchronous: in the first query block's group.
  cp_async_tile<D, kBlockN, true>(c, sK, p.k, sV, p.v, k0, key0, len_k, kv_row, static_cast<int64_t>(hk) * D);

  float dk[D / 8][4], dv[D / 8][4];
  DCP_UNROLL
  for (int nt = 0; nt < D / 8; ++nt)
    DCP_UNROLL
    for (int e = 0; e < 4; ++e) dk[nt][e] = dv[nt][e] = 0.f;
  const int r_lo = warp * 16 + g;  // the warp's key rows (r_lo, r_lo + 8) in the tile
  const int j_row[2] = {key0 + r_lo, key0 + r_lo + 8};

  // Query blocks that can see this key block: all, or causal from the first query i with
  // i + shift >= key0; none when the key block holds no real key.
  int m_first = 0;
  if (p.causal && key0 - shift > 0) m_first = (key0 - shift) / kBlockM;
  const int m_end = key0 < len_k ? (len_q + kBlockM - 1) / kBlockM : 0;

  // The query blocks' Q and dO tiles by cp.async into a stage (rows past len_q as zeros), their
  // lse (base-2 units) and delta through registers into the stage's floats: the next block (the
  // next query block, or the first of the next query head) is fetched into the other stage while
  // the current one computes.
  const auto load_q = [&](int hq, int m, int stage) {
    uint16_t* const sq = sQ0 + stage * 2 * kBlockM * kStride;
    uint16_t* const sdo = sq + kBlockM * kStride;
    // cp_async_tile's loop, written out: through the helper ptxas (CUDA 13, sm_90a) spilled 40
    // bytes at d = 128 and 28 at d = 64 here instead of 16 and none.
    for (int idx = tid; idx < kBlockM * (D / 8); idx += kThreads) {
      const int r = idx / (D / 8);
      const int col = (idx % (D / 8)) * 8;
      const int i = m * kBlockM + r;
      const int64_t off = (q0 + (i < len_q ? i : 0)) * q_row + static_cast<int64_t>(hq) * D + col;
      c.cp_async16(sq + r * kStride + col, p.q + off, i < len_q);
      c.cp_async16(sdo + r * kStride + col, p.dout + off, i < len_q);
    }
    c.cp_async_commit();
  };
  float lse_next = 0.f, delta_next = 0.f;  // row tid of the next block (tid < kBlockM)
  const auto lse_of = [&](int hq, int m) {
    const int i = m * kBlockM + tid;
    return tid < kBlockM && i < len_q ? p.lse[(q0 + i) * p.heads + hq] * kLog2e : 0.f;
  };
  const auto delta_of = [&](int hq, int m) {
    const int i = m * kBlockM + tid;
    return tid < kBlockM && i < len_q ? p.delta[(q0 + i) * p.heads + hq] : 0.f;
  };
  const auto store_stats = [&](int stage) {
    if (tid < kBlockM) {
      c.st_shared(sStats0 + stage * 2 * kBlockM + tid, lse_next);
      c.st_shared(sStats0 + stage * 2 * kBlockM + kBlockM + tid, delta_next);
    }
  };
  const int hq_first = hk * group, hq_end = (hk + 1) * group;
  if (m_first < m_end) {
    load_q(hq_first, m_first, 0);  // one group with K, V
    lse_next = lse_of(hq_first, m_first);
    delta_next = delta_of(hq_first, m_first);
    store_stats(0);
  } else {
    c.cp_async_commit();
  }

  int stage = 0;
  for (int hq = hq_first; hq < hq_end; ++hq) {
    for (int m = m_first; m < m_end; ++m, stage ^= 1) {
      const int i0 = m * kBlockM;
      c.cp_async_wait_all();  // this thread's copies of the block (and, the first time, K and V)
      c.sync();  // every thread's copies and stats visible; the previous block no longer reads the other stage or dS^T
      // Prefetch the next block into the other stage.
      const bool next = m + 1 < m_end || hq + 1 < hq_end;
      if (next) {
        const int hq_n = m + 1 < m_end ? hq : hq + 1, m_n = m + 1 < m_end ? m + 1 : m_first;
        load_q(hq_n, m_n, stage ^ 1);
        lse_next = lse_of(hq_n, m_n);
        delta_next = delta_of(hq_n, m_n);
      }
      const uint16_t* const sQ = sQ0 + stage * 2 * kBlockM * kStride;
      const uint16_t* const sdO = sQ + kBlockM * kStride;
      const float* const sLse = sStats0 + stage * 2 * kBlockM;
      const float* const sDelta = sLse + kBlockM;
      // Every (query, key) pair of the two blocks attended: the mask is skipped.
      // (key_block_unmasked of flash_params.h, written out with the shift at hand: through the
      // call ptxas spilled 24 / 56 bytes at d = 128 instead of 8 / 16.)
      const bool unmasked = i0 + kBlockM <= len_q && key0 + kBlockN <= len_k &&
                            (!p.causal || key0 + kBlockN - 1 <= i0 + shift);

      // S^T = K_w Q^T (16 keys x kBlockM queries).
      float s[kBlockM / 8][4];
      DCP_UNROLL
      for (int nt = 0; nt < kBlockM / 8; ++nt)
        DCP_UNROLL
        for (int e = 0; e < 4; ++e) s[nt][e] = 0.f;
      DCP_UNROLL
      for (int kk = 0; kk < D / 16; ++kk) {
        uint32_t a[4];
        c.ldsm_x4(a, sK + (warp * 16 + ldsm_a_row(lane)) * kStride + kk * 16 + ldsm_a_col(lane));
        DCP_UNROLL
        for (int nt = 0; nt < kBlockM / 8; nt += 2) {  // B[k][n] = Q[n][k]
          uint32_t qb[4];
          c.ldsm_x4(qb, sQ + (nt * 8 + ldsm_b_row(lane)) * kStride + kk * 16 + ldsm_b_col(lane));
          const uint32_t b0[2] = {qb[0], qb[1]}, b1[2] = {qb[2], qb[3]};
          c.template mma<E>(s[nt], a, b0);
          c.template mma<E>(s[nt + 1], a, b1);
        }
      }
      // P^T (masked to 0), as A fragments for dV += P^T dO.
      uint32_t pa[kBlockM / 16][4];
      DCP_UNROLL
      for (int nt = 0; nt < kBlockM / 8; ++nt) {
        uint16_t pe[4];
        DCP_UNROLL
        for (int e = 0; e < 4; ++e) {
          const int il = nt * 8 + 2 * t + (e & 1);  // query in the block
          const int i = i0 + il;
          const int j = j_row[e >> 1];
          const bool ok = unmasked || (i < len_q && j < len_k && (!p.causal || j <= i + shift));
          s[nt][e] = ok ? fast_exp2(s[nt][e] * p.scale_log2 - c.ld_shared(sLse + il)) : 0.f;  // s now holds P^T
          pe[e] = E::from_float(s[nt][e]);
        }
        pa[nt / 2][(nt % 2) * 2 + 0] = pack2(pe[0], pe[1]);
        pa[nt / 2][(nt % 2) * 2 + 1] = pack2(pe[2], pe[3]);
      }
      DCP_UNROLL
      for (int kk = 0; kk < kBlockM / 16; ++kk)
        DCP_UNROLL
        for (int nt = 0; nt < D / 8; nt += 2) {  // B[k][n] = dO[k][n]
          uint32_t ob[4];
          c.ldsm_x4_t(ob, sdO + (kk * 16 + ldsm_a_row(lane)) * kStride + nt * 8 + ldsm_a_col(lane));
          const uint32_t b0[2] = {ob[0], ob[1]}, b1[2] = {ob[2], ob[3]};
          c.template mma<E>(dv[nt], pa[kk], b0);
          c.template mma<E>(dv[nt + 1], pa[kk], b1);
        }

      // dP^T = V_w dO^T; dS^T = P^T (dP^T - delta).
      float dp[kBlockM / 8][4];
      DCP_UNROLL
      for (int nt = 0; nt < kBlockM / 8; ++nt)
        DCP_UNROLL
        for (int e = 0; e < 4; ++e) dp[nt][e] = 0.f;
      DCP_UNROLL
      for (int kk = 0; kk < D / 16; ++kk) {
        uint32_t a[4];
        c.ldsm_x4(a, sV + (warp * 16 + ldsm_a_row(lane)) * kStride + kk * 16 + ldsm_a_col(lane));
        DCP_UNROLL
        for (int nt = 0; nt < kBlockM / 8; nt += 2) {  // B[k][n] = dO[n][k]
          uint32_t ob[4];
          c.ldsm_x4(ob, sdO + (nt * 8 + ldsm_b_row(lane)) * kStride + kk * 16 + ldsm_b_col(lane));
          const uint32_t b0[2] = {ob[0], ob[1]}, b1[2] = {ob[2], ob[3]};
          c.template mma<E>(dp[nt], a, b0);
          c.template mma<E>(dp[nt + 1], a, b1);
        }
      }
      uint32_t da[kBlockM / 16][4];
      DCP_UNROLL
      for (int nt = 0; nt < kBlockM / 8; ++nt) {
        uint16_t de[4];
        DCP_UNROLL
        for (int e = 0; e < 4; ++e) {
          const int il = nt * 8 + 2 * t + (e & 1);
          de[e] = E::from_float(s[nt][e] * (dp[nt][e] - c.ld_shared(sDelta + il)));
          c.st_shared(sdS + (r_lo + 8 * (e >> 1)) * kDst + il, de[e]);
        }
        da[nt / 2][(nt % 2) * 2 + 0] = pack2(de[0], de[1]);
        da[nt / 2][(nt % 2) * 2 + 1] = pack2(de[2], de[3]);
      }
      // dK += dS^T Q.
      DCP_UNROLL
      for (int kk = 0; kk < kBlockM / 16; ++kk)
        DCP_UNROLL
        for (int nt = 0; nt < D / 8; nt += 2) {  // B[k][n] = Q[k][n]
          uint32_t qb[4];
          c.ldsm_x4_t(qb, sQ + (kk * 16 + ldsm_a_row(lane)) * kStride + nt * 8 + ldsm_a_col(lane));
          const uint32_t b0[2] = {qb[0], qb[1]}, b1[2] = {qb[2], qb[3]};
          c.template mma<E>(dk[nt], da[kk], b0);
          c.template mma<E>(dk[nt + 1], da[kk], b1);
        }
      if (next) store_stats(stage ^ 1);  // the loads above had the products' time to arrive
      c.sync();  // dS^T complete

      // dQ (this warp's 16 queries) = dS K over the block's keys, added to dq_accum * scale.
      float dq[D / 8][4];
      DCP_UNROLL
      for (int nt = 0; nt < D / 8; ++nt)
        DCP_UNROLL
        for (int e = 0; e < 4; ++e) dq[nt][e] = 0.f;
      const int q_lo = warp * 16 + g;  // the warp's query rows in the block
      DCP_UNROLL
      for (int kk = 0; kk < kBlockN / 16; ++kk) {
        uint32_t a[4];  // A[q][key] = dS[q][key] = sdS[key][q]: a transposed load
        c.ldsm_x4_t(a, sdS + (kk * 16 + ldsm_b_row(lane)) * kDst + warp * 16 + ldsm_b_col(lane));
        DCP_UNROLL
        for (int nt = 0; nt < D / 8; nt += 2) {  // B[k][n] = K[k][n]
          uint32_t kb[4];
          c.ldsm_x4_t(kb, sK + (kk * 16 + ldsm_a_row(lane)) * kStride + nt * 8 + ldsm_a_col(lane));
          const uint32_t b0[2] = {kb[0], kb[1]}, b1[2] = {kb[2], kb[3]};
          c.template mma<E>(dq[nt], a, b0);
          c.template mma<E>(dq[nt + 1], a, b1);
        }
      }
      DCP_UNROLL
      for (int r = 0; r < 2; ++r) {
        const int i = i0 + q_lo + 8 * r;
        if (i >= len_q) continue;
        float* acc = p.dq_accum + ((q0 + i) * p.heads + hq) * D;
        DCP_UNROLL
        for (int nt = 0; nt < D / 8; ++nt) {
          c.atomic_add(acc + nt * 8 + 2 * t, dq[nt][2 * r] * p.scale);
          c.atomic_add(acc + nt * 8 + 2 * t + 1, dq[nt][2 * r + 1] * p.scale);
        }
      }
    }
  }

  c.cp_async_wait_all();  // nothing left in flight when the CTA ends (K, V when no block saw them)

  // dK = scale dK, dV; padding key rows (len_k <= j < rows_k) get 0.
  DCP_UNROLL
  for (int r = 0; r < 2; ++r) {
    const int j = j_row[r];
    if (j >= rows_k) continue;
    const bool live = j < len_k;
    const int64_t off = (k0 + j) * kv_row + static_cast<int64_t>(hk) * D;
    DCP_UNROLL
    for (int nt = 0; nt < D / 8; ++nt)
      DCP_UNROLL
      for (int x = 0; x < 2; ++x) {
        const int col = nt * 8 + 2 * t + x;
        p.dk[off + col] = E::from_float(live ? dk[nt][2 * r + x] * p.scale : 0.f);
        p.dv[off + col] = E::from_float(live ? dv[nt][2 * r + x] : 0.f);
      }
  }
}

}  // namespace dcp::attn::flash
