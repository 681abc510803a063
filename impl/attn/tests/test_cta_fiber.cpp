// The CTA emulator's fibers (cta_fiber.h): barrier semantics the emulated kernels rely on
// (nothing after a barrier runs before every fiber reached it; the last arrival goes on; a
// barrier is reusable and sub-barriers of a subset work beside a block barrier), a fixed
// schedule (two runs interleave identically), reuse of a pool, a barrier that can never
// complete aborting with its name instead of hanging; what a switch keeps per fiber (live values,
// the floating-point rounding mode, exceptions caught on a fiber's stack), each with both
// switches (FiberSwitch); the emulator's cp.async modes and its race check.
#include <gtest/gtest.h>

#include <cfenv>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "attn/cta_emu.h"
#include "attn/cta_fiber.h"

namespace dcp::attn::emu {
namespace {

// 1/7 in the current rounding mode, through SSE (MXCSR) and through the x87 unit (its control
// word). Its binary fraction 0.001001...: rounded to nearest, both the double's 52 and the x87
// format's 63 fraction bits round down, so upward rounding gives a larger value in both.
double seventh_sse() {
  volatile double one = 1.0, seven = 7.0;
  return one / seven;
}
long double seventh_x87() {
  volatile long double one = 1.0L, seven = 7.0L;
  return one / seven;
}

// Both switches where the fast one exists (FiberSwitch: the same schedule and results).
std::vector<FiberSwitch> switches() {
  std::vector<FiberSwitch> out{FiberSwitch::ucontext};
  if (FiberPool::fast_switch_available()) out.insert(out.begin(), FiberSwitch::fast);
  return out;
}
const char* name_of(FiberSwitch how) { return how == FiberSwitch::fast ? "fast" : "ucontext"; }

TEST(CtaFiber, NothingAfterABarrierRunsBeforeEveryFiberReachedIt) {
  for (FiberSwitch how : switches()) {
    SCOPED_TRACE(name_of(how));
    constexpr int kN = 37;  // not a multiple of anything the emulator uses
    FiberPool pool(kN, FiberPool::kDefaultStackBytes, how);
    FiberBarrier all{kN, 0, "all"};
    std::vector<int> phase(kN, 0);
    std::vector<std::string> violations;
    pool.run([&](int i) {
      for (int round = 1; round <= 5; ++round) {
        phase[static_cast<size_t>(i)] = round;
        pool.arrive_and_wait(all);
        for (int j = 0; j < kN; ++j)
          if (phase[static_cast<size_t>(j)] < round)
            violations.push_back("fiber " + std::to_string(i) + " passed round " + std::to_string(round) +
                                 " before fiber " + std::to_string(j) + " arrived");
        pool.arrive_and_wait(all);  // nobody starts the next round while another still checks
      }
    });
    EXPECT_TRUE(violations.empty()) << violations.front();
    for (int p : phase) EXPECT_EQ(p, 5);
  }
}

TEST(CtaFiber, WarpBarriersBesideABlockBarrier) {
  // Four "warps" of 8 exchange values through their own barrier, then the block syncs: each
  // warp's sum must be the sum of its lanes' values for every round.
  constexpr int kWarpsHere = 4, kLanes = 8, kN = kWarpsHere * kLanes;
  FiberPool pool(kN);
  FiberBarrier block{kN, 0, "block"};
  std::vector<FiberBarrier> warp(kWarpsHere, FiberBarrier{kLanes, 0, "warp"});
  std::vector<int> slot(kN, 0);
  std::vector<long> sums(kN, 0);
  pool.run([&](int i) {
    const int w = i / kLanes;
    for (int round = 0; round < 3; ++round) {
      slot[static_cast<size_t>(i)] = 100 * round + i;
      pool.arrive_and_wait(warp[static_cast<size_t>(w)]);
      long s = 0;
      for (int l = 0; l < kLanes; ++l) s += slot[static_cast<size_t>(w * kLanes + l)];
      sums[static_cast<size_t>(i)] += s;
      pool.arrive_and_wait(block);
    }
  });
  for (int i = 0; i < kN; ++i) {
    const int w = i / kLanes;
    long expect = 0;
    for (int round = 0; round < 3; ++round)
      for (int l = 0; l < kLanes; ++l) expect += 100 * round + w * kLanes + l;
    EXPECT_EQ(sums[static_cast<size_t>(i)], expect) << "fiber " << i;
  }
}

TEST(CtaFiber, TheScheduleIsFixedAndAPoolRunsAgain) {
  FiberPool pool(16);
  FiberPool by_ucontext(16, FiberPool::kDefaultStackBytes, FiberSwitch::ucontext);
  auto trace = [](FiberPool& pool) {
    FiberBarrier b{16, 0, "b"};
    std::vector<int> order;
    pool.run([&](int i) {
      for (int r = 0; r < 3; ++r) {
        order.push_back(i);
        if (i % 3 != 0) pool.arrive_and_wait(b);  // uneven work between barriers
        else {
          order.push_back(-i);
          pool.arrive_and_wait(b);
        }
      }
    });
    return order;
  };
  const std::vector<int> first = trace(pool);
  EXPECT_EQ(first.size(), 3u * (16 + 6));
  EXPECT_EQ(trace(pool), first);
  EXPECT_EQ(trace(by_ucontext), first);  // the switch does not change the schedule
}

TEST(CtaFiber, APoolSwitchesFastWhereItCan) {
  // The emulator's pools (cta_emu.h) take the default: the fast switch wherever it is compiled in
  // (x86-64 without a shadow stack), so a fallback to swapcontext cannot go unseen there.
  FiberPool pool(2);
  EXPECT_EQ(pool.switch_used(), FiberPool::fast_switch_available() ? FiberSwitch::fast : FiberSwitch::ucontext);
#if defined(__x86_64__) && !defined(__ILP32__) && !defined(__CET__)
  EXPECT_TRUE(FiberPool::fast_switch_available()) << "x86-64 without -fcf-protection has the fast switch";
#endif
  EXPECT_EQ(FiberPool(2, FiberPool::kDefaultStackBytes, FiberSwitch::ucontext).switch_used(), FiberSwitch::ucontext);
}

TEST(CtaFiber, EachFiberKeepsItsOwnRoundingModeAcrossSwitches) {
  // A switch saves and restores MXCSR and the x87 control word of the fiber it leaves. Every
  // fiber starts in run()'s caller's mode (upward here, as getcontext would give it); fibers 0
  // and 2 then round to nearest, 1 and 3 keep rounding upward; after every barrier each still
  // computes in its own mode, and run()'s caller in its own after the run.
  const double nearest = seventh_sse();
  const long double nearest_x87 = seventh_x87();
  ASSERT_EQ(std::fegetround(), FE_TONEAREST);
  struct Restore {
    ~Restore() { std::fesetround(FE_TONEAREST); }
  } restore;
  for (FiberSwitch how : switches()) {
    SCOPED_TRACE(name_of(how));
    ASSERT_EQ(std::fesetround(FE_UPWARD), 0);
    FiberPool pool(4, FiberPool::kDefaultStackBytes, how);
    ASSERT_EQ(pool.switch_used(), how);
    FiberBarrier b{4, 0, "b"};
    std::vector<std::string> bad;
    pool.run([&](int i) {
      if (std::fegetround() != FE_UPWARD || !(seventh_sse() > nearest))
        bad.push_back("fiber " + std::to_string(i) + " did not start in its caller's mode");
      if (i % 2 == 0) std::fesetround(FE_TONEAREST);
      for (int r = 0; r < 3; ++r) {
        pool.arrive_and_wait(b);
        const bool up = i % 2 == 1;
        if (std::fegetround() != (up ? FE_UPWARD : FE_TONEAREST) || (seventh_sse() > nearest) != up ||
            (seventh_x87() > nearest_x87) != up)
          bad.push_back("fiber " + std::to_string(i) + " round " + std::to_string(r) + " computed in another mode");
      }
    });
    EXPECT_TRUE(bad.empty()) << bad.front();
    EXPECT_EQ(std::fegetround(), FE_UPWARD);
    EXPECT_GT(seventh_sse(), nearest);
    std::fesetround(FE_TONEAREST);
  }
}

TEST(CtaFiber, LiveValuesAndCaughtExceptionsSurviveSwitches) {
  // Many values live across every barrier (some of them in callee-saved registers), and an
  // exception thrown and caught on a fiber's own stack between barriers.
  constexpr int kN = 9;
  std::vector<uint64_t> want(kN);
  for (int i = 0; i < kN; ++i) {  // the arithmetic below without fibers
    uint64_t a = 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(i + 1), c = static_cast<uint64_t>(i), d = ~a, e = a ^ 0x55;
    for (int r = 0; r < 20; ++r) {
      a = a * 6364136223846793005ull + 1442695040888963407ull;
      c += a >> 7;
      if ((a ^ c) & 1) d += 3;
      else d ^= c;
      e = (e << 5) ^ (e >> 3) ^ d;
    }
    want[static_cast<size_t>(i)] = a ^ c ^ d ^ e;
  }
  for (FiberSwitch how : switches()) {
    SCOPED_TRACE(name_of(how));
    FiberPool pool(kN, FiberPool::kDefaultStackBytes, how);
    FiberBarrier b{kN, 0, "b"};
    std::vector<uint64_t> got(kN);
    pool.run([&](int i) {
      uint64_t a = 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(i + 1), c = static_cast<uint64_t>(i), d = ~a, e = a ^ 0x55;
      for (int r = 0; r < 20; ++r) {
        a = a * 6364136223846793005ull + 1442695040888963407ull;
        c += a >> 7;
        pool.arrive_and_wait(b);
        try {
          if ((a ^ c) & 1) throw std::runtime_error("odd");
          d ^= c;
        } catch (const std::runtime_error&) {
          d += 3;
        }
        e = (e << 5) ^ (e >> 3) ^ d;
        pool.arrive_and_wait(b);
      }
      got[static_cast<size_t>(i)] = a ^ c ^ d ^ e;
    });
    EXPECT_EQ(got, want);
  }
}

void run_with_a_missing_arrival() {
  FiberPool pool(4);
  FiberBarrier b{4, 0, "the test's barrier"};
  pool.run([&](int i) {
    if (i != 2) pool.arrive_and_wait(b);  // fiber 2 never arrives: on a GPU, a hang
  });
}

TEST(CtaFiber, AnUnreachableBarrierAbortsWithItsName) {
  EXPECT_DEATH(run_with_a_missing_arrival(), "deadlock at the test's barrier: 3 of 4");
}

TEST(CtaFiber, EmulatedCtaShuffleMatchesTheButterfly) {
  // A whole emulated CTA through run_grid: each lane's xor-shuffle butterfly sums its warp.
  std::vector<float> out(static_cast<size_t>(2 * kThreads), 0.0f);
  run_grid(2, 1, 1, 8, [&](HostCtx& c, int x, int, int, uint16_t*) {
    float v = static_cast<float>(c.tid() + 1000 * x);
    for (int m = 16; m >= 1; m /= 2) v += c.shfl_xor(v, m);
    out[static_cast<size_t>(x * kThreads + c.tid())] = v;
  });
  for (int x = 0; x < 2; ++x)
    for (int t = 0; t < kThreads; ++t) {
      const int w = t / 32;
      float expect = 0;
      for (int l = 0; l < 32; ++l) expect += static_cast<float>(w * 32 + l + 1000 * x);
      EXPECT_EQ(out[static_cast<size_t>(x * kThreads + t)], expect) << "cta " << x << " thread " << t;
    }
}

// cp.async in the deferred mode: a copy is visible only after the wait that retires its group
// (wait_group 1 leaves the newest group pending), and a read before it sees the old contents; in
// the immediate mode the same reads see the data at once.
TEST(CtaFiber, DeferredCpAsyncIsVisibleOnlyAfterItsWait) {
  alignas(16) static const uint16_t src[2][8] = {{1, 2, 3, 4, 5, 6, 7, 8}, {9, 10, 11, 12, 13, 14, 15, 16}};
  for (const CpAsync mode : {CpAsync::deferred, CpAsync::immediate}) {
    const ScopedCpAsync scoped(mode);
    std::vector<int> seen;  // thread 0's reads: before any wait, after wait_one, after wait_all
    run_grid(1, 1, 1, 16, [&](HostCtx& c, int, int, int, uint16_t* smem) {
      if (c.tid() == 0) {
        c.cp_async16(smem, src[0], true);
        c.cp_async_commit();
        c.cp_async16(smem + 8, src[1], true);
        c.cp_async_commit();
        seen.push_back(smem[0]);
        seen.push_back(smem[8]);
        c.cp_async_wait_one();  // the first group only
        seen.push_back(smem[0]);
        seen.push_back(smem[8]);
        c.cp_async_wait_all();
        seen.push_back(smem[8]);
      }
    });
    const int poison = 0x7fff;
    if (mode == CpAsync::deferred) EXPECT_EQ(seen, (std::vector<int>{poison, poison, 1, poison, 9}));
    else EXPECT_EQ(seen, (std::vector<int>{1, 9, 1, 9, 9}));
  }
}

TEST(CtaFiber, DeferredCpAsyncNeverCommittedNeverLands) {
  alignas(16) static const uint16_t src[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  const ScopedCpAsync scoped(CpAsync::deferred);
  int seen = -1;
  run_grid(1, 1, 1, 8, [&](HostCtx& c, int, int, int, uint16_t* smem) {
    if (c.tid() != 0) return;
    c.cp_async16(smem, src, true);
    c.cp_async_wait_all();  // no commit: the copy is in no group, so nothing is waited for
    seen = smem[0];
    c.cp_async_commit();  // (a CTA may not end with it in flight)
    c.cp_async_wait_all();
  });
  EXPECT_EQ(seen, 0x7fff);
}

TEST(CtaFiber, ACtaEndingWithACopyInFlightAborts) {
  alignas(16) static const uint16_t src[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  for (const bool commit : {false, true})
    EXPECT_DEATH(run_grid(1, 1, 1, 8,
                          [&](HostCtx& c, int, int, int, uint16_t* smem) {
                            if (c.tid() != 5) return;
                            c.cp_async16(smem, src, true);
                            if (commit) c.cp_async_commit();
                          }),
                 "thread 5 ends its CTA with 1 cp.async copies not waited for");
}

// ldmatrix: lane l addresses row l % 8 of matrix l / 8 but receives elements of other lanes' rows,
// so each lane storing its own row and the warp loading the rows without a barrier races.
TEST(CtaFiberRaces, LdmatrixReadsOtherLanesRows) {
  const auto run = [](bool barrier) {
    run_grid(1, 1, 1, 32 * 8, [&](HostCtx& c, int, int, int, uint16_t* smem) {
      if (c.tid() < 32)
        for (int e = 0; e < 8; ++e) c.st_shared(smem + 8 * c.tid() + e, static_cast<uint16_t>(e));
      if (barrier) c.sync();
      if (c.tid() < 32) {
        uint32_t r[4];
        c.ldsm_x4(r, smem + 8 * c.tid());
      }
    });
  };
  run(true);
  EXPECT_DEATH(run(false), "race at element [0-9]+: thread [0-9]+'s load/ldmatrix in barrier interval 0 and thread "
                           "[0-9]+'s store");
}


// The race check (cta_emu.h, RaceShadow): accesses of different threads to one shared element,
// one a write, with no barrier between them abort; the same accesses ordered by a barrier (and,
// for a cp.async, by the issuing thread's wait before it) do not.
void store_then_load(bool barrier) {
  run_grid(1, 1, 1, 8, [&](HostCtx& c, int, int, int, uint16_t* smem) {
    float* f = reinterpret_cast<float*>(smem);
    if (c.tid() == 0) c.st_shared(f, 1.f);
    if (barrier) c.sync();
    if (c.tid() == 1) (void)c.ld_shared(f);
  });
}
void copy_then_read(bool wait, bool barrier, int reader) {
  alignas(16) static const uint16_t src[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  run_grid(1, 1, 1, 8, [&](HostCtx& c, int, int, int, uint16_t* smem) {
    if (c.tid() == 0) {
      c.cp_async16(smem, src, true);
      c.cp_async_commit();
      if (wait) c.cp_async_wait_all();
    }
    if (barrier) c.sync();
    if (c.tid() == reader) (void)c.ld_shared(smem);
  });
}
void load_then_copy(bool barrier) {  // the prefetch over a tile another thread still reads
  alignas(16) static const uint16_t src[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  run_grid(1, 1, 1, 8, [&](HostCtx& c, int, int, int, uint16_t* smem) {
    if (c.tid() == 1) (void)c.ld_shared(smem + 2);
    if (barrier) c.sync();
    if (c.tid() == 0) {
      c.cp_async16(smem, src, true);
      c.cp_async_commit();
      c.cp_async_wait_all();
    }
  });
}

TEST(CtaFiberRaces, UnorderedAccessesAbortOrderedOnesDoNot) {
  for (const CpAsync mode : {CpAsync::immediate, CpAsync::deferred}) {
    const ScopedCpAsync scoped(mode);
    store_then_load(true);
    copy_then_read(true, true, 1);
    copy_then_read(true, false, 0);  // its own copy, after its wait
    load_then_copy(true);
    EXPECT_DEATH(store_then_load(false), "race at element 0: thread 1's load/ldmatrix in barrier interval 0 and "
                                         "thread 0's store");
    EXPECT_DEATH(copy_then_read(true, false, 1), "thread 1's load/ldmatrix in barrier interval 0 and thread 0's cp.async "
                                                 "in intervals 0 to 0");
    // never waited for: thread 1's read races with it, or thread 0 ends its CTA first
    EXPECT_DEATH(copy_then_read(false, true, 1), "thread 1's load/ldmatrix in barrier interval 1 and thread 0's cp.async "
                                                 "in intervals 0 to its wait|thread 0 ends its CTA with 1 cp.async");
    EXPECT_DEATH(copy_then_read(false, false, 0), "thread 0's load/ldmatrix in barrier interval 0 and thread 0's cp.async");
    // reported by whichever of the two comes second in the fibers' order
    EXPECT_DEATH(load_then_copy(false), "race at element 2: thread [01]'s (cp.async|load/ldmatrix) in barrier interval 0 "
                                        "and thread [01]'s (cp.async|load/ldmatrix) in intervals 0 to 0");
  }
}

}  // namespace
}  // namespace dcp::attn::emu
