// The host emulator of a CTA (used by attn/flash_emu.cpp and the model's GPU layer kernels):
// kThreads cooperative fibers (ucontext, on the calling thread) run one CTA body written against
// the kernels' Ctx (flash/flash_common.h and cuda/flash_device.cuh list its members),
// __syncthreads as a barrier of the block, warp shuffles, ldmatrix and the MMA m16n8k16 as
// collectives of the warp's 32 lanes (computed from the PTX fragment layouts), cp.async completed
// at issue or at the wait that retires it (CpAsync below), fp32 atomics as std::atomic_ref. CTAs of a grid run one after the other.
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

// When the emulator completes a cp.async copy, the two ends of what the hardware may do:
//   immediate: at issue. (A prefetch that overwrites a tile another warp still reads would need
//     an adversarial fiber schedule to show; the fixed schedule does not: the barrier before each
//     prefetch is argued in the kernel sources, and a test removing one still passes.)
//   deferred: at the cp.async.wait_group that retires its group (PTX ISA, "cp.async.wait_group":
//     all but the N most recent committed groups complete), and never for a copy not committed
//     or not waited for. A read of shared memory before the wait and barrier that make the copy
//     visible reads the NaN poison or the previous tile (the read-after-write hazard).
// The kernels' tests run both (test_flash_emu.cpp). Per thread (the fibers run on the caller's).
enum class CpAsync { immediate, deferred };
inline CpAsync& cp_async_mode() {
  static thread_local CpAsync mode = CpAsync::immediate;
  return mode;
}
struct ScopedCpAsync {
  CpAsync old;
  explicit ScopedCpAsync(CpAsync m) : old(cp_async_mode()) { cp_async_mode() = m; }
  ~ScopedCpAsync() { cp_async_mode() = old; }
  ScopedCpAsync(const ScopedCpAsync&) = delete;
  ScopedCpAsync& operator=(const ScopedCpAsync&) = delete;
};

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
  CpAsync cp_async = cp_async_mode();
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
  struct PendingCopy {
    uint16_t* dst;
    const uint16_t* src;  // null: zero-fill
  };
  Emu* emu;
  int t;
  int parity = 0;
  std::vector<PendingCopy> pending = {};  // deferred cp.async copies, oldest first
  std::vector<size_t> group_ends = {};    // end (in pending) of each committed group, oldest first
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
  // cp.async (CpAsync above): 16 bytes, src 16-byte aligned, zero-filled when !valid.
  void cp_async16(uint16_t* dst, const uint16_t* src, bool valid) {
    check_smem16(*emu, dst, "cp.async");
    if (reinterpret_cast<std::uintptr_t>(src) % 16 != 0) {
      std::fprintf(stderr, "flash emulator: cp.async from a global address that is not 16-byte aligned\n");
      std::abort();
    }
    if (emu->cp_async == CpAsync::immediate) flash::copy8(dst, valid ? src : nullptr);
    else pending.push_back({dst, valid ? src : nullptr});
  }
  void cp_async_commit() {
    if (emu->cp_async == CpAsync::deferred) group_ends.push_back(pending.size());
  }
  void cp_async_wait_one() { cp_async_wait_group(1); }
  void cp_async_wait_all() { cp_async_wait_group(0); }
  // Completes this thread's committed groups but the `newest` most recent ones.
  void cp_async_wait_group(size_t newest) {
    if (group_ends.size() <= newest) return;
    const size_t done = group_ends[group_ends.size() - 1 - newest];
    for (size_t i = 0; i < done; ++i) flash::copy8(pending[i].dst, pending[i].src);
    pending.erase(pending.begin(), pending.begin() + static_cast<std::ptrdiff_t>(done));
    std::vector<size_t> left;
    for (size_t e : group_ends)
      if (e > done) left.push_back(e - done);
    group_ends = std::move(left);
  }
  // The end of a CTA: copies never waited for are dropped (deferred: they never became visible).
  void cp_async_drop() {
    pending.clear();
    group_ends.clear();
  }
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
// smem_elems, NaN-poisoned (once: a CTA sees what the previous one left, as a reused SM may).
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
          ctx.cp_async_drop();
          ctx.sync();  // the next CTA reuses the shared memory
        }
  });
}

}  // namespace dcp::attn::emu
