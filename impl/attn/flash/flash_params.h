// Parameters of the tensor-core varlen attention kernels (one struct across the host/device
// boundary, FlashAttention's Flash_fwd_params kept minimal). Portable C++17; the pointers are
// device memory for the CUDA kernels and host memory for the emulator (attn/flash_emu.h).
//
// Packed THD layout (impl/attn/thd.h), 16-bit elements (Bf16 or Fp16 bits, flash_common.h):
//   q, out : [rows_q, heads, head_dim]      k, v : [rows_k, kv_heads, head_dim]
//   lse    : [rows_q, heads] float32, natural log
// Sequence b's queries are rows [seqstart_q[b], seqstart_q[b] + len_q(b)) with
// len_q(b) = cu_seqlens_q[b + 1] - cu_seqlens_q[b]; rows [seqstart_q[b] + len_q(b),
// seqstart_q[b + 1]) are its padding (out = 0, lse = -inf). Keys likewise with the _k arrays
// (padding keys are never read). seqstart = cu_seqlens_padded of a ThdBatch.
// Queries and keys may be different batches with the same sequence count: the ring's
// rectangular steps (all of Q x the front half of KV; the back half of Q x all of KV) pass the
// halves, read into their own THD buffers as TransformerEngine does (thd_read_half, thd.h).
// Mask: query i (0-based in its sequence) attends key j iff j < len_k and, when causal,
// j <= i + len_k - len_q (bottom-right alignment, FlashAttention >= 2.1; the usual causal mask
// when len_q = len_k). A row that attends no key gets out = 0, lse = -inf.
// GQA: query head h reads kv head h / (heads / kv_heads).
#pragma once

#include <cstdint>

#include "attn/flash/flash_common.h"

namespace dcp::attn::flash {

// The problem both directions share: the two batches' arrays and the shape.
struct VarlenProblem {
  const int32_t* cu_seqlens_q = nullptr;
  const int32_t* cu_seqlens_k = nullptr;
  const int32_t* seqstart_q = nullptr;
  const int32_t* seqstart_k = nullptr;
  int batch = 0;
  int heads = 1;
  int kv_heads = 1;
  int head_dim = 64;  // 64 or 128 (the kernels are instantiated for these)
  float scale_log2 = 0;  // softmax scale * log2(e): scores are kept in base-2 exponent units
  bool causal = true;
};

// Whether every query row from row0 on attends every key of [key0, key0 + kBlockN) under the
// mask above, rows past len_q aside: the block lies inside len_k and, when causal, its last key is
// at or before row0's last key. (The backward also needs its query block inside len_q.)
DCP_HD bool key_block_unmasked(int key0, int row0, int len_q, int len_k, bool causal) {
  return key0 + kBlockN <= len_k && (!causal || key0 + kBlockN - 1 <= row0 + len_k - len_q);
}

// The forward's grid: m_blocks query blocks of 16 * tiles_m * kWarps rows (flash_common.h), the
// two together, so that a launch gets the block count of its own tile count when it is built by
// flash_fwd_grid (attn/flash_emu.h) from the query batch, as every caller does.
struct FwdGrid {
  int m_blocks = 0;
  int tiles_m = kFwdTilesM;
};

struct FwdParams : VarlenProblem {
  const uint16_t* q = nullptr;
  const uint16_t* k = nullptr;
  const uint16_t* v = nullptr;
  uint16_t* out = nullptr;
  float* lse = nullptr;
};

// Sequence b of a problem's two batches: real lengths, first rows and padded extents.
struct SeqExtent {
  int len_q, len_k;    // real queries and keys
  int64_t q0, k0;      // row of the first query / key
  int rows_q, rows_k;  // padded extents (rows written as padding past the real ones)
};
DCP_HD SeqExtent seq_extent(const VarlenProblem& p, int b) {
  return {p.cu_seqlens_q[b + 1] - p.cu_seqlens_q[b], p.cu_seqlens_k[b + 1] - p.cu_seqlens_k[b], p.seqstart_q[b],
          p.seqstart_k[b],  p.seqstart_q[b + 1] - p.seqstart_q[b], p.seqstart_k[b + 1] - p.seqstart_k[b]};
}

// cp.async of a tile of `rows` rows of head_dim D (shared row stride smem_stride(D)) from one or
// two tensors of the same layout: tile row r is sequence row first + r, at global row
// base + first + r, `row_elems` apart, from column col0; rows at or past `len` are zero-filled
// (and read nothing: their source is row base). kTwo false: a only (b ignored). Not committed.
template <int D, int kRows, bool kTwo, class Ctx>
DCP_HD void cp_async_tile(Ctx& c, uint16_t* a_dst, const uint16_t* a_src, uint16_t* b_dst, const uint16_t* b_src,
                          int64_t base, int first, int len, int64_t row_elems, int64_t col0) {
  constexpr int kStride = smem_stride(D);
  for (int idx = c.tid(); idx < kRows * (D / 8); idx += kThreads) {
    const int r = idx / (D / 8);
    const int col = (idx % (D / 8)) * 8;
    const int i = first + r;
    const int64_t off = (base + (i < len ? i : 0)) * row_elems + col0 + col;
    c.cp_async16(a_dst + r * kStride + col, a_src + off, i < len);
    if constexpr (kTwo) c.cp_async16(b_dst + r * kStride + col, b_src + off, i < len);
  }
}

}  // namespace dcp::attn::flash
