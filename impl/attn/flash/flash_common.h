// Shared by the tensor-core attention kernels (flash_fwd_block.h) on the device and by their host
// emulator (attn/flash_emu.cpp): 16-bit element types with their float conversions, the register
// fragment layout of the warp-level MMA m16n8k16, and the tile sizes. Portable C++17 (nvcc
// compiles .cu files as C++17; the host emulator is C++20): no CUDA header is needed on the host.
//
// Fragment layout of mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32
// (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type"; the same layouts as
// CUTLASS/CuTe's SM80_16x8x16 traits, ALayout SM80_16x16_Row, BLayout SM80_8x16_Row, CLayout
// SM80_16x8_Row). A warp of 32 lanes; g = lane / 4 ("groupID"), t = lane % 4
// ("threadID_in_group"):
//   A (16 x 16, row-major, 4 x .b32 = 8 elements a0..a7): element e sits at
//        row = g + 8 * ((e >> 1) & 1), col = 2 t + (e & 1) + 8 * (e >> 2);
//   B (16 x 8, "col": K x N with K contiguous, 2 x .b32 = b0..b3): element e at
//        k = 2 t + (e & 1) + 8 * (e >> 1), n = g;
//   C, D (16 x 8, f32, c0..c3): element e at row = g + 8 * (e >> 1), col = 2 t + (e & 1).
// A .b32 register holds two consecutive elements, the lower-numbered one in its low 16 bits.
// Two C tiles side by side (columns 0-7 and 8-15) hold exactly the elements of one A fragment
// (c0c1 of tile 0 = a0a1, c2c3 = a2a3, c0c1 of tile 1 = a4a5, c2c3 = a6a7): FlashAttention-2's
// register reuse of the score accumulator S as the A operand P of P·V.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define DCP_HD __host__ __device__ __forceinline__
#define DCP_UNROLL _Pragma("unroll")
#else
#define DCP_HD inline
#define DCP_UNROLL
#endif

namespace dcp::attn::flash {

// Tiles: a CTA of kWarps warps. The forward's takes kFwdBlockM query rows of one (sequence, head)
// (below) and walks the keys in blocks of kBlockN (FlashAttention-2's forward split: each warp
// owns whole query rows, so the softmax never crosses warps); the backward's takes kBlockN keys
// (16 per warp) and walks the queries in blocks of kBlockM.
inline constexpr int kWarps = 4;
inline constexpr int kThreads = 32 * kWarps;
inline constexpr int kBlockM = 16 * kWarps;  // the backward's query block
inline constexpr int kBlockN = 64;
// The forward's warps own kFwdTilesM m16 tiles each (32 query rows), so its CTA takes kFwdBlockM
// = 128 rows: FlashAttention-2's forward tile for head dims 64 and 128 (Flash_fwd_kernel_traits
// <d, 128, 64 or 128, 4 warps>, csrc/flash_attn/src/flash_fwd_launch_template.h). Why two tiles:
// each ldmatrix.x4 of K (S = Q K^T) or V (O += P V) feeds 2 MMAs per m16 tile a warp owns. An
// ldmatrix.x4 moves 512 bytes of shared memory, 4 of an SM's cycles at 128 bytes per cycle; an
// m16n8k16 (4096 FLOP) is 1 cycle of an H100 SM's dense bf16 peak (989 TFLOPS / 132 SMs /
// 1.83 GHz = 4096 FLOP per cycle, H100 SXM datasheet). Counting the Q and P operands too, d = 128:
// one tile per warp issues 72 ldmatrix per 128 MMAs per key block (2.25 cycles of shared memory
// per MMA: at most ~44% of the peak), two tiles 80 per 256 (1.25: ~80%), so with two the MMAs
// (mma.sync does not reach the peak on Hopper) rather than shared memory bound the loop.
// bench_attn_cuda times kFwdTilesM = 1 beside it on the device (the measured check of this).
inline constexpr int kFwdTilesM = 2;
// Query rows of a forward CTA whose warps own tiles_m m16 tiles each.
DCP_HD constexpr int fwd_block_rows(int tiles_m) { return 16 * tiles_m * kWarps; }
inline constexpr int kFwdBlockM = fwd_block_rows(kFwdTilesM);
// Shared-memory row stride in elements: head_dim + 8 (16 bytes of padding per row, so that the
// 8 rows a fragment load touches start in different banks; keeps 16-byte alignment of rows).
DCP_HD constexpr int smem_stride(int head_dim) { return head_dim + 8; }

// --- MMA fragment layout (see top) ---
DCP_HD constexpr int frag_a_row(int lane, int e) { return lane / 4 + 8 * ((e >> 1) & 1); }
DCP_HD constexpr int frag_a_col(int lane, int e) { return 2 * (lane % 4) + (e & 1) + 8 * (e >> 2); }
DCP_HD constexpr int frag_b_k(int lane, int e) { return 2 * (lane % 4) + (e & 1) + 8 * (e >> 1); }
DCP_HD constexpr int frag_b_n(int lane, int) { return lane / 4; }
DCP_HD constexpr int frag_c_row(int lane, int e) { return lane / 4 + 8 * (e >> 1); }
DCP_HD constexpr int frag_c_col(int lane, int e) { return 2 * (lane % 4) + (e & 1); }

// --- ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16 (PTX ISA "Warp-level matrix load
// instruction: ldmatrix") ---
// Four 8x8 matrices of 16-bit elements; lanes 8j .. 8j+7 give the addresses of matrix j's rows
// 0..7 (16-byte aligned). Lane i receives in register j the elements (row i/4, cols 2(i%4),
// 2(i%4)+1) of matrix j, or with .trans those of the transposed matrix: (rows 2(i%4), 2(i%4)+1
// of col i/4). Which row a lane addresses for the operands here (tile row, tile col offsets):
//   "A" pattern: row (lane % 8) + 8 ((lane / 8) % 2), col 8 (lane / 16): a 16 x 16 A tile
//       (registers a0a1, a2a3, a4a5, a6a7), or with .trans the B fragments of two n-tiles from a
//       k-major tile (rows = k, cols = n: V in O = P V);
//   "B" pattern: row (lane % 8) + 8 (lane / 16), col 8 ((lane / 8) % 2): the B fragments of two
//       n-tiles from an n-major tile (rows = n, cols = k: K in S = Q K^T; the four registers are
//       {b0b1, b2b3} of n-tile 0, then {b0b1, b2b3} of n-tile 1), or with .trans an A tile stored
//       k-major (rows = k, cols = m: dS^T in dQ = dS K).
DCP_HD constexpr int ldsm_a_row(int lane) { return lane % 8 + 8 * ((lane / 8) % 2); }
DCP_HD constexpr int ldsm_a_col(int lane) { return 8 * (lane / 16); }
DCP_HD constexpr int ldsm_b_row(int lane) { return lane % 8 + 8 * (lane / 16); }
DCP_HD constexpr int ldsm_b_col(int lane) { return 8 * ((lane / 8) % 2); }

// --- 16-bit element types: bits in uint16_t, conversions round to nearest even ---
DCP_HD uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}
DCP_HD float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

