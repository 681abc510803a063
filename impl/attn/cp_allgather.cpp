// All-gather context-parallel attention (reference/megatron-dynamic-cp.md §4.3): K and V are
// all-gathered over the group and put back in sequence order (unshard_rows); each rank then
// computes its front chunk r against keys [0, (r+1)c) and its back chunk 2cp-1-r against keys
// [0, (2cp-r)c) of every sequence (the causal prefixes; the tile mask handles the diagonal chunk
// and padding). No merge is needed. Backward: recompute the gather, accumulate dK/dV for the
// whole sequence, put them in shard order and reduce-scatter (sum in rank order).
#include <algorithm>
#include <limits>
#include <vector>

#include "attn/attn_tiles.h"
#include "attn/cp_attn.h"
#include "core/nvtx.h"

namespace dcp::attn {

namespace {
std::vector<Tile> allgather_tiles(const ThdBatch& b, int cp, int r, bool causal) {
  std::vector<Tile> tiles;
  for (int j = 0; j < b.batch(); ++j) {
    const int64_t c = b.padded_seqlen(j) / (2 * cp);
    if (c == 0) continue;
    const int64_t ls = b.cu_seqlens_padded[j] / cp;  // local rows of the sequence
    const int64_t gs = b.cu_seqlens_padded[j];       // global rows of the sequence
    const int32_t len = b.seqlen(j);
    if (!causal) {
      tiles.push_back({ls, ls + 2 * c, gs, gs + 2 * cp * c, len});
    } else {
      tiles.push_back({ls, ls + c, gs, gs + (r + 1) * c, len});
      tiles.push_back({ls + c, ls + 2 * c, gs, gs + (2 * cp - r) * c, len});
    }
  }
  return tiles;
}

// Gathers this rank's shard of a [Tl, row] tensor from every rank: [T, row] in sequence order.
template <typename T>
std::vector<T> gather_sequence_order(comm::Communicator& g, const ThdBatch& b,
                                     std::span<const T> local, int64_t row) {
  std::vector<T> shards(local.size() * g.size());
  g.all_gather(local, std::span<T>(shards));
  return unshard_rows(std::span<const T>(shards), row, b, g.size());
}
}  // namespace

template <typename T>
void allgather_attn_fwd(comm::Communicator& g, const ThdBatch& b, const AttnShape& s,
                        std::span<const T> q, std::span<const T> k, std::span<const T> v,
                        std::span<T> out, std::span<T> lse) {
  DCP_NVTX_RANGE();
  check_cp_inputs(g, b, s, q.size(), k.size(), v.size(), out.size(), lse.size());
  const int cp = g.size(), r = g.rank();
  const auto k_full = gather_sequence_order(g, b, k, s.kv_row());
  const auto v_full = gather_sequence_order(g, b, v, s.kv_row());
  const auto q_pos = zigzag_positions(b, cp, r);
  const auto k_pos = thd_positions(b);
  std::fill(out.begin(), out.end(), T(0));
  std::fill(lse.begin(), lse.end(), -std::numeric_limits<T>::infinity());
  const auto tiles = allgather_tiles(b, cp, r, s.causal);
  tiles_fwd<T>(s, tiles, q_pos.data(), k_pos.data(), q.data(), k_full.data(), v_full.data(),
               out.data(), lse.data());
}

template <typename T>
void allgather_attn_bwd(comm::Communicator& g, const ThdBatch& b, const AttnShape& s,
                        std::span<const T> q, std::span<const T> k, std::span<const T> v,
                        std::span<const T> out, std::span<const T> lse, std::span<const T> dout,
                        std::span<T> dq, std::span<T> dk, std::span<T> dv) {
  DCP_NVTX_RANGE();
  check_cp_inputs(g, b, s, q.size(), k.size(), v.size(), out.size(), lse.size());
  check_cp_inputs(g, b, s, dq.size(), dk.size(), dv.size(), dout.size(), lse.size());
  const int cp = g.size(), r = g.rank();
  const int64_t tl = b.total_tokens() / cp;
  const int64_t kvn = tl * s.kv_row();
  const auto k_full = gather_sequence_order(g, b, k, s.kv_row());
  const auto v_full = gather_sequence_order(g, b, v, s.kv_row());
  const auto q_pos = zigzag_positions(b, cp, r);
  const auto k_pos = thd_positions(b);
  std::vector<T> delta(lse.size());
  row_delta<T>(s, tl, out.data(), dout.data(), delta.data());
  std::fill(dq.begin(), dq.end(), T(0));
  std::vector<T> dk_full(k_full.size(), T(0)), dv_full(v_full.size(), T(0));
  const auto tiles = allgather_tiles(b, cp, r, s.causal);
  tiles_bwd<T>(s, tiles, q_pos.data(), k_pos.data(), q.data(), k_full.data(), v_full.data(),
               lse.data(), delta.data(), dout.data(), dq.data(), dk_full.data(), dv_full.data());
  // Shard order for the reduce-scatter: block p = [dK rows of rank p | dV rows of rank p].
  std::vector<T> send(static_cast<size_t>(cp) * 2 * kvn);
  for (int p = 0; p < cp; ++p) {
    const auto dkp = shard_rows(std::span<const T>(dk_full), s.kv_row(), b, cp, p);
    const auto dvp = shard_rows(std::span<const T>(dv_full), s.kv_row(), b, cp, p);
    std::copy(dkp.begin(), dkp.end(), send.begin() + p * 2 * kvn);
    std::copy(dvp.begin(), dvp.end(), send.begin() + p * 2 * kvn + kvn);
  }
  std::vector<T> mine(2 * kvn);
  g.reduce_scatter(std::span<const T>(send), std::span<T>(mine));
  std::copy(mine.begin(), mine.begin() + kvn, dk.begin());
  std::copy(mine.begin() + kvn, mine.end(), dv.begin());
}

#define DCP_INSTANTIATE_AG(T)                                                                  \
  template void allgather_attn_fwd<T>(comm::Communicator&, const ThdBatch&, const AttnShape&,  \
                                      std::span<const T>, std::span<const T>,                  \
                                      std::span<const T>, std::span<T>, std::span<T>);         \
  template void allgather_attn_bwd<T>(comm::Communicator&, const ThdBatch&, const AttnShape&,  \
                                      std::span<const T>, std::span<const T>,                  \
                                      std::span<const T>, std::span<const T>,                  \
                                      std::span<const T>, std::span<const T>, std::span<T>,    \
                                      std::span<T>, std::span<T>);
DCP_INSTANTIATE_AG(float)
DCP_INSTANTIATE_AG(double)
#undef DCP_INSTANTIATE_AG

}  // namespace dcp::attn
