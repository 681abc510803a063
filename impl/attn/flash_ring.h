// Ring context parallelism over the tensor-core attention kernels (flash/), all `cp` ranks of one
// CP group as virtual ranks in one process: the THD zigzag ring of TransformerEngine's
// AttnFuncWithCPAndKVP2P (reference/megatron-dynamic-cp.md §4) with 16-bit kernels per step and
// fp32 corrections, one orchestration for two backends: the host emulator (flash_emu.h, CPU
// tests) and the GPU (cuda/flash_ring_cuda.cpp: device buffers, the P2P transfers as
// device-to-device copies, TE's THD helper kernels for read-half, LSE merge and the gradient
// corrections).
//
// Forward of rank r, step i, KV of src = (r - i) mod cp (ring_step_type, cp_attn.h):
//   diagonal (i = 0, causal): all local Q x all local KV, causal on the local rows (front chunk
//            then back chunk: local order is position order);
//   lower (src < r): all local Q x the front half of src's KV, no mask;
//   upper (src > r): the back half of local Q x all of src's KV, no mask;
//   full (non-causal problem): all x all, no mask.
// Each step's kernel writes out (16-bit) and lse (fp32); out_acc (fp32) and lse_acc are corrected
// step by step with the LSE merge (attn_tiles.h), the upper step's at the back-half rows; the
// result is out_acc rounded once. Backward per step: the kernel's backward with the final out,
// lse and dout (the halves read for the upper step), its dq added (fp32) into the rank's dq
// accumulator, its dk, dv into src's (the travelling dKV of TE, added at src directly: the same
// sums), at the front-half rows for the lower step. Halves are read into their own THD buffers
// (ring_layout) as TE's thd_read_half_tensor does.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "attn/attn_shape.h"
#include "attn/bf16_rule.h"
#include "attn/cp_attn.h"
#include "attn/thd.h"

