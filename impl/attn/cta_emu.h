// The host emulator of a CTA (used by attn/flash_emu.cpp and the model's GPU layer kernels):
// kThreads cooperative fibers (ucontext, on the calling thread) run one CTA body written against
// the kernels' Ctx (flash/flash_common.h and cuda/flash_device.cuh list its members),
// __syncthreads as a barrier of the block, warp shuffles, ldmatrix and the MMA m16n8k16 as
// collectives of the warp's 32 lanes (computed from the PTX fragment layouts), cp.async completed
// at issue or at the wait that retires it (CpAsync below), fp32 atomics as std::atomic_ref. CTAs
// of a grid run one after the other.
// Accesses the hardware would fault on (16-byte shared accesses misaligned or outside the CTA's
// shared memory) abort with a message, and so do a barrier that not every thread of its block
// or warp reaches (the hardware would hang) and a shared-memory race (RaceShadow below).
// Fibers, not OS threads: a collective costs 32 fiber switches on one core instead of waking 32
// threads, which made the emulated tests several times slower on CI's 2 cores. Still slow (a
// switch per lane per collective): for test-sized problems.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "attn/cta_fiber.h"
#include "attn/flash/flash_common.h"

namespace dcp::attn::emu {

using flash::kThreads;
using flash::kWarps;

// When the emulator completes a cp.async copy, the two ends of what the hardware may do:
//   immediate: at issue.
//   deferred: at the cp.async.wait_group that retires its group (PTX ISA, "cp.async.wait_group":
//     all but the N most recent committed groups complete), and never for a copy not committed
//     or not waited for. A read of shared memory before the wait and barrier that make the copy
//     visible reads the NaN poison or the previous tile (the read-after-write hazard).
// Either way the race check (RaceShadow) counts a copy as landing at any time from its issue to
// the wait that retires it, so a prefetch that overwrites a tile another thread still reads
// aborts whatever the fibers' order, and a CTA that ends with a copy not waited for aborts.
// The kernels' tests run both modes (test_flash_emu.cpp). Per thread (the fibers run on the caller's).
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

// The race check of a CTA's shared memory, per 16-bit element. A thread's "epoch" is the number
// of block barriers (__syncthreads) it has passed; accesses of different threads are ordered only
// by a barrier between them. Each access is kept with the epochs it may take effect in: a load, a
// store or an ldmatrix read its own; a cp.async any from its issue to the epoch of the wait that
// retires it (open until then). Two accesses of different threads to one element, at least one a
// write, whose epochs overlap are a race (the hardware may order them either way); so is a thread
// touching its own cp.async's destination before waiting for it. A race aborts, both accesses
// named. Accesses whose epochs ended before the current one are forgotten: a thread in epoch e
// means every thread passed barrier e. Only accesses through the Ctx are seen (the kernel bodies
// touch shared memory through it alone).
struct RaceShadow {
  static constexpr int64_t kOpen = INT64_MAX;  // a cp.async not yet retired
  struct Access {
    int t;
    int64_t lo, hi;  // the epochs it may take effect in
    bool write, async;
  };
  std::vector<std::vector<Access>> cells;  // per element

