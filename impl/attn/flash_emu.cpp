// See flash_emu.h.
#include "attn/flash_emu.h"

#include <array>
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <thread>
#include <vector>

#include "attn/attn_ref.h"
#include "attn/flash/flash_bwd_block.h"
#include "attn/flash/flash_fwd_block.h"
#include "core/error.h"
#include "core/nvtx.h"

namespace dcp::attn {

flash::FwdParams flash_fwd_params(const ThdBatch& bq, const ThdBatch& bk, const AttnShape& s, size_t q,
                                  size_t k, size_t v, size_t out, size_t lse) {
  validate(s);
  DCP_REQUIRE(s.head_dim == 64 || s.head_dim == 128, "flash attention: head_dim=", s.head_dim,
              " unsupported (64 or 128)");
  validate_layout(bq);
  validate_layout(bk);
  DCP_REQUIRE(bq.batch() == bk.batch(), "flash attention: the query batch has ", bq.batch(),
              " sequences, the key batch ", bk.batch());
  check_sizes(s, bq.total_tokens(), bk.total_tokens(), q, k, v, out, lse);
  flash::FwdParams p;
  p.batch = bq.batch();
  p.heads = s.heads;
  p.kv_heads = s.kv_heads;
  p.head_dim = s.head_dim;
  p.scale_log2 = static_cast<float>(s.scale() * 1.4426950408889634);
  p.causal = s.causal;
  return p;
}

flash::BwdParams flash_bwd_params(const ThdBatch& bq, const ThdBatch& bk, const AttnShape& s, size_t q, size_t k,
                                  size_t v, size_t out, size_t lse, size_t dout, size_t dq, size_t dk, size_t dv) {
  const flash::FwdParams f = flash_fwd_params(bq, bk, s, q, k, v, out, lse);
  check_sizes(s, bq.total_tokens(), bk.total_tokens(), dout, dk, dv, dq, lse);
  flash::BwdParams p;
  static_cast<flash::VarlenProblem&>(p) = f;  // the shape; bind_bwd sets the arrays and tensors
  p.rows_q = bq.total_tokens();
  p.scale = static_cast<float>(s.scale());
  return p;
}

void bind_fwd(flash::FwdParams& p, const FlashBatchArrays& a, const uint16_t* q, const uint16_t* k, const uint16_t* v,
              uint16_t* out, float* lse) {
  p.q = q;
  p.k = k;
  p.v = v;
  p.out = out;
  p.lse = lse;
  p.cu_seqlens_q = a.cu_seqlens_q;
  p.cu_seqlens_k = a.cu_seqlens_k;
  p.seqstart_q = a.seqstart_q;
  p.seqstart_k = a.seqstart_k;
}

void bind_bwd(flash::BwdParams& p, const FlashBatchArrays& a, const uint16_t* q, const uint16_t* k, const uint16_t* v,
              const uint16_t* out, const float* lse, const uint16_t* dout, float* delta, float* dq_accum, uint16_t* dq,
              uint16_t* dk, uint16_t* dv) {
  p.q = q;
  p.k = k;
  p.v = v;
  p.out = out;
  p.lse = lse;
  p.dout = dout;
  p.delta = delta;
  p.dq_accum = dq_accum;
  p.dq = dq;
  p.dk = dk;
  p.dv = dv;
  p.cu_seqlens_q = a.cu_seqlens_q;
  p.cu_seqlens_k = a.cu_seqlens_k;
  p.seqstart_q = a.seqstart_q;
  p.seqstart_k = a.seqstart_k;
}

int flash_bwd_n_blocks(const ThdBatch& bk) {
  int n = 0;
  for (int j = 0; j < bk.batch(); ++j)
    n = std::max(n, (bk.padded_seqlen(j) + flash::kBlockN - 1) / flash::kBlockN);
  return n;
}

int flash_fwd_m_blocks(const ThdBatch& bq) {
  int m = 0;
  for (int j = 0; j < bq.batch(); ++j)
    m = std::max(m, (bq.padded_seqlen(j) + flash::kBlockM - 1) / flash::kBlockM);
  return m;
}

namespace {

using flash::kThreads;
using flash::kWarps;

// One emulated CTA: the block barrier and, per warp, a barrier and double-buffered exchange
// space. A warp collective writes its lane's part into buffer `parity`, waits at the warp
// barrier, reads, and flips parity: a lane can only overwrite a buffer after every lane passed
// the next collective's barrier, i.e. finished reading it.
struct Emu {
  std::barrier<> block{kThreads};
  std::array<std::unique_ptr<std::barrier<>>, kWarps> warp;
  struct Scratch {
    float shfl[2][32];
    float a[2][16][16];
    float b[2][16][8];
    const uint16_t* rows[2][32];
  };
  std::array<Scratch, kWarps> scratch{};
  const uint16_t* smem_lo = nullptr;  // the CTA's shared memory, for the address checks
  const uint16_t* smem_hi = nullptr;
  Emu() {
    for (auto& w : warp) w = std::make_unique<std::barrier<>>(32);
  }
};

// What the hardware would fault on: a shared-memory access of 16 bytes that is not 16-byte
// aligned or not inside the CTA's shared memory (the emulator otherwise reads host memory).
void check_smem16(const Emu& e, const uint16_t* p, const char* op) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  if (a % 16 != 0 || p < e.smem_lo || p + 8 > e.smem_hi) {
    std::fprintf(stderr, "flash emulator: %s at shared offset %td elements is not a 16-byte aligned access inside "
                 "the %td elements of shared memory\n", op, p - e.smem_lo, e.smem_hi - e.smem_lo);
    std::abort();
  }
}

struct HostCtx {
  Emu* emu;
  int t;
  int parity = 0;
  int tid() const { return t; }
  void sync() { emu->block.arrive_and_wait(); }
  float shfl_xor(float v, int mask) {
    const int w = t / 32, lane = t % 32;
    auto& s = emu->scratch[w];
    s.shfl[parity][lane] = v;
    emu->warp[w]->arrive_and_wait();
    const float r = s.shfl[parity][lane ^ mask];
    parity ^= 1;
    return r;
  }
  // ldmatrix x4 (flash_common.h): lane l addresses row l % 8 of matrix l / 8.
  void ldsm(uint32_t (&r)[4], const uint16_t* p, bool trans) {
    const int w = t / 32, lane = t % 32;
    auto& s = emu->scratch[w];
    check_smem16(*emu, p, trans ? "ldmatrix.trans" : "ldmatrix");
    s.rows[parity][lane] = p;
    emu->warp[w]->arrive_and_wait();
    for (int j = 0; j < 4; ++j) {
      const uint16_t* const* m = &s.rows[parity][8 * j];
      if (!trans)
        r[j] = flash::pack2(m[lane / 4][2 * (lane % 4)], m[lane / 4][2 * (lane % 4) + 1]);
      else
        r[j] = flash::pack2(m[2 * (lane % 4)][lane / 4], m[2 * (lane % 4) + 1][lane / 4]);
    }
    parity ^= 1;
  }
  void ldsm_x4(uint32_t (&r)[4], const uint16_t* p) { ldsm(r, p, false); }
  void ldsm_x4_t(uint32_t (&r)[4], const uint16_t* p) { ldsm(r, p, true); }
  // cp.async: the copy happens at once (the kernel's waits and barriers are then no-ops here;
  // that they are placed right is argued in flash_fwd_block.h, not tested by the emulator).
  void cp_async16(uint16_t* dst, const uint16_t* src, bool valid) const {
    check_smem16(*emu, dst, "cp.async");
    if (reinterpret_cast<std::uintptr_t>(src) % 16 != 0) {
      std::fprintf(stderr, "flash emulator: cp.async from a global address that is not 16-byte aligned\n");
      std::abort();
    }
    flash::copy8(dst, valid ? src : nullptr);
  }
  void cp_async_commit() const {}
  void cp_async_wait_one() const {}
  void cp_async_wait_all() const {}
  void atomic_add(float* p, float v) const { std::atomic_ref<float>(*p).fetch_add(v); }
  // D = A B + D for one m16n8k16 tile: each lane deposits its fragment elements at the matrix
  // positions the PTX layout assigns them, then computes its own D elements.
  template <class E>
  void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    using namespace flash;
    const int w = t / 32, lane = t % 32;
    auto& s = emu->scratch[w];
    for (int e = 0; e < 8; ++e) {
      const uint32_t r = a[e / 2];
      s.a[parity][frag_a_row(lane, e)][frag_a_col(lane, e)] = E::to_float(e % 2 ? unpack_hi(r) : unpack_lo(r));
    }
    for (int e = 0; e < 4; ++e) {
      const uint32_t r = b[e / 2];
      s.b[parity][frag_b_k(lane, e)][frag_b_n(lane, e)] = E::to_float(e % 2 ? unpack_hi(r) : unpack_lo(r));
    }
    emu->warp[w]->arrive_and_wait();
    for (int e = 0; e < 4; ++e) {
      const int row = frag_c_row(lane, e), col = frag_c_col(lane, e);
      double acc = d[e];
      for (int kk = 0; kk < 16; ++kk)
        acc += static_cast<double>(s.a[parity][row][kk]) * static_cast<double>(s.b[parity][kk][col]);
      d[e] = static_cast<float>(acc);
    }
    parity ^= 1;
  }
};

