// Group registry: the CP groups of every size a Dynamic-CP plan may use, created once at start-up
// and looked up by size at run time (reference/megatron-dynamic-cp.md §3; DESIGN.md "Groups").
//
// Pool: N = DP x CP ranks with the same TP/PP coordinates, pool index j = dp_rank * cp + cp_rank.
// A group of size k is the aligned block [a*k, (a+1)*k) of pool indices; its ranks are ordered by
// pool index (group rank = j - a*k).
// Which sizes exist is decided by plan/geometry.h and only there: for power-of-two N every power
// of two from min_cp to N; for other N the powers of two >= min_cp that divide N, plus N itself
// (N = 6: {1, 2, 6}; N = 12: {1, 2, 4, 12}; N = 10: {1, 2, 10}). Megatron (§3, §7) would build
// a short last block for sizes that do not divide N (N = 10, size 4: [8, 9]); here such a size
// does not exist, and asking for a size that does not exist throws an InputError listing the
// sizes that do, never a short or wrong group.
// Construction is collective over the pool: every rank joins every split (NCCL requirement) and
// keeps the one group of each size that contains it; a barrier on each group warms it up.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "comm/communicator.h"

namespace dcp::comm {

// Pool index of (dp_rank, cp_rank) for a static CP size `cp` (§3: CP ranks of one DP replica
// are contiguous).
constexpr int pool_index(int dp_rank, int cp_rank, int cp) { return dp_rank * cp + cp_rank; }

class GroupRegistry {
 public:
  // Collective over `pool` (pool.rank() is the pool index). min_cp >= 1.
  GroupRegistry(Communicator& pool, int min_cp = 1);

  int pool_size() const { return pool_size_; }
  int pool_rank() const { return pool_rank_; }
  int min_cp() const { return min_cp_; }
  // Sizes created, ascending (= plan::group_sizes(N, min_cp)).
  const std::vector<int>& sizes() const { return sizes_; }
  bool has(int size) const { return groups_.count(size) != 0; }
  // This rank's group of `size`; throws InputError if no group of that size exists.
  Communicator& group(int size) const;
  // Pool index of the first rank of this rank's group of `size`.
  int group_first_rank(int size) const;

 private:
  int pool_size_;
  int pool_rank_;
  int min_cp_;
  std::vector<int> sizes_;
  std::map<int, std::unique_ptr<Communicator>> groups_;
};

}  // namespace dcp::comm
