// The bodies of the THD ring helper kernels (cuda/thd_kernels.cu): each call does one thread's
// work (one element, or one (row, head) of the LSE merge) at flat index i. The kernels run them
// in grid-stride loops on the device; the host emulator (attn/thd_emu.h) runs them over every
// index, so the CPU tests check the very code the GPU runs, against the host functions in thd.h
// and attn_tiles.h. Portable C++17, no CUDA header on the host (flash_common.h's DCP_HD).
//
// Zigzag row (TE's thd_partition_src_index per token, thd.h's zigzag_global_row): with
// cs = cu_seqlens_padded / cp and lp = cs[j+1] - cs[j] the rank's rows of sequence j, local row
// u of sequence j (cs[j] <= u < cs[j+1]) is global row
//   (u - cs[j]) + cs[j] * cp + (lp / 2) * (front half ? rank : 2 cp - 2 - rank),
// the front half being u - cs[j] < lp / 2. j is the last sequence with cs[j] <= u, which skips
// empty sequences (cs[j] == cs[j+1]).
#pragma once

#include <cmath>
#include <cstdint>

#include "attn/flash/flash_common.h"
#include "core/rng.h"

namespace dcp::attn::flash {

// Random fill (cuda/thd_kernels.cu fill_uniform): element i of seed's stream, uniform in
// [-scale, scale) from core/rng.h's counter hash, rounded to the 16-bit type E (bf16 or fp16) or
// kept in float. The device draws exactly the values the host computes with the same call, so a
// benchmark's inputs need no host generation and upload (~0.26 s per 33.5M-element tensor on the
// host, paid again at every Google Benchmark call). Never zero in float or bf16 but with
// probability ~2^-53; in fp16 |v| < 2^-25 rounds to zero (~3e-8 per element at scale 1).
DCP_HD float uniform_value(uint64_t seed, int64_t i, float scale) {
  return static_cast<float>((2.0 * to_unit(hash_u64(seed, static_cast<uint64_t>(i))) - 1.0) * scale);
}
template <class E>
DCP_HD uint16_t uniform_elem(uint64_t seed, int64_t i, float scale) {
  return E::from_float(uniform_value(seed, i, scale));
}

// The zigzag split of a batch: cu_seqlens_padded [batch + 1] (device memory in a kernel), total
// rows, cp, rank.
struct ZigzagLayout {
  const int32_t* cu_seqlens_padded;
  int batch;
  int64_t total_tokens;
  int cp;
  int rank;
};

DCP_HD int64_t zigzag_row(const ZigzagLayout& z, int64_t u) {
  int lo = 0, hi = z.batch - 1;  // binary search: the last j with cs[j] <= u
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (z.cu_seqlens_padded[mid] / z.cp <= u) lo = mid; else hi = mid - 1;
  }
  const int64_t cs = z.cu_seqlens_padded[lo] / z.cp;
  const int64_t lp = z.cu_seqlens_padded[lo + 1] / z.cp - cs;
  const int64_t off = u - cs;
  return off + cs * z.cp + (lp / 2) * (off < lp / 2 ? z.rank : 2 * z.cp - 2 - z.rank);
}

// Elements of a rank's shard: its rows times row_elems.
DCP_HD int64_t partition_elems(const ZigzagLayout& z, int64_t row_elems) {
  return z.total_tokens / z.cp * row_elems;
}

// Partition (kScatter false): local[i] = global[row(i)]; un-partition (true): global[row(i)] = local[i].
template <typename T, bool kScatter>
DCP_HD void partition_elem(const T* src, T* dst, int64_t row_elems, const ZigzagLayout& z, int64_t i) {
  const int64_t u = i / row_elems, e = i % row_elems;
  const int64_t g = zigzag_row(z, u) * row_elems + e;
  if (kScatter) dst[g] = src[i]; else dst[i] = src[g];
}

// Read-half: dst[i] = src element of row rows[i / row_elems].
template <typename T>
DCP_HD void gather_elem(const T* src, T* dst, const int64_t* rows, int64_t row_elems, int64_t i) {
  dst[i] = src[rows[i / row_elems] * row_elems + i % row_elems];
}

// LSE merge with output correction of (row, head) r = row * heads + head of the step into the
// running result at rows[row] (row itself when rows is null); the arithmetic of attn_tiles.h's
// lse_merge in fp32: l = max + log1p(exp(min - max)), out = e^(a-l) out_acc + e^(b-l) out_step.
// A step row with lse -inf did not touch the row; a running row with -inf takes the step's.
DCP_HD void lse_merge_row(const float* out_step, const float* lse_step, float* out_acc, float* lse_acc,
                          const int64_t* rows, int heads, int d, int64_t r) {
  const float b = lse_step[r];
  if (b == -INFINITY) return;
  const int64_t acc_row = rows ? rows[r / heads] * heads + r % heads : r;
  const float a = lse_acc[acc_row];
  float* o = out_acc + acc_row * d;
  const float* ob = out_step + r * d;
  if (a == -INFINITY) {
    lse_acc[acc_row] = b;
    for (int e = 0; e < d; ++e) o[e] = ob[e];
    return;
  }
  const float hi = fmaxf(a, b), lo = fminf(a, b);
  const float l = hi + log1pf(expf(lo - hi));
  const float wa = expf(a - l), wb = expf(b - l);
  for (int e = 0; e < d; ++e) o[e] = wa * o[e] + wb * ob[e];
  lse_acc[acc_row] = l;
}

// Gradient correction: acc[rows[i / row_elems] element] += step[i] (acc[i] when rows is null).
DCP_HD void add_rows_elem(const float* step, float* acc, const int64_t* rows, int64_t row_elems, int64_t i) {
  const int64_t dst = rows ? rows[i / row_elems] * row_elems + i % row_elems : i;
  acc[dst] += step[i];
}

}  // namespace dcp::attn::flash