FlashBatchArrays host_arrays(const ThdBatch& bq, const ThdBatch& bk) {
  return {bq.cu_seqlens.data(), bk.cu_seqlens.data(), bq.cu_seqlens_padded.data(), bk.cu_seqlens_padded.data()};
}

// Runs the CTAs of a grid (x fastest, then y, then z) one after the other on kThreads host threads:
// cta(ctx, x, y, z, smem) is the CTA body; shared memory is one buffer of smem_elems, NaN-poisoned.
template <class Body>
void run_grid(int gx, int gy, int gz, int smem_elems, Body&& cta) {
  Emu emu;
  std::vector<uint16_t> smem(static_cast<size_t>(smem_elems), 0x7fff);
  emu.smem_lo = smem.data();
  emu.smem_hi = smem.data() + smem.size();
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      HostCtx ctx{&emu, t};
      for (int z = 0; z < gz; ++z)
        for (int y = 0; y < gy; ++y)
          for (int x = 0; x < gx; ++x) {
            cta(ctx, x, y, z, smem.data());
            ctx.sync();  // the next CTA reuses the shared memory
          }
    });
  for (auto& th : threads) th.join();
}

template <class E, int D>
void run_fwd(const flash::FwdParams& p, int m_blocks) {
  run_grid(m_blocks, p.heads, p.batch, flash::fwd_smem_elems(D), [&](HostCtx& c, int m, int h, int b, uint16_t* smem) {
    flash::flash_fwd_block<HostCtx, E, D>(c, p, m, h, b, smem);
  });
}

