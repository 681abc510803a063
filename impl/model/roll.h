// The packed, CP-aware roll of the MTP head: shift a per-token tensor left by one row inside
// each packed sequence, on zigzag shards, so that row t holds the value of row t + 1.
// Source: reference/megatron-dynamic-cp.md §5 "MTP under CP" (Megatron
// multi_token_prediction.py _roll_tensor_packed_seq) and landscape.md §4 (Megatron PRs
// #4494/#4495: the roll used the UNPADDED cu_seqlens to find the chunks, so with lengths that
// are not multiples of 2*cp tokens leaked across sequence boundaries).
//
// Global semantics (what a single rank computes on the whole batch): for sequence j occupying
// padded rows [P_j, P_{j+1}), rolled[t] = x[t + 1] for P_j <= t < P_{j+1} - 1 and
// rolled[P_{j+1} - 1] = fill. Chunks are ALWAYS taken from cu_seqlens_padded, never from the
// real lengths. Nothing crosses a sequence boundary.
//
// On rank r of cp, the local rows of sequence j are its front chunk (global chunk r) and its
// back chunk (global chunk 2cp-1-r), c_j rows each. Each chunk shifts left by one; its vacated
// last row receives the first row of the next global chunk:
//   front: chunk r+1 = the front chunk of rank r+1 (r < cp-1), or this rank's own back chunk
//          (r = cp-1, since 2cp-1-(cp-1) = cp);
//   back:  chunk 2cp-r = the back chunk of rank r-1 (r > 0), or past the end: fill (r = 0).
// Communication: one message to r-1 (the first row of every front chunk) and one to r+1 (the
// first row of every back chunk), all sequences batched; none at cp = 1.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "attn/thd.h"
#include "comm/communicator.h"

namespace dcp::model {

// x: this rank's shard [thd.total_tokens() / g.size()] (int32: tokens, labels, masks as 0/1).
std::vector<int32_t> roll_left_packed(comm::Communicator& g, const attn::ThdBatch& thd,
                                      std::span<const int32_t> x, int32_t fill);

// The same on the whole batch (single rank): the specification the CP version must equal.
std::vector<int32_t> roll_left_packed_ref(const attn::ThdBatch& thd, std::span<const int32_t> x,
                                          int32_t fill);

}  // namespace dcp::model
