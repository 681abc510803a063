// Group geometry of the DP x CP pool (DESIGN.md "Groups").
//
// A CP group of size k is the aligned block [a*k, (a+1)*k). For power-of-two N every power-of-two
// size from min_cp to N exists and each rank is in exactly one group of each size.
//
// Non-power-of-two N (documented behaviour, unlike Megatron §3/§7j which silently builds short
// blocks): the sizes that exist are the powers of two k with min_cp <= k and N % k == 0 (so every
// block is complete), plus N itself (the whole pool). A size that does not exist is an error,
// never a short or wrong group.
#pragma once

#include <vector>

namespace dcp::plan {

// Group sizes available for a pool of n ranks, ascending.
std::vector<int> group_sizes(int n, int min_cp = 1);

// True if a group of `size` exists in a pool of n ranks.
bool group_size_exists(int n, int size, int min_cp = 1);

// First rank of the group of `size` that contains `rank`. Throws if the size does not exist.
int group_first_rank(int n, int size, int rank, int min_cp = 1);

// All groups of `size`: their first ranks, ascending.
std::vector<int> group_first_ranks(int n, int size, int min_cp = 1);

}  // namespace dcp::plan