namespace dcp::attn {

// The THD batches of rank `rank` of a zigzag split: its local rows (sequence j: the front chunk
// then the back chunk, padded_len_j / cp rows, real rows a prefix), the front and back halves as
// batches of their own, and the local rows of each half (zigzag_half_rows).
struct RingLayout {
  ThdBatch local, front, back;
  std::vector<int64_t> front_rows, back_rows;
};
RingLayout ring_layout(const ThdBatch& b, int cp, int rank);

// What every ring pass needs: each rank's layout, the local rows per rank, and the step shapes
// (the diagonal step's mask is the problem's; the rectangular steps attend without one).
struct RingSetup {
  std::vector<RingLayout> lay;
  int64_t local_rows = 0;
  AttnShape diag, rect;
  RingSetup(const ThdBatch& b, int cp, const AttnShape& s) : local_rows(b.total_tokens() / cp), diag(s), rect(s) {
    for (int r = 0; r < cp; ++r) lay.push_back(ring_layout(b, cp, r));
    rect.causal = false;
  }
};

// q, k, v, out, lse, dout, dq, dk, dv: one tensor per rank (its local rows, flash_emu.h layouts).
// Backend contract (HostFlashBackend below; cuda/flash_ring_cuda.h):
//   using B16 = ...; using B32 = ...;             buffers of 16-bit bit patterns / float
//   B16 copy(const B16&)                           the P2P transfer of a KV block
//   B16 gather(const B16&, rows, row_elems)        read-half
//   B32 gather(const B32&, rows, row_elems)
//   B32 fill(size_t n, float v)
//   B16 round(const B32&)                          fp32 -> the 16-bit type
//   void fwd(bq, bk, s, q, k, v, B16& out, B32& lse)
//   void bwd(bq, bk, s, q, k, v, out, lse, dout, B16& dq, B16& dk, B16& dv)
//   void merge(s, const B16& out_step, const B32& lse_step, B32& out_acc, B32& lse_acc, rows)
//   void add(const B16& step, B32& acc, rows, row_elems)  acc[rows[i]] += step[i] (rows empty: i)
//   B16 upload(const std::vector<uint16_t>&), std::vector<uint16_t> download(const B16&), and the
//   same for B32 / float (host tensors in and out, for tests and callers)
template <class Backend>
void flash_ring_fwd(Backend& be, const ThdBatch& b, int cp, const AttnShape& s,
                    const std::vector<typename Backend::B16>& q, const std::vector<typename Backend::B16>& k,
                    const std::vector<typename Backend::B16>& v, std::vector<typename Backend::B16>& out,
                    std::vector<typename Backend::B32>& lse) {
  using B16 = typename Backend::B16;
  using B32 = typename Backend::B32;
  const RingSetup ring(b, cp, s);
  const auto& lay = ring.lay;
  const int64_t tl = ring.local_rows;
  const AttnShape &diag = ring.diag, &rect = ring.rect;
  out.clear();
  lse.clear();
  for (int r = 0; r < cp; ++r) {
    B32 out_acc = be.fill(static_cast<size_t>(tl * s.q_row()), 0.f);
    B32 lse_acc = be.fill(static_cast<size_t>(tl * s.heads), -INFINITY);
    for (int i = 0; i < cp; ++i) {
      const int src = (r - i + cp) % cp;
      const B16 kr = be.copy(k[src]), vr = be.copy(v[src]);  // received from the ring
      const RingStep type = ring_step_type(cp, r, i, s.causal);
      B16 o;
      B32 l;
      switch (type) {
        case RingStep::diagonal:
        case RingStep::full:
          be.fwd(lay[r].local, lay[src].local, type == RingStep::diagonal ? diag : rect, q[r], kr, vr, o, l);
          be.merge(s, o, l, out_acc, lse_acc, {});
          break;
        case RingStep::lower: {
          const B16 kf = be.gather(kr, lay[src].front_rows, s.kv_row()), vf = be.gather(vr, lay[src].front_rows, s.kv_row());
          be.fwd(lay[r].local, lay[src].front, rect, q[r], kf, vf, o, l);
          be.merge(s, o, l, out_acc, lse_acc, {});
          break;
        }
        case RingStep::upper: {
          const B16 qb = be.gather(q[r], lay[r].back_rows, s.q_row());
          be.fwd(lay[r].back, lay[src].local, rect, qb, kr, vr, o, l);
          be.merge(s, o, l, out_acc, lse_acc, lay[r].back_rows);
          break;
        }
      }
    }
    out.push_back(be.round(out_acc));
    lse.push_back(std::move(lse_acc));
  }
}

template <class Backend>
void flash_ring_bwd(Backend& be, const ThdBatch& b, int cp, const AttnShape& s,
                    const std::vector<typename Backend::B16>& q, const std::vector<typename Backend::B16>& k,
                    const std::vector<typename Backend::B16>& v, const std::vector<typename Backend::B16>& out,
                    const std::vector<typename Backend::B32>& lse, const std::vector<typename Backend::B16>& dout,
                    std::vector<typename Backend::B16>& dq, std::vector<typename Backend::B16>& dk,
                    std::vector<typename Backend::B16>& dv) {
  using B16 = typename Backend::B16;
  using B32 = typename Backend::B32;
  const RingSetup ring(b, cp, s);
  const auto& lay = ring.lay;
  const int64_t tl = ring.local_rows;
  const AttnShape &diag = ring.diag, &rect = ring.rect;
  std::vector<B32> dq_acc, dk_acc, dv_acc;
  for (int r = 0; r < cp; ++r) {
    dq_acc.push_back(be.fill(static_cast<size_t>(tl * s.q_row()), 0.f));
    dk_acc.push_back(be.fill(static_cast<size_t>(tl * s.kv_row()), 0.f));
    dv_acc.push_back(be.fill(static_cast<size_t>(tl * s.kv_row()), 0.f));
  }
  for (int r = 0; r < cp; ++r) {
    for (int i = 0; i < cp; ++i) {
      const int src = (r - i + cp) % cp;
      const B16 kr = be.copy(k[src]), vr = be.copy(v[src]);
      const RingStep type = ring_step_type(cp, r, i, s.causal);
      B16 gq, gk, gv;
      switch (type) {
        case RingStep::diagonal:
        case RingStep::full:
          be.bwd(lay[r].local, lay[src].local, type == RingStep::diagonal ? diag : rect, q[r], kr, vr, out[r], lse[r],
                 dout[r], gq, gk, gv);
          be.add(gq, dq_acc[r], {}, s.q_row());
          be.add(gk, dk_acc[src], {}, s.kv_row());
          be.add(gv, dv_acc[src], {}, s.kv_row());
          break;
        case RingStep::lower: {
          const auto& fr = lay[src].front_rows;
          const B16 kf = be.gather(kr, fr, s.kv_row()), vf = be.gather(vr, fr, s.kv_row());
          be.bwd(lay[r].local, lay[src].front, rect, q[r], kf, vf, out[r], lse[r], dout[r], gq, gk, gv);
          be.add(gq, dq_acc[r], {}, s.q_row());
          be.add(gk, dk_acc[src], fr, s.kv_row());
          be.add(gv, dv_acc[src], fr, s.kv_row());
          break;
        }
        case RingStep::upper: {
          const auto& br = lay[r].back_rows;
          const B16 qb = be.gather(q[r], br, s.q_row()), ob = be.gather(out[r], br, s.q_row()),
                    gb = be.gather(dout[r], br, s.q_row());
          const B32 lb = be.gather(lse[r], br, s.heads);
          be.bwd(lay[r].back, lay[src].local, rect, qb, kr, vr, ob, lb, gb, gq, gk, gv);
          be.add(gq, dq_acc[r], br, s.q_row());
          be.add(gk, dk_acc[src], {}, s.kv_row());
          be.add(gv, dv_acc[src], {}, s.kv_row());
          break;
        }
      }
    }
  }
  dq.clear();
  dk.clear();
  dv.clear();
  for (int r = 0; r < cp; ++r) {
    dq.push_back(be.round(dq_acc[r]));
    dk.push_back(be.round(dk_acc[r]));
    dv.push_back(be.round(dv_acc[r]));
  }
}

// The host backend: the emulated kernels, host copies, host corrections (fp32).
struct HostFlashBackend {
  using B16 = std::vector<uint16_t>;
  using B32 = std::vector<float>;
  Half half = Half::bf16;

