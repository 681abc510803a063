// Packed THD batches and their zigzag ("DualChunkSwap") sharding over a CP group.
// Source: reference/megatron-dynamic-cp.md §4.1 (TE thd_partition_src_index,
// get_cu_seqlens_on_cp_rank); landscape.md §4 for the bugs this layout must not have.
//
// Layout. A batch of `batch` sequences is packed into total_tokens = cu_seqlens_padded[batch]
// rows. Sequence j occupies rows [cu_seqlens_padded[j], cu_seqlens_padded[j+1]); its first
// len_j = cu_seqlens[j+1] - cu_seqlens[j] rows are real tokens, the rest is padding. Padding
// therefore sits between sequences and after the last one; there is no other tail.
//
// Invariants (validate() checks them and throws InputError naming the index and values):
//   - cu_seqlens and cu_seqlens_padded are int32 [batch + 1], start at 0, never decrease;
//   - len_j <= padded_len_j and padded_len_j % (2*cp) == 0 (zero-length sequences are allowed);
//   - real and padded lengths are kept apart everywhere: nothing rounds len_j (TE #1930: a
//     length-7 sequence at cp=2 treated as 6), and padding rows are never attended as keys by
//     real queries and never enter the loss (TE #3331: tail padding attended).
//
// Zigzag split. Sequence j is cut into 2*cp chunks of c_j = padded_len_j / (2*cp) rows. Rank r
// holds chunk r ("front") then chunk 2cp-1-r ("back") of every sequence, in sequence order; its
// local sequence j occupies local rows [cu_seqlens_padded[j]/cp, cu_seqlens_padded[j+1]/cp).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/error.h"

namespace dcp::attn {

struct ThdBatch {
  std::vector<int32_t> cu_seqlens;         // [batch + 1] prefix sums of real lengths
  std::vector<int32_t> cu_seqlens_padded;  // [batch + 1] row offsets of each sequence

  int batch() const { return static_cast<int>(cu_seqlens_padded.size()) - 1; }
  int64_t total_tokens() const { return cu_seqlens_padded.back(); }
  int32_t seqlen(int j) const { return cu_seqlens[j + 1] - cu_seqlens[j]; }
  int32_t padded_seqlen(int j) const { return cu_seqlens_padded[j + 1] - cu_seqlens_padded[j]; }
};

// Throws InputError unless the batch satisfies the invariants above for this cp (>= 1).
void validate(const ThdBatch& b, int cp);
// The same checks without the divisibility by 2*cp (any padding): what single-rank code needs.
void validate_layout(const ThdBatch& b);

// Builds a batch from real lengths: each padded to the next multiple of 2*cp, plus
// extra_padding[j] rows (optional; each a multiple of 2*cp) to model padding between sequences
// and static-shape tail padding.
ThdBatch make_thd_batch(std::span<const int32_t> lengths, int cp,
                        std::span<const int32_t> extra_padding = {});

// --- zigzag sharding (rank r of cp) ---

// Global row of local row `local_row` on rank `rank` (TE's thd_partition_src_index):
//   cs = cu_seqlens_padded / cp, lp = cs[j+1]-cs[j], u = local_row - cs[j],
//   src = u + cs[j]*cp + (lp/2) * (u < lp/2 ? rank : 2cp-2-rank).
int64_t zigzag_global_row(const ThdBatch& b, int cp, int rank, int64_t local_row);

// Global row of every local row of `rank`: [total_tokens / cp].
std::vector<int64_t> zigzag_rows(const ThdBatch& b, int cp, int rank);

// Local rows (the same on every rank) of the front (half 0: chunk rank) or back (half 1: chunk
// 2cp-1-rank) chunk of every sequence, in sequence order: [total_tokens / (2 cp)]. What TE's
// thd_read_half_tensor reads for the ring's rectangular steps (the back half of the queries; the
// front half of the keys and values) and where its half-step corrections write.
std::vector<int64_t> zigzag_half_rows(const ThdBatch& b, int cp, int half);

// Position inside its sequence of every local row of `rank` (for RoPE and the causal mask):
// [total_tokens / cp]. Padding rows get positions >= len_j.
std::vector<int32_t> zigzag_positions(const ThdBatch& b, int cp, int rank);

// Real tokens in the front and back chunk of every sequence on `rank` (TE's
// get_cu_seqlens_on_cp_rank): front = clamp(len - rank*c, 0, c),
// back = clamp(len - (2cp-1-rank)*c, 0, c). [batch] each.
struct LocalRealLengths {
  std::vector<int32_t> front;
  std::vector<int32_t> back;
};
LocalRealLengths local_real_lengths(const ThdBatch& b, int cp, int rank);

// Rows of `global` ([total_tokens, row_elems] row-major) held by `rank`: [total_tokens/cp,
// row_elems]. Works for tokens, positions, labels, loss masks and activations alike.
template <typename T>
std::vector<T> shard_rows(std::span<const T> global, int64_t row_elems, const ThdBatch& b, int cp,
                          int rank) {
  DCP_CHECK(static_cast<int64_t>(global.size()) == b.total_tokens() * row_elems,
            "shard_rows: tensor has ", global.size(), " elements, expected ", b.total_tokens(),
            " x ", row_elems);
  const auto rows = zigzag_rows(b, cp, rank);
  std::vector<T> out(rows.size() * row_elems);
  for (size_t t = 0; t < rows.size(); ++t)
    for (int64_t e = 0; e < row_elems; ++e) out[t * row_elems + e] = global[rows[t] * row_elems + e];
  return out;
}

// Inverse of shard_rows: `shards` is every rank's shard concatenated in rank order (what an
// all-gather returns), [cp, total_tokens/cp, row_elems]; the result is in sequence order.
template <typename T>
std::vector<T> unshard_rows(std::span<const T> shards, int64_t row_elems, const ThdBatch& b,
                            int cp) {
  DCP_CHECK(static_cast<int64_t>(shards.size()) == b.total_tokens() * row_elems,
            "unshard_rows: ", shards.size(), " elements, expected ", b.total_tokens(), " x ",
            row_elems);
  std::vector<T> out(shards.size());
  const int64_t local = b.total_tokens() / cp;
  for (int r = 0; r < cp; ++r) {
    const auto rows = zigzag_rows(b, cp, r);
    for (int64_t t = 0; t < local; ++t)
      for (int64_t e = 0; e < row_elems; ++e)
        out[rows[t] * row_elems + e] = shards[(r * local + t) * row_elems + e];
  }
  return out;
}

// --- per-token metadata in sequence order (slice with shard_rows) ---

// Position of each row inside its sequence (padding continues counting): [total_tokens].
std::vector<int32_t> thd_positions(const ThdBatch& b);
// 1 for real tokens, 0 for padding: [total_tokens].
std::vector<uint8_t> real_token_mask(const ThdBatch& b);

// Next-token targets within each sequence: label[t] = tokens[t+1] when t and t+1 are real tokens
// of the same sequence, else ignore_label; loss_mask[t] = 1 exactly where a target exists (so the
// last real token of a sequence, and all padding, are out of the loss: no roll across sequence or
// padding boundaries, cf. Megatron PR #4494).
struct NextTokenTargets {
  std::vector<int32_t> labels;      // [total_tokens]
  std::vector<uint8_t> loss_mask;   // [total_tokens]
};
NextTokenTargets next_token_targets(std::span<const int32_t> tokens, const ThdBatch& b,
                                    int32_t ignore_label = -100);

}  // namespace dcp::attn
