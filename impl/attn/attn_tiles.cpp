// Tile attention and LSE merge, see attn_tiles.h. Same formulas as attn_ref.cpp, restricted to
// one block of keys, in the scalar type T.
#include "attn/attn_tiles.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace dcp::attn {

namespace {
template <typename T>
T tile_dot(const T* a, const T* b, int n) {
  T acc = 0;
  for (int e = 0; e < n; ++e) acc += a[e] * b[e];
  return acc;
}
bool allowed(const AttnShape& s, int32_t qp, int32_t kp, int32_t len) {
  return qp < len && kp < len && (!s.causal || kp <= qp);
}
}  // namespace

template <typename T>
void tiles_fwd(const AttnShape& s, std::span<const Tile> tiles, const int32_t* q_pos,
               const int32_t* k_pos, const T* q, const T* k, const T* v, T* out, T* lse) {
  const int d = s.head_dim;
  const T scale = static_cast<T>(s.scale());
  const T neg_inf = -std::numeric_limits<T>::infinity();
  std::vector<T> scores;
  std::vector<int64_t> keys;
  for (const Tile& tile : tiles) {
    for (int64_t i = tile.q_begin; i < tile.q_end; ++i) {
      keys.clear();
      for (int64_t p = tile.k_begin; p < tile.k_end; ++p)
        if (allowed(s, q_pos[i], k_pos[p], tile.seqlen)) keys.push_back(p);
      for (int h = 0; h < s.heads; ++h) {
        const int g = h / s.group();
        T* oi = out + (i * s.heads + h) * d;
        std::fill(oi, oi + d, T(0));
        if (keys.empty()) {
          lse[i * s.heads + h] = neg_inf;
          continue;
        }
        const T* qi = q + (i * s.heads + h) * d;
        scores.resize(keys.size());
        T m = neg_inf;
        for (size_t x = 0; x < keys.size(); ++x) {
          scores[x] = scale * tile_dot(qi, k + (keys[x] * s.kv_heads + g) * d, d);
          m = std::max(m, scores[x]);
        }
        T sum = 0;
        for (size_t x = 0; x < keys.size(); ++x) sum += std::exp(scores[x] - m);
        const T l = m + std::log(sum);
        lse[i * s.heads + h] = l;
        for (size_t x = 0; x < keys.size(); ++x) {
          const T prob = std::exp(scores[x] - l);
          const T* vp = v + (keys[x] * s.kv_heads + g) * d;
          for (int e = 0; e < d; ++e) oi[e] += prob * vp[e];
        }
      }
    }
  }
}

template <typename T>
void tiles_bwd(const AttnShape& s, std::span<const Tile> tiles, const int32_t* q_pos,
               const int32_t* k_pos, const T* q, const T* k, const T* v, const T* lse,
               const T* delta, const T* dout, T* dq, T* dk, T* dv) {
  const int d = s.head_dim;
  const T scale = static_cast<T>(s.scale());
  for (const Tile& tile : tiles) {
    for (int64_t i = tile.q_begin; i < tile.q_end; ++i) {
      for (int64_t p = tile.k_begin; p < tile.k_end; ++p) {
        if (!allowed(s, q_pos[i], k_pos[p], tile.seqlen)) continue;
        for (int h = 0; h < s.heads; ++h) {
          const int g = h / s.group();
          const int64_t qrow = (i * s.heads + h) * d;
          const int64_t krow = (p * s.kv_heads + g) * d;
          const T prob = std::exp(scale * tile_dot(q + qrow, k + krow, d) - lse[i * s.heads + h]);
          const T ds = prob * (tile_dot(dout + qrow, v + krow, d) - delta[i * s.heads + h]);
          for (int e = 0; e < d; ++e) {
            dq[qrow + e] += scale * ds * k[krow + e];
            dk[krow + e] += scale * ds * q[qrow + e];
            dv[krow + e] += prob * dout[qrow + e];
          }
        }
      }
    }
  }
}

template <typename T>
void lse_merge(const AttnShape& s, int64_t rows, const T* out_step, const T* lse_step, T* out_acc,
               T* lse_acc) {
  const int d = s.head_dim;
  const T neg_inf = -std::numeric_limits<T>::infinity();
  for (int64_t r = 0; r < rows * s.heads; ++r) {
    const T b = lse_step[r];
    if (b == neg_inf) continue;  // the step did not touch this row
    const T a = lse_acc[r];
    T* o = out_acc + r * d;
    const T* ob = out_step + r * d;
    if (a == neg_inf) {
      lse_acc[r] = b;
      std::copy(ob, ob + d, o);
      continue;
    }
    const T hi = std::max(a, b), lo = std::min(a, b);
    const T l = hi + std::log1p(std::exp(lo - hi));
    const T wa = std::exp(a - l), wb = std::exp(b - l);
    for (int e = 0; e < d; ++e) o[e] = wa * o[e] + wb * ob[e];
    lse_acc[r] = l;
  }
}

template <typename T>
void row_delta(const AttnShape& s, int64_t rows, const T* out, const T* dout, T* delta) {
  for (int64_t r = 0; r < rows * s.heads; ++r)
    delta[r] = tile_dot(dout + r * s.head_dim, out + r * s.head_dim, s.head_dim);
}

#define DCP_INSTANTIATE_TILES(T)                                                              \
  template void tiles_fwd<T>(const AttnShape&, std::span<const Tile>, const int32_t*,         \
                             const int32_t*, const T*, const T*, const T*, T*, T*);           \
  template void tiles_bwd<T>(const AttnShape&, std::span<const Tile>, const int32_t*,         \
                             const int32_t*, const T*, const T*, const T*, const T*,          \
                             const T*, const T*, T*, T*, T*);                                 \
  template void lse_merge<T>(const AttnShape&, int64_t, const T*, const T*, T*, T*);          \
  template void row_delta<T>(const AttnShape&, int64_t, const T*, const T*, T*);
DCP_INSTANTIATE_TILES(float)
DCP_INSTANTIATE_TILES(double)
#undef DCP_INSTANTIATE_TILES

}  // namespace dcp::attn
