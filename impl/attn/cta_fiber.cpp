// See cta_fiber.h.
#include "attn/cta_fiber.h"

#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "core/sanitizer.h"
#ifdef DCP_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

// The fast switch. glibc's swapcontext saves and restores the signal mask, one rt_sigprocmask
// system call per switch: 5.5 million of them in one emulated flash ring case (strace -c), 39 s
// of test_attn's 100 s (sys time, 2026-12-05). Fibers never change the signal mask, so on x86-64
// the switch below saves only what the System V AMD64 ABI (section 3.2.1, "Registers") makes
// callee-saved: rbx, rbp, r12-r15, the stack pointer, MXCSR and the x87 control word (the
// direction flag is clear at every call). Not with a shadow stack (-fcf-protection=return or
// full: __CET__ & 2), which would refuse its `ret` onto another stack, nor on x32 (__ILP32__);
// there, and on other architectures, only swapcontext. It has no call-frame information: a
// debugger's backtrace stops inside it (FiberPool::entry's frames end with a zero return address).
#if defined(__x86_64__) && !defined(__ILP32__) && !(defined(__CET__) && (__CET__ & 2))
#define DCP_FIBER_FAST_SWITCH 1
// dcp_attn_emu_fiber_switch(void** save_sp, void* load_sp): pushes the callee-saved state on the
// current stack, stores the stack pointer in *save_sp, loads load_sp and pops the state saved
// there. A frame it pops: [rsp] x87 control word, [rsp+8] MXCSR, then r15, r14, r13, r12, rbx,
// rbp and the return address. Global but hidden: one definition, resolved within the binary.
asm(R"(
  .pushsection .text
  .p2align 4
  .globl dcp_attn_emu_fiber_switch
  .hidden dcp_attn_emu_fiber_switch
  .type dcp_attn_emu_fiber_switch, @function
dcp_attn_emu_fiber_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $16, %rsp
  fnstcw (%rsp)
  stmxcsr 8(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  fldcw (%rsp)
  ldmxcsr 8(%rsp)
  addq $16, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size dcp_attn_emu_fiber_switch, .-dcp_attn_emu_fiber_switch
  .popsection
)");
extern "C" void dcp_attn_emu_fiber_switch(void** save_sp, void* load_sp);
#else
#define DCP_FIBER_FAST_SWITCH 0
#endif

namespace dcp::attn::emu {

namespace {

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "CTA emulator: %s\n", what);
  std::abort();
}

thread_local FiberPool* tl_pool = nullptr;

#if DCP_FIBER_FAST_SWITCH
// The frame the fast switch pops to start a fiber at `start`, built below the top of its stack:
// after the pops, `ret` enters start with the stack pointer 8 above a 16-byte boundary and a zero
// return address on it, as a call would (the ABI's alignment; backtraces end there). The control
// words are the calling thread's (as getcontext gives a ucontext fiber: its rounding mode, FTZ
// and DAZ). Returns the stack pointer to load.
void* initial_frame(const void* stack_lo, size_t stack_bytes, void (*start)()) {
  auto top = reinterpret_cast<uintptr_t>(stack_lo) + stack_bytes;
  top &= ~uintptr_t{15};
  uint64_t* sp = reinterpret_cast<uint64_t*>(top) - 10;  // 80 bytes: a multiple of 16
  std::memset(sp, 0, 10 * sizeof(uint64_t));  // r15 .. rbp zero; sp[9]: start's return address 0
  uint16_t fcw = 0;
  uint32_t mxcsr = 0;
  asm volatile("fnstcw %0" : "=m"(fcw));
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  std::memcpy(&sp[0], &fcw, sizeof fcw);
  std::memcpy(&sp[1], &mxcsr, sizeof mxcsr);
  sp[8] = reinterpret_cast<uint64_t>(start);
  return sp;
}
#else
// Without the fast switch a pool never selects it (the constructor falls back to ucontext).
[[noreturn]] void* initial_frame(const void*, size_t, void (*)()) { die("no fast fiber switch here"); }
[[noreturn]] void dcp_attn_emu_fiber_switch(void**, void*) { die("no fast fiber switch here"); }
#endif

}  // namespace

struct FiberPool::Fiber {
  void* sp = nullptr;  // FiberSwitch::fast: the saved stack pointer while switched out
  ucontext_t uc{};     // FiberSwitch::ucontext
  void* map = nullptr;  // guard page + stack
  size_t map_bytes = 0;
  const void* stack_lo = nullptr;
  size_t stack_bytes = 0;
  FiberBarrier* wait = nullptr;
  uint64_t wait_generation = 0;
  bool done = false;
  void* fake_stack = nullptr;  // ASan's fake stack of this context while it is switched out

  bool runnable() const { return !done && (wait == nullptr || wait->generation != wait_generation); }
};

bool FiberPool::fast_switch_available() { return DCP_FIBER_FAST_SWITCH != 0; }