  B16 upload(const std::vector<uint16_t>& x) const { return x; }
  B32 upload(const std::vector<float>& x) const { return x; }
  std::vector<uint16_t> download(const B16& x) const { return x; }
  std::vector<float> download(const B32& x) const { return x; }
  B16 copy(const B16& x) const { return x; }
  B16 gather(const B16& src, const std::vector<int64_t>& rows, int64_t row_elems) const;
  B32 gather(const B32& src, const std::vector<int64_t>& rows, int64_t row_elems) const;
  B32 fill(size_t n, float v) const { return B32(n, v); }
  B16 round(const B32& x) const;
  void fwd(const ThdBatch& bq, const ThdBatch& bk, const AttnShape& s, const B16& q, const B16& k, const B16& v,
           B16& out, B32& lse) const;
  void bwd(const ThdBatch& bq, const ThdBatch& bk, const AttnShape& s, const B16& q, const B16& k, const B16& v,
           const B16& out, const B32& lse, const B16& dout, B16& dq, B16& dk, B16& dv) const;
  void merge(const AttnShape& s, const B16& out_step, const B32& lse_step, B32& out_acc, B32& lse_acc,
             const std::vector<int64_t>& rows) const;
  void add(const B16& step, B32& acc, const std::vector<int64_t>& rows, int64_t row_elems) const;
};

}  // namespace dcp::attn