struct Bf16 {
  static constexpr bool kIsBf16 = true;
  static constexpr const char* kName = "bf16";
  DCP_HD static float to_float(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }
  DCP_HD static uint16_t from_float(float f) {
#if defined(__CUDA_ARCH__)
    return __bfloat16_as_ushort(__float2bfloat16_rn(f));  // the same rounding, in hardware
#endif
    const uint32_t x = float_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x0040u);  // quiet NaN
    return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
  }
};

struct Fp16 {
  static constexpr bool kIsBf16 = false;
  static constexpr const char* kName = "fp16";
  DCP_HD static float to_float(uint16_t h) {
#if defined(__CUDA_ARCH__)
    return __half2float(__ushort_as_half(h));
#endif
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    const uint32_t mant = h & 0x3ffu;
    if (exp == 0) {  // zero or subnormal: mant * 2^-24, exact in float
      const float v = static_cast<float>(mant) * 5.9604644775390625e-8f;
      return bits_float(float_bits(v) | sign);
    }
    if (exp == 31) return bits_float(sign | 0x7f800000u | (mant << 13));
    return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
  }
  DCP_HD static uint16_t from_float(float f) {
#if defined(__CUDA_ARCH__)
    return __half_as_ushort(__float2half_rn(f));  // the same rounding, in hardware
#endif
    uint32_t x = float_bits(f);
    const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
    x &= 0x7fffffffu;
    if (x > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
    if (x >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 rounds to inf
    if (x < 0x38800000u) {  // below the smallest normal 2^-14: multiples of 2^-24, ties to even
      const float scaled = bits_float(x) * 16777216.0f;  // exact
      uint32_t q = static_cast<uint32_t>(scaled);
      const float rem = scaled - static_cast<float>(q);
      if (rem > 0.5f || (rem == 0.5f && (q & 1u))) ++q;
      return static_cast<uint16_t>(sign | q);
    }
    const uint32_t r = x + 0x0fffu + ((x >> 13) & 1u);
    return static_cast<uint16_t>(sign | ((r >> 13) - (112u << 10)));
  }
};

// Two elements in one .b32 register, the first in the low half.
DCP_HD uint32_t pack2(uint16_t lo, uint16_t hi) { return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16); }
DCP_HD uint16_t unpack_lo(uint32_t r) { return static_cast<uint16_t>(r & 0xffffu); }
DCP_HD uint16_t unpack_hi(uint32_t r) { return static_cast<uint16_t>(r >> 16); }

DCP_HD float fast_exp2(float x) {
#if defined(__CUDA_ARCH__)
  return exp2f(x);
#else
  return std::exp2(x);
#endif
}
DCP_HD float fast_log(float x) {
#if defined(__CUDA_ARCH__)
  return logf(x);
#else
  return std::log(x);
#endif
}

// 8 elements (16 bytes, both 16-byte aligned) from src to dst; zeros when src is null.
DCP_HD void copy8(uint16_t* dst, const uint16_t* src) {
#if defined(__CUDA_ARCH__)
  *reinterpret_cast<uint4*>(dst) = src ? *reinterpret_cast<const uint4*>(src) : make_uint4(0, 0, 0, 0);
#else
  if (src) std::memcpy(dst, src, 16);
  else std::memset(dst, 0, 16);
#endif
}

inline constexpr float kLog2e = 1.4426950408889634f;
inline constexpr float kLn2 = 0.6931471805599453f;

}  // namespace dcp::attn::flash
