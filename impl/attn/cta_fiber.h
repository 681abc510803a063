// Cooperative fibers for the CTA emulator (attn/cta_emu.h): n fibers run body(i) on the calling
// thread, switching only at a FiberBarrier, in a fixed round-robin order (so a run is
// deterministic). A barrier that can never complete (a fiber waits while every other one has
// finished or waits elsewhere: on the GPU a hang) aborts with the barrier's name. Stacks are
// mmap'ed with a guard page below each, so an overflow faults instead of corrupting a neighbour.
// Context switches on x86-64 through a switch of the ABI's callee-saved registers (no system
// call; cta_fiber.cpp), elsewhere (or on request: FiberSwitch) through POSIX ucontext (glibc);
// under AddressSanitizer every switch is announced with __sanitizer_{start,finish}_switch_fiber
// so ASan follows the stacks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace dcp::attn::emu {

// A barrier of `expected` fibers (std::barrier's arrive_and_wait semantics): the last to arrive
// releases the others and goes on without a switch.
struct FiberBarrier {
  int expected = 0;
  int arrived = 0;
  const char* what = "";  // named in the deadlock message
  uint64_t generation = 0;
};

// How a pool switches between fibers: `fast` (x86-64: the ABI's callee-saved registers, no system
// call; cta_fiber.cpp) or `ucontext` (glibc's swapcontext, which also saves the signal mask with a
// system call per switch). Both give the same schedule and results; tests run both.
enum class FiberSwitch { fast, ucontext };

class FiberPool {
 public:
  static constexpr size_t kDefaultStackBytes = 512 * 1024;
  // `fast` where available (fast_switch_available()), else ucontext.
  explicit FiberPool(int fibers, size_t stack_bytes = kDefaultStackBytes, FiberSwitch how = FiberSwitch::fast);
  ~FiberPool();
  FiberPool(const FiberPool&) = delete;
  FiberPool& operator=(const FiberPool&) = delete;

  // Runs body(0) ... body(n - 1), one per fiber, until all have returned. An exception out of
  // a body aborts (as one out of a std::thread would terminate).
  void run(std::function<void(int)> body);
  // Called from inside a fiber: waits until `expected` fibers have arrived at b.
  void arrive_and_wait(FiberBarrier& b);
  int fibers() const { return static_cast<int>(fibers_.size()); }
  FiberSwitch switch_used() const { return switch_; }
  static bool fast_switch_available();

 private:
  struct Fiber;
  static void entry();
  void yield();  // to the next runnable fiber (round robin), or back to run() when all are done
  void jump_to(int next);

  std::vector<std::unique_ptr<Fiber>> fibers_;
  std::unique_ptr<Fiber> main_;  // the context of run()'s caller
  std::function<void(int)> body_;
  int current_ = -1;  // -1: run()'s caller
  int done_ = 0;
  FiberSwitch switch_;
};

}  // namespace dcp::attn::emu
