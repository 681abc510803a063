// VPP micro-batch alignment of the Megatron ports: align_sample_id_groups (reference §2.4),
// identical in PR2000 (2d6e946bab) and DEV (d48bd6be0a) of NVIDIA/Megatron-LM
// megatron/core/datasets/data_schedule_utils.py.
//
// Interleaved VPP needs the micro-batch count to be a multiple of V. Megatron splits micro-batches
// in two, walking backwards from the last one; each half gets its empty ranks filled by doubling
// CP runs (fill_empty_by_expanding_cp), which duplicates sample ids over more ranks.
//
// The port reproduces Megatron's list operations exactly (Python slice assignment included) and
// keeps Megatron's result wherever Megatron succeeds with a valid plan. Where Megatron fails:
//   - split_group would raise (IndexError on an empty rank, "CP size is not decreasing"), loop
//     forever in fill_empty (§7f, e.g. N=6), or give a half whose blocks do not exist in our
//     geometry (non-power-of-two N): that split counts as "cannot split" (Megatron's (None, None));
//   - Megatron would raise "no tail microbatch has enough ids to split" (§7g): instead, the last
//     micro-batch holding >= 2 samples is split into two micro-batches that each put their half of
//     the samples on the whole pool (always valid: any subset of a valid micro-batch fits N*M);
//     when no micro-batch has two samples, a dcp::InputError says the count cannot be reached.
// §7a (fill_empty reads index -1 before testing i >= 0): the port tests i >= 0 first; the
// result is the same because Megatron only calls fill_empty while the last rank is empty.
#pragma once

#include "plan/plan.h"

#include <cstdint>
#include <string>
#include <vector>

namespace dcp::sched {

struct AlignContext {
  int n = 1;                                  // pool size N
  int min_cp = 1;
  int64_t max_seqlen_per_rank = 1;            // M
  const std::vector<int64_t>* lengths = nullptr;  // [G] by sample id
};

struct AlignStats {
  int megatron_splits = 0;   // splits done exactly as Megatron does them
  int failed_splits = 0;     // split attempts where Megatron returns (None, None), raises or hangs
  int fallback_splits = 0;   // whole-pool splits where Megatron would raise (§7g)
};

// Megatron's split_group on one micro-batch (per-rank lists). Returns true and sets new_mb (the
// second half of the ranks, expanded) and old_mb (the first half, expanded) when Megatron's split
// succeeds with valid halves; false otherwise (reason in *why when given).
bool megatron_split_group(const std::vector<std::vector<int>>& mb, const AlignContext& ctx,
                          std::vector<std::vector<int>>* new_mb, std::vector<std::vector<int>>* old_mb,
                          std::string* why = nullptr);

// align_sample_id_groups(groups, multiple) with the fallbacks above. multiple >= 1.
// Throws dcp::InputError when the count cannot be made a multiple of `multiple`.
plan::RankLists align_sample_id_groups(plan::RankLists groups, int multiple, const AlignContext& ctx,
                                       AlignStats* stats = nullptr);

// The same on micro-batches given as groups (ascending ranks, covering [0, N)); returns groups
// (consecutive ranks holding the same list form one group). Avoids per-rank list copies.
std::vector<std::vector<plan::Group>> align_microbatch_groups(std::vector<std::vector<plan::Group>> microbatches,
                                                              int multiple, const AlignContext& ctx,
                                                              AlignStats* stats = nullptr);

}  // namespace dcp::sched
