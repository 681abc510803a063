// The device side of the Ctx the shared CTA bodies (flash/flash_{fwd,bwd}_block.h) are written
// against: thread index, __syncthreads, warp shuffle, ldmatrix x4 (plain and .trans), cp.async
// with its groups, plain shared stores and loads, fp32 atomic add and the warp-level MMA
// m16n8k16 (PTX mma.sync.aligned, bf16 or fp16 inputs, fp32 accumulators; sm_80 and later).
// The host emulator's Ctx (flash_emu.cpp) has the same members.
#pragma once

#include <cstdint>

namespace dcp::attn::flash {

struct DeviceCtx {
  __device__ __forceinline__ int tid() const { return static_cast<int>(threadIdx.x); }
  __device__ __forceinline__ void sync() const { __syncthreads(); }
  __device__ __forceinline__ float shfl_xor(float v, int mask) const { return __shfl_xor_sync(0xffffffffu, v, mask); }
  __device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const uint16_t* p) const {
    const auto a = static_cast<uint32_t>(__cvta_generic_to_shared(p));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a)
                 : "memory");
  }
  __device__ __forceinline__ void ldsm_x4_t(uint32_t (&r)[4], const uint16_t* p) const {
    const auto a = static_cast<uint32_t>(__cvta_generic_to_shared(p));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a)
                 : "memory");
  }
  // 16 bytes global -> shared, asynchronous (cp.async.cg, sm_80+); valid = false zero-fills
  // (src-size 0: nothing is read, src must still be a global address).
  __device__ __forceinline__ void cp_async16(uint16_t* dst, const uint16_t* src, bool valid) const {
    const auto d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 16 : 0)
                 : "memory");
  }
  __device__ __forceinline__ void cp_async_commit() const { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
  __device__ __forceinline__ void cp_async_wait_one() const { asm volatile("cp.async.wait_group 1;\n" ::: "memory"); }
  __device__ __forceinline__ void cp_async_wait_all() const { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }
  __device__ __forceinline__ void atomic_add(float* p, float v) const { atomicAdd(p, v); }
  // Plain shared-memory stores and loads (the host emulator checks them for races).
  template <class T>
  __device__ __forceinline__ void st_shared(T* p, T v) const { *p = v; }
  template <class T>
  __device__ __forceinline__ T ld_shared(const T* p) const { return *p; }
  template <class E>
  __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) const {
    if constexpr (E::kIsBf16) {
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
          "{%0,%1,%2,%3};\n"
          : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    } else {
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
          "{%0,%1,%2,%3};\n"
          : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
  }
};

}  // namespace dcp::attn::flash
