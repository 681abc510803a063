// Host entries to the THD ring helper kernels (cuda/thd_kernels.h) with host tensors in and out
// (device copies made here), for the GPU tests and host-side callers; each mirrors the host
// function named beside it. T: float, or uint16_t for bf16 / fp16 storage. Only built with CUDA;
// throws dcp::Error on any CUDA error and InputError/Error on sizes that do not match.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "attn/attn_shape.h"
#include "attn/thd.h"

namespace dcp::attn {

// shard_rows (thd.h).
template <typename T>
std::vector<T> thd_partition_cuda(std::span<const T> global, int64_t row_elems, const ThdBatch& b, int cp,
                                  int rank);
// unshard_rows (thd.h): shards = every rank's shard in rank order.
template <typename T>
std::vector<T> thd_unpartition_cuda(std::span<const T> shards, int64_t row_elems, const ThdBatch& b, int cp);
// dst[i] = src[rows[i]] (read-half with rows = zigzag_half_rows).
template <typename T>
std::vector<T> thd_gather_rows_cuda(std::span<const T> src, std::span<const int64_t> rows, int64_t row_elems);
// lse_merge (attn_tiles.h) into acc rows `rows` (empty: row i), in place.
void thd_lse_merge_cuda(const AttnShape& s, std::span<const float> out_step, std::span<const float> lse_step,
                        std::span<float> out_acc, std::span<float> lse_acc, std::span<const int64_t> rows);
// acc[rows[i]] += step[i] (empty rows: acc[i] += step[i]), in place.
void thd_add_rows_cuda(std::span<const float> step, std::span<float> acc, std::span<const int64_t> rows,
                       int64_t row_elems);

}  // namespace dcp::attn
