// THD ring helper kernels (TransformerEngine's set for context parallelism over packed
// sequences; reference/megatron-dynamic-cp.md §4): zigzag partition and un-partition, read-half,
// LSE merge with output correction, gradient correction. Device pointers, an explicit stream,
// the launch status returned (cudaSuccess when there is nothing to do). C++17 so .cu files can
// include it. Layouts and the zigzag split: impl/attn/thd.h; the host functions each kernel is
// tested against are named per kernel.
//   elem_bytes: 2 (bf16 / fp16 storage) or 4 (fp32): partition, un-partition and read-half move
//   rows without looking at the values.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "attn/flash/thd_elems.h"

namespace dcp::attn::cuda {

// The zigzag split of a batch: cu_seqlens_padded [batch + 1] on the device, total rows, cp, rank
// (flash/thd_elems.h, shared with the host emulator).
using ZigzagLayout = flash::ZigzagLayout;

// local[t] = global[zigzag_global_row(t)] for the rank's total_tokens/cp rows (host: shard_rows).
cudaError_t thd_partition(const void* global, void* local, int elem_bytes, int64_t row_elems,
                          const ZigzagLayout& z, cudaStream_t stream);

// global[zigzag_global_row(t)] = local[t] (the rank's rows only; every rank's call together is
// host unshard_rows).
cudaError_t thd_unpartition(const void* local, void* global, int elem_bytes, int64_t row_elems,
                            const ZigzagLayout& z, cudaStream_t stream);

// dst[i] = src[rows[i]] for n_rows rows (read-half: rows = zigzag_half_rows on the device).
cudaError_t thd_gather_rows(const void* src, void* dst, const int64_t* rows, int64_t n_rows,
                            int elem_bytes, int64_t row_elems, cudaStream_t stream);

// Merges a step's partial attention (out_step [n_rows, heads, d], lse_step [n_rows, heads]) into
// the running result at rows[i] (or row i when rows is null): host lse_merge (attn_tiles.h), fp32.
// rows must not repeat an index (in-place updates; the host wrappers check it), nor below.
cudaError_t thd_lse_merge(const float* out_step, const float* lse_step, float* out_acc, float* lse_acc,
                          const int64_t* rows, int64_t n_rows, int heads, int head_dim, cudaStream_t stream);

// acc[rows[i]] += step[i] (or acc[i] when rows is null), fp32: a half step's dQ / dK / dV added
// into the rank's gradient.
cudaError_t thd_add_rows(const float* step, float* acc, const int64_t* rows, int64_t n_rows,
                         int64_t row_elems, cudaStream_t stream);

// fp32 <-> 16-bit (bf16 when `bf16`, else fp16; round to nearest even), n elements: a ring
// step's 16-bit kernel output into the fp32 corrections, and the corrected result back.
cudaError_t convert_to_f32(const uint16_t* src, float* dst, int64_t n, bool bf16, cudaStream_t stream);
// dst[i] = flash::uniform_elem / uniform_value(seed, i, scale) for i < n: random, non-zero inputs
// drawn on the device (flash/thd_elems.h), the values the host draws with the same call.
cudaError_t fill_uniform(uint16_t* dst, int64_t n, uint64_t seed, float scale, bool bf16, cudaStream_t stream);
cudaError_t fill_uniform(float* dst, int64_t n, uint64_t seed, float scale, cudaStream_t stream);
cudaError_t convert_from_f32(const float* src, uint16_t* dst, int64_t n, bool bf16, cudaStream_t stream);
// dst[i] = value for i < n: a ring's LSE accumulator starts at -inf (no step merged yet), which a
// byte memset cannot write.
cudaError_t fill_value(float* dst, int64_t n, float value, cudaStream_t stream);
// One thread that polls the GPU's global timer until `ns` nanoseconds have passed (at most 2^24
// polls, so it always ends): queued right before a timed region's start event, it keeps the GPU
// busy while the host queues the region's launches, so their launch latency is not timed on an
// idle GPU (helper-57's review of the calibration's timer). ns <= 0: nothing is launched.
cudaError_t busy_wait(int64_t ns, cudaStream_t stream);

}  // namespace dcp::attn::cuda