template <class E, int D>
void run_bwd(const flash::BwdParams& p, int n_blocks) {
  for (int64_t pair = 0; pair < p.rows_q * p.heads; ++pair) flash::flash_bwd_prep<E, D>(p, pair);
  run_grid(n_blocks, p.kv_heads, p.batch, flash::bwd_smem_elems(D), [&](HostCtx& c, int n, int hk, int b, uint16_t* smem) {
    flash::flash_bwd_block<HostCtx, E, D>(c, p, n, hk, b, smem);
  });
  for (int64_t i = 0; i < p.rows_q * p.heads * D; ++i) flash::flash_bwd_dq<E>(p, i);
}

}  // namespace

void flash_bwd_emulated(Half half, const ThdBatch& bq, const ThdBatch& bk, const AttnShape& s,
                        std::span<const uint16_t> q, std::span<const uint16_t> k, std::span<const uint16_t> v,
                        std::span<const uint16_t> out, std::span<const float> lse, std::span<const uint16_t> dout,
                        std::span<uint16_t> dq, std::span<uint16_t> dk, std::span<uint16_t> dv) {
  DCP_NVTX_RANGE();
  flash::BwdParams p = flash_bwd_params(bq, bk, s, q.size(), k.size(), v.size(), out.size(), lse.size(), dout.size(),
                                        dq.size(), dk.size(), dv.size());
  std::vector<float> delta(lse.size(), std::numeric_limits<float>::quiet_NaN()), dq_accum(dq.size(), 0.f);
  bind_bwd(p, host_arrays(bq, bk), q.data(), k.data(), v.data(), out.data(), lse.data(), dout.data(), delta.data(),
           dq_accum.data(), dq.data(), dk.data(), dv.data());
  const int n_blocks = flash_bwd_n_blocks(bk);
  if (half == Half::bf16) {
    if (s.head_dim == 64) run_bwd<flash::Bf16, 64>(p, n_blocks);
    else run_bwd<flash::Bf16, 128>(p, n_blocks);
  } else {
    if (s.head_dim == 64) run_bwd<flash::Fp16, 64>(p, n_blocks);
    else run_bwd<flash::Fp16, 128>(p, n_blocks);
  }
}

void flash_fwd_emulated(Half half, const ThdBatch& bq, const ThdBatch& bk, const AttnShape& s,
                        std::span<const uint16_t> q, std::span<const uint16_t> k,
                        std::span<const uint16_t> v, std::span<uint16_t> out, std::span<float> lse) {
  DCP_NVTX_RANGE();
  flash::FwdParams p = flash_fwd_params(bq, bk, s, q.size(), k.size(), v.size(), out.size(), lse.size());
  bind_fwd(p, host_arrays(bq, bk), q.data(), k.data(), v.data(), out.data(), lse.data());
  const int m_blocks = flash_fwd_m_blocks(bq);
  if (m_blocks == 0) return;
  if (half == Half::bf16) {
    if (s.head_dim == 64) run_fwd<flash::Bf16, 64>(p, m_blocks);
    else run_fwd<flash::Bf16, 128>(p, m_blocks);
  } else {
    if (s.head_dim == 64) run_fwd<flash::Fp16, 64>(p, m_blocks);
    else run_fwd<flash::Fp16, 128>(p, m_blocks);
  }
}

}  // namespace dcp::attn
