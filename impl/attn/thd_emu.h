// Host emulator of the THD ring helper kernels (cuda/thd_kernels.cu): the same bodies
// (flash/thd_elems.h) run over every thread index on the CPU, with the same argument checks and
// the same poisoned outputs as the CUDA host entries (cuda/thd_cuda.h), whose signatures these
// mirror. The CPU tests (tests/test_thd_emu.cpp) check the kernels' code against the host
// functions named beside each entry without a GPU; tests/test_thd_cuda.cpp runs the same checks on
// one. Element order differs from a GPU's (threads run concurrently there), which no kernel
// depends on: no two indices write one element (row indices are checked unique where a kernel
// updates in place).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "attn/attn_shape.h"
#include "attn/thd.h"

namespace dcp::attn {

// shard_rows (thd.h).
template <typename T>
std::vector<T> thd_partition_emu(std::span<const T> global, int64_t row_elems, const ThdBatch& b, int cp, int rank);
// unshard_rows (thd.h): shards = every rank's shard in rank order.
template <typename T>
std::vector<T> thd_unpartition_emu(std::span<const T> shards, int64_t row_elems, const ThdBatch& b, int cp);
// dst[i] = src[rows[i]] (read-half with rows = zigzag_half_rows).
template <typename T>
std::vector<T> thd_gather_rows_emu(std::span<const T> src, std::span<const int64_t> rows, int64_t row_elems);
// lse_merge (attn_tiles.h) into acc rows `rows` (empty: row i), in place.
void thd_lse_merge_emu(const AttnShape& s, std::span<const float> out_step, std::span<const float> lse_step,
                       std::span<float> out_acc, std::span<float> lse_acc, std::span<const int64_t> rows);
// acc[rows[i]] += step[i] (empty rows: acc[i] += step[i]), in place.
void thd_add_rows_emu(std::span<const float> step, std::span<float> acc, std::span<const int64_t> rows,
                      int64_t row_elems);

// The argument checks of both sets of host entries (DCP_CHECK: dcp::Error naming the value).
namespace thd_args {
// Every index in [0, limit); unique where a kernel updates acc[rows[i]] in place (two threads
// on one row would race).
void rows(std::span<const int64_t> rows, int64_t limit, bool unique);
// A valid batch for cp, `elems` = total rows x row_elems, and the rank (if given) in [0, cp).
void partition(const char* who, size_t elems, int64_t row_elems, const ThdBatch& b, int cp,
               std::optional<int> rank = std::nullopt);
// src holds whole rows of row_elems > 0; rows index them.
void gather(const char* who, size_t src_elems, std::span<const int64_t> rows, int64_t row_elems);
// Sizes of a step and the running result for shape s; returns the step's rows.
int64_t lse_merge(const char* who, const AttnShape& s, size_t out_step, size_t lse_step, size_t out_acc,
                  size_t lse_acc, std::span<const int64_t> rows);
// Whole rows of row_elems > 0 in step and acc; returns the step's rows.
int64_t add_rows(const char* who, size_t step, size_t acc, std::span<const int64_t> rows, int64_t row_elems);
}  // namespace thd_args

}  // namespace dcp::attn
