// Builds this rank's MicroBatchInput from the token sequences of its group (Megatron's
// build_packed_microbatches + get_batch_on_this_rank_for_sequence_packing, reference §1 steps
// 5 and the per-micro-batch slice): pack the sequences in order (THD), pad each to a multiple of
// 2*cp (or to pad_to rows: the bshd layout), derive next-token labels and the loss mask on the
// whole packed batch (attn::next_token_targets: nothing crosses a sequence or padding
// boundary), then take this rank's zigzag shard of tokens, labels and mask.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/model.h"

namespace dcp::model {

// seqs: the group's sequences in pack order (token ids); g: this rank's group of that micro-batch.
MicroBatchInput make_microbatch_input(const std::vector<std::span<const int32_t>>& seqs,
                                      comm::Communicator& g, int64_t pad_to = 0);

// Real targets of one sequence of `len` tokens: next-token (len - 1) and MTP t+2 (len - 2).
inline int64_t main_targets(int64_t len) { return len > 1 ? len - 1 : 0; }
inline int64_t mtp_targets(int64_t len) { return len > 2 ? len - 2 : 0; }

}  // namespace dcp::model