FiberPool::FiberPool(int fibers, size_t stack_bytes, FiberSwitch how)
    : main_(std::make_unique<Fiber>()),
      switch_(how == FiberSwitch::fast && !fast_switch_available() ? FiberSwitch::ucontext : how) {
  if (fibers < 1) die("a fiber pool needs at least one fiber");
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  stack_bytes = (stack_bytes + page - 1) / page * page;
  fibers_.reserve(static_cast<size_t>(fibers));
  for (int i = 0; i < fibers; ++i) {
    auto f = std::make_unique<Fiber>();
    f->map_bytes = stack_bytes + page;
    f->map = mmap(nullptr, f->map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (f->map == MAP_FAILED) die("mmap of a fiber stack failed");
    if (mprotect(f->map, page, PROT_NONE) != 0) die("mprotect of a fiber stack's guard page failed");
    f->stack_lo = static_cast<char*>(f->map) + page;
    f->stack_bytes = stack_bytes;
    fibers_.push_back(std::move(f));
  }
}

FiberPool::~FiberPool() {
  for (auto& f : fibers_) {
#ifdef DCP_ASAN
    // A fiber's last frames never returned: their redzones would stay poisoned for whatever is
    // mapped at these addresses next.
    __asan_unpoison_memory_region(f->stack_lo, f->stack_bytes);
#endif
    munmap(f->map, f->map_bytes);
  }
}

void FiberPool::run(std::function<void(int)> body) {
  if (current_ != -1) die("FiberPool::run called from inside one of its fibers");
  body_ = std::move(body);
  done_ = 0;
  for (auto& f : fibers_) {
    f->wait = nullptr;
    f->done = false;
#ifdef DCP_ASAN
    __asan_unpoison_memory_region(f->stack_lo, f->stack_bytes);  // frames of an earlier run
#endif
    if (switch_ == FiberSwitch::fast) {
      f->sp = initial_frame(f->stack_lo, f->stack_bytes, &FiberPool::entry);  // entry() never returns
      continue;
    }
    if (getcontext(&f->uc) != 0) die("getcontext failed");
    f->uc.uc_stack.ss_sp = const_cast<void*>(f->stack_lo);
    f->uc.uc_stack.ss_size = f->stack_bytes;
    f->uc.uc_link = nullptr;  // entry() never returns: the last fiber switches back here
    makecontext(&f->uc, &FiberPool::entry, 0);
#ifdef DCP_ASAN
    // ASan's swapcontext interceptor clears the shadow of the whole target stack at every switch
    // when the context names its stack (a madvise per switch, and it wipes the redzones of the
    // resumed fiber's live frames). glibc's swapcontext does not read uc_stack after makecontext,
    // so the stack is forgotten here; the switch annotations tell ASan about it instead.
    f->uc.uc_stack.ss_sp = nullptr;
    f->uc.uc_stack.ss_size = 0;
#endif
  }
  main_->stack_lo = nullptr;  // run()'s caller may be another thread or fiber than last time
  main_->stack_bytes = 0;
  FiberPool* const outer = tl_pool;
  tl_pool = this;
  jump_to(0);
  tl_pool = outer;
  body_ = nullptr;
  if (done_ != fibers()) die("fibers left unfinished");
}

void FiberPool::entry() {
  FiberPool* const p = tl_pool;
#ifdef DCP_ASAN
  const void* lo = nullptr;
  size_t bytes = 0;
  __sanitizer_finish_switch_fiber(nullptr, &lo, &bytes);
  if (p->main_->stack_lo == nullptr) {
    p->main_->stack_lo = lo;  // the first switch comes from run()'s caller
    p->main_->stack_bytes = bytes;
  }
#endif
  const int i = p->current_;
  try {
    p->body_(i);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "CTA emulator: thread %d threw: %s\n", i, e.what());
    std::abort();
  } catch (...) {
    die("a thread threw a non-standard exception");
  }
  p->fibers_[static_cast<size_t>(i)]->done = true;
  ++p->done_;
  p->yield();
  die("a finished fiber was resumed");
}

void FiberPool::arrive_and_wait(FiberBarrier& b) {
  if (current_ < 0) die("a barrier outside a fiber");
  if (++b.arrived == b.expected) {
    b.arrived = 0;
    ++b.generation;
    return;
  }
  Fiber& self = *fibers_[static_cast<size_t>(current_)];
  self.wait = &b;
  self.wait_generation = b.generation;
  yield();
  self.wait = nullptr;
}

void FiberPool::yield() {
  const int n = fibers();
  for (int k = 1; k <= n; ++k) {
    const int j = (current_ + k) % n;
    if (fibers_[static_cast<size_t>(j)]->runnable()) {
      if (j != current_) jump_to(j);
      return;
    }
  }
  if (done_ == n) {
    jump_to(-1);
    return;
  }
  for (const auto& f : fibers_)
    if (!f->done && f->wait != nullptr) {
      std::fprintf(stderr,
                   "CTA emulator: deadlock at %s: %d of %d threads arrived and no other thread can run (%d finished)\n",
                   f->wait->what, f->wait->arrived, f->wait->expected, done_);
      std::abort();
    }
  die("no fiber can run");
}

void FiberPool::jump_to(int next) {
  Fiber& from = current_ < 0 ? *main_ : *fibers_[static_cast<size_t>(current_)];
  Fiber& to = next < 0 ? *main_ : *fibers_[static_cast<size_t>(next)];
  current_ = next;
#ifdef DCP_ASAN
  // A finished fiber is never resumed: nullptr lets ASan free its fake stack.
  __sanitizer_start_switch_fiber(from.done ? nullptr : &from.fake_stack, to.stack_lo, to.stack_bytes);
#endif
  if (switch_ == FiberSwitch::fast)
    dcp_attn_emu_fiber_switch(&from.sp, to.sp);
  else if (swapcontext(&from.uc, &to.uc) != 0)
    die("swapcontext failed");
#ifdef DCP_ASAN
  __sanitizer_finish_switch_fiber(from.fake_stack, nullptr, nullptr);  // the bounds are known here
#endif
}

}  // namespace dcp::attn::emu