  static const char* what(bool write, bool async) { return async ? "cp.async" : write ? "store" : "load/ldmatrix"; }
  [[noreturn]] static void race(size_t i, const Access& a, int t, int64_t e, bool write, bool async) {
    const std::string until = a.hi == kOpen ? std::string("its wait") : std::to_string(a.hi);
    std::fprintf(stderr,
                 "flash emulator: shared-memory race at element %zu: thread %d's %s in barrier interval %lld and "
                 "thread %d's %s in intervals %lld to %s (no __syncthreads or cp.async wait orders them)\n",
                 i, t, what(write, async), static_cast<long long>(e), a.t, what(a.write, a.async),
                 static_cast<long long>(a.lo), until.c_str());
    std::abort();
  }
  void access(size_t i0, size_t n, int t, int64_t e, bool write, bool async) {
    for (size_t i = i0; i < i0 + n; ++i) {
      auto& cell = cells[i];
      std::erase_if(cell, [&](const Access& a) { return a.hi < e; });
      for (const Access& a : cell) {
        if (a.t != t && a.lo <= e && e <= a.hi && (a.write || write)) race(i, a, t, e, write, async);
        if (a.t == t && a.async && a.hi == kOpen) race(i, a, t, e, write, async);  // its own copy, not waited for
      }
      cell.push_back({t, e, async ? kOpen : e, write, async});
    }
  }
  // Thread t's cp.async into the 8 elements from i0, retired by a wait in epoch e (visible to the
  // others after the next barrier).
  void retire(size_t i0, int t, int64_t e) {
    for (size_t i = i0; i < i0 + 8; ++i)
      for (Access& a : cells[i])
        if (a.t == t && a.async && a.hi == kOpen) {
          a.hi = e;
          break;
        }
  }
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
  RaceShadow shadow;  // cells sized to the shared memory by run_grid
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

// A plain shared access of `bytes` (naturally aligned, inside the CTA's shared memory).
inline void check_smem(const Emu& e, const void* p, size_t bytes, const char* op) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  const auto lo = reinterpret_cast<std::uintptr_t>(e.smem_lo), hi = reinterpret_cast<std::uintptr_t>(e.smem_hi);
  if (a % bytes != 0 || a < lo || a + bytes > hi) {
    std::fprintf(stderr, "flash emulator: %s of %zu bytes at shared byte offset %td is not an aligned access inside "
                 "the %td bytes of shared memory\n", op, bytes, static_cast<std::ptrdiff_t>(a - lo),
                 static_cast<std::ptrdiff_t>(hi - lo));
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
  std::vector<PendingCopy> pending = {};  // cp.async copies not yet waited for, oldest first
  std::vector<size_t> group_ends = {};    // end (in pending) of each committed group, oldest first
  int64_t epoch = 0;                      // block barriers passed (RaceShadow)
  int tid() const { return t; }
  void sync() {
    emu->pool.arrive_and_wait(emu->block);
    ++epoch;
  }
  // The element index of a shared address, and the race check of an access of `bytes` there.
  size_t cell(const void* p) const {
    return static_cast<size_t>(static_cast<const char*>(p) - reinterpret_cast<const char*>(emu->smem_lo)) / 2;
  }
  void note(const void* p, size_t bytes, bool write, bool async = false) {
    emu->shadow.access(cell(p), (bytes + 1) / 2, t, epoch, write, async);
  }
  // Plain shared-memory stores and loads.
  template <class T>
  void st_shared(T* p, T v) {
    check_smem(*emu, p, sizeof(T), "a shared store");
    note(p, sizeof(T), true);
    *p = v;
  }
  template <class T>
  T ld_shared(const T* p) {
    check_smem(*emu, p, sizeof(T), "a shared load");
    note(p, sizeof(T), false);
    return *p;
  }
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
    // The race check sees the elements each lane receives (from other lanes' rows), not the row
    // it addresses: a lane's own store into its row, read by another lane without a barrier, races.
    for (int j = 0; j < 4; ++j) {
      const uint16_t* const* m = &s.rows[parity][8 * j];
      if (!trans) {
        const uint16_t* e = m[lane / 4] + 2 * (lane % 4);
        note(e, 4, false);
        r[j] = flash::pack2(e[0], e[1]);
      } else {
        const uint16_t* e0 = m[2 * (lane % 4)] + lane / 4;
        const uint16_t* e1 = m[2 * (lane % 4) + 1] + lane / 4;
        note(e0, 2, false);
        note(e1, 2, false);
        r[j] = flash::pack2(*e0, *e1);
      }
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
    note(dst, 16, true, true);
    if (emu->cp_async == CpAsync::immediate) flash::copy8(dst, valid ? src : nullptr);
    pending.push_back({dst, valid ? src : nullptr});  // immediate: copied already, kept for the race check
  }
  void cp_async_commit() { group_ends.push_back(pending.size()); }
  void cp_async_wait_one() { cp_async_wait_group(1); }
  void cp_async_wait_all() { cp_async_wait_group(0); }
  // Completes this thread's committed groups but the `newest` most recent ones.
  void cp_async_wait_group(size_t newest) {
    if (group_ends.size() <= newest) return;
    const size_t done = group_ends[group_ends.size() - 1 - newest];
    for (size_t i = 0; i < done; ++i) {
      if (emu->cp_async == CpAsync::deferred) flash::copy8(pending[i].dst, pending[i].src);
      emu->shadow.retire(cell(pending[i].dst), t, epoch);
    }
    pending.erase(pending.begin(), pending.begin() + static_cast<std::ptrdiff_t>(done));
    std::vector<size_t> left;
    for (size_t e : group_ends)
      if (e > done) left.push_back(e - done);
    group_ends = std::move(left);
  }
  // The end of a CTA: a copy still in flight (never committed, or never waited for) aborts; the
  // kernels wait for everything they issue before they end.
  void cp_async_end() {
    if (pending.empty()) return;
    std::fprintf(stderr, "flash emulator: thread %d ends its CTA with %zu cp.async copies not waited for\n", t,
                 pending.size());
    std::abort();
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
  emu.shadow.cells.resize(smem.size());
  pool.run([&](int t) {
    HostCtx ctx{&emu, t};
    for (int z = 0; z < gz; ++z)
      for (int y = 0; y < gy; ++y)
        for (int x = 0; x < gx; ++x) {
          cta(ctx, x, y, z, smem.data());
          ctx.cp_async_end();
          ctx.sync();  // the next CTA reuses the shared memory
        }
  });
}

}  // namespace dcp::attn::emu
