// The host emulator of a CTA (used by attn/flash_emu.cpp and the model's GPU layer kernels):
// kThreads cooperative fibers (ucontext, on the calling thread) run one CTA body written against
// the kernels' Ctx (flash/flash_common.h and cuda/flash_device.cuh list its members),
// __syncthreads as a barrier of the block, warp shuffles, ldmatrix and the MMA m16n8k16 as
// collectives of the warp's 32 lanes (computed from the PTX fragment layouts), cp.async as an
// immediate copy, fp32 atomics as std::atomic_ref. CTAs of a grid run one after the other.
// Accesses the hardware would fault on (16-byte shared accesses misaligned or outside the CTA's
// shared memory) abort with a message, and so does a barrier that not every thread of its block
// or warp reaches (the hardware would hang). Fibers, not OS threads: a collective costs 32 fiber
// switches on one core instead of waking 32 threads, which made the emulated tests several times
// slower on CI's 2 cores. Still slow (a switch per lane per collective): for test-sized problems.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "attn/cta_fiber.h"
#include "attn/flash/flash_common.h"

namespace dcp::attn::emu {

using flash::kThreads;
using flash::kWarps;

// One emulated CTA: the block barrier and, per warp, a barrier and double-buffered exchange
// space. A warp collective writes its lane's part into buffer `parity`, waits at the warp
// barrier, reads, and flips parity: a lane can only overwrite a buffer after every lane passed
// the next collective's barrier, i.e. finished reading it.
struct Emu {
  explicit Emu(FiberPool& pool) : pool(pool), block{kThreads, 0, "__syncthreads"} {
    for (auto& w : warp) w = FiberBarrier{32, 0, "a warp collective"};
  }
  FiberPool& pool;
  FiberBarrier block;
  std::array<FiberBarrier, kWarps> warp;
  struct Scratch {
    float shfl[2][32];
    float a[2][16][16];
    float b[2][16][8];
    const uint16_t* rows[2][32];
  };
  std::array<Scratch, kWarps> scratch{};
  const uint16_t* smem_lo = nullptr;  // the CTA's shared memory, for the address checks
  const uint16_t* smem_hi = nullptr;
};

// What the hardware would fault on: a shared-memory access of 16 bytes that is not 16-byte
// aligned or not inside the CTA's shared memory (the emulator otherwise reads host memory).
inline void check_smem16(const Emu& e, const uint16_t* p, const char* op) {
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
  void sync() { emu->pool.arrive_and_wait(emu->block); }
  float shfl_xor(float v, int mask) {
    const int w = t / 32, lane = t % 32;
    auto& s = emu->scratch[w];
    s.shfl[parity][lane] = v;
    emu->pool.arrive_and_wait(emu->warp[w]);
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
    emu->pool.arrive_and_wait(emu->warp[w]);
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
    emu->pool.arrive_and_wait(emu->warp[w]);
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


// Runs the CTAs of a grid (x fastest, then y, then z) one after the other as kThreads fibers on the
// calling thread: cta(ctx, x, y, z, smem) is the CTA body; shared memory is one buffer of
// smem_elems, NaN-poisoned.
template <class Body>
void run_grid(int gx, int gy, int gz, int smem_elems, Body&& cta) {
  FiberPool pool(kThreads);
  Emu emu(pool);
  std::vector<uint16_t> smem(static_cast<size_t>(smem_elems), 0x7fff);
  emu.smem_lo = smem.data();
  emu.smem_hi = smem.data() + smem.size();
  pool.run([&](int t) {
    HostCtx ctx{&emu, t};
    for (int z = 0; z < gz; ++z)
      for (int y = 0; y < gy; ++y)
        for (int x = 0; x < gx; ++x) {
          cta(ctx, x, y, z, smem.data());
          ctx.sync();  // the next CTA reuses the shared memory
        }
  });
}

}  // namespace dcp::attn::emu
