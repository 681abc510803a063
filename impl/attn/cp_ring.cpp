// Ring (P2P) context-parallel attention, forward and backward; see cp_attn.h for the step types
// and attn_tiles.h for the LSE merge. Communication per step: one message with this rank's
// current K|V block to r+1 and one from r-1, posted before the step's compute (overlap); in the
// backward, also the travelling dK|dV block (sent after the step's compute).
#include <algorithm>
#include <limits>
#include <vector>

#include "attn/attn_ref.h"
#include "attn/attn_tiles.h"
#include "attn/cp_attn.h"
#include "core/nvtx.h"

namespace dcp::attn {

namespace {
constexpr int kTagKvFwd = 11;
constexpr int kTagKvBwd = 12;
constexpr int kTagDkv = 13;

// Tiles of one ring step: which local Q rows meet which rows of the held KV block.
std::vector<Tile> ring_tiles(const ThdBatch& b, int cp, RingStep type) {
  std::vector<Tile> tiles;
  for (int j = 0; j < b.batch(); ++j) {
    const int64_t c = b.padded_seqlen(j) / (2 * cp);
    if (c == 0) continue;
    const int64_t ls = b.cu_seqlens_padded[j] / cp;  // same local layout on every rank
    switch (type) {
      case RingStep::diagonal:
      case RingStep::full: tiles.push_back({ls, ls + 2 * c, ls, ls + 2 * c, b.seqlen(j)}); break;
      case RingStep::lower: tiles.push_back({ls, ls + 2 * c, ls, ls + c, b.seqlen(j)}); break;
      case RingStep::upper: tiles.push_back({ls + c, ls + 2 * c, ls, ls + 2 * c, b.seqlen(j)}); break;
    }
  }
  return tiles;
}

std::vector<std::vector<int32_t>> all_positions(const ThdBatch& b, int cp) {
  std::vector<std::vector<int32_t>> pos(cp);
  for (int p = 0; p < cp; ++p) pos[p] = zigzag_positions(b, cp, p);
  return pos;
}
}  // namespace

const char* ring_step_name(RingStep t) {
  switch (t) {
    case RingStep::diagonal: return "diagonal";
    case RingStep::lower: return "lower";
    case RingStep::upper: return "upper";
    case RingStep::full: return "full";
  }
  return "?";
}

RingStep ring_step_type(int cp, int rank, int step, bool causal) {
  DCP_CHECK(rank >= 0 && rank < cp && step >= 0 && step < cp, "ring step ", step, " of rank ",
            rank, " outside cp ", cp);
  if (!causal) return RingStep::full;
  if (step == 0) return RingStep::diagonal;
  const int src = (rank - step + cp) % cp;
  return src < rank ? RingStep::lower : RingStep::upper;
}

template <typename T>
void ring_attn_fwd(comm::Communicator& g, const ThdBatch& b, const AttnShape& s,
                   std::span<const T> q, std::span<const T> k, std::span<const T> v,
                   std::span<T> out, std::span<T> lse) {
  DCP_NVTX_RANGE();
  check_cp_inputs(g, b, s, q.size(), k.size(), v.size(), out.size(), lse.size());
  const int cp = g.size(), r = g.rank();
  const int64_t tl = b.total_tokens() / cp;
  const int64_t kvn = tl * s.kv_row();
  const auto pos = all_positions(b, cp);
  std::vector<T> kv_cur(2 * kvn), kv_next(2 * kvn);
  std::copy(k.begin(), k.end(), kv_cur.begin());
  std::copy(v.begin(), v.end(), kv_cur.begin() + kvn);
  std::vector<T> out_step(out.size()), lse_step(lse.size());
  std::fill(out.begin(), out.end(), T(0));
  std::fill(lse.begin(), lse.end(), -std::numeric_limits<T>::infinity());
  for (int i = 0; i < cp; ++i) {
    const int src = (r - i + cp) % cp;
    comm::RequestPtr send, recv;
    if (i + 1 < cp) {
      send = g.isend(std::span<const T>(kv_cur), (r + 1) % cp, kTagKvFwd);
      recv = g.irecv(std::span<T>(kv_next), (r - 1 + cp) % cp, kTagKvFwd);
    }
    const auto tiles = ring_tiles(b, cp, ring_step_type(cp, r, i, s.causal));
    std::fill(lse_step.begin(), lse_step.end(), -std::numeric_limits<T>::infinity());
    tiles_fwd<T>(s, tiles, pos[r].data(), pos[src].data(), q.data(), kv_cur.data(),
                 kv_cur.data() + kvn, out_step.data(), lse_step.data());
    lse_merge<T>(s, tl, out_step.data(), lse_step.data(), out.data(), lse.data());
    if (send) {
      send->wait();
      recv->wait();
      std::swap(kv_cur, kv_next);
    }
  }
}

template <typename T>
void ring_attn_bwd(comm::Communicator& g, const ThdBatch& b, const AttnShape& s,
                   std::span<const T> q, std::span<const T> k, std::span<const T> v,
                   std::span<const T> out, std::span<const T> lse, std::span<const T> dout,
                   std::span<T> dq, std::span<T> dk, std::span<T> dv) {
  DCP_NVTX_RANGE();
  check_cp_inputs(g, b, s, q.size(), k.size(), v.size(), out.size(), lse.size());
  check_cp_inputs(g, b, s, dq.size(), dk.size(), dv.size(), dout.size(), lse.size());
  const int cp = g.size(), r = g.rank();
  const int next = (r + 1) % cp, prev = (r - 1 + cp) % cp;
  const int64_t tl = b.total_tokens() / cp;
  const int64_t kvn = tl * s.kv_row();
  const auto pos = all_positions(b, cp);
  std::vector<T> delta(lse.size());
  row_delta<T>(s, tl, out.data(), dout.data(), delta.data());
  std::fill(dq.begin(), dq.end(), T(0));
  std::vector<T> kv_cur(2 * kvn), kv_next(2 * kvn);
  std::copy(k.begin(), k.end(), kv_cur.begin());
  std::copy(v.begin(), v.end(), kv_cur.begin() + kvn);
  // dkv_part: this step's dK|dV of the held block; dkv_in: the running sum received from r-1
  // (rank r-1 held the same block one step earlier); dkv_out: the sum passed on to r+1.
  std::vector<T> dkv_part(2 * kvn), dkv_in(2 * kvn), dkv_out(2 * kvn);
  comm::RequestPtr dkv_send, dkv_recv;
  for (int i = 0; i < cp; ++i) {
    const int src = (r - i + cp) % cp;
    comm::RequestPtr send, recv;
    if (i + 1 < cp) {
      send = g.isend(std::span<const T>(kv_cur), next, kTagKvBwd);
      recv = g.irecv(std::span<T>(kv_next), prev, kTagKvBwd);
    }
    const auto tiles = ring_tiles(b, cp, ring_step_type(cp, r, i, s.causal));
    std::fill(dkv_part.begin(), dkv_part.end(), T(0));
    tiles_bwd<T>(s, tiles, pos[r].data(), pos[src].data(), q.data(), kv_cur.data(),
                 kv_cur.data() + kvn, lse.data(), delta.data(), dout.data(), dq.data(),
                 dkv_part.data(), dkv_part.data() + kvn);
    if (dkv_send) dkv_send->wait();  // dkv_out is about to be overwritten
    if (i > 0) {
      dkv_recv->wait();
      for (int64_t e = 0; e < 2 * kvn; ++e) dkv_out[e] = dkv_in[e] + dkv_part[e];
    } else {
      dkv_out = dkv_part;
    }
    if (cp > 1) {
      dkv_send = g.isend(std::span<const T>(dkv_out), next, kTagDkv);
      dkv_recv = g.irecv(std::span<T>(dkv_in), prev, kTagDkv);
    }
    if (send) {
      send->wait();
      recv->wait();
      std::swap(kv_cur, kv_next);
    }
  }
  // After the last step the block that arrives from r-1 is this rank's own, complete dK|dV.
  const std::vector<T>& mine = cp > 1 ? dkv_in : dkv_out;
  if (cp > 1) {
    dkv_recv->wait();
    dkv_send->wait();
  }
  std::copy(mine.begin(), mine.begin() + kvn, dk.begin());
  std::copy(mine.begin() + kvn, mine.end(), dv.begin());
}

#define DCP_INSTANTIATE_RING(T)                                                                \
  template void ring_attn_fwd<T>(comm::Communicator&, const ThdBatch&, const AttnShape&,       \
                                 std::span<const T>, std::span<const T>, std::span<const T>,   \
                                 std::span<T>, std::span<T>);                                  \
  template void ring_attn_bwd<T>(comm::Communicator&, const ThdBatch&, const AttnShape&,       \
                                 std::span<const T>, std::span<const T>, std::span<const T>,   \
                                 std::span<const T>, std::span<const T>, std::span<const T>,   \
                                 std::span<T>, std::span<T>, std::span<T>);
DCP_INSTANTIATE_RING(float)
DCP_INSTANTIATE_RING(double)
#undef DCP_INSTANTIATE_RING

}  // namespace dcp::attn
