// See geometry.h for the rule on non-power-of-two pools.
#include "plan/geometry.h"

#include "core/error.h"
#include "plan/cp_rule.h"

namespace dcp::plan {

bool group_size_exists(int n, int size, int min_cp) {
  if (n < 1 || size < 1) return false;
  if (size == n) return true;
  return size >= min_cp && is_pow2(size) && size < n && n % size == 0;
}

std::vector<int> group_sizes(int n, int min_cp) {
  std::vector<int> out;
  for (int k = 1; k < n; k *= 2) {
    if (group_size_exists(n, k, min_cp)) out.push_back(k);
  }
  if (n >= 1) out.push_back(n);
  return out;
}

int group_first_rank(int n, int size, int rank, int min_cp) {
  DCP_CHECK(rank >= 0 && rank < n, "rank ", rank, " outside pool of ", n);
  DCP_CHECK(group_size_exists(n, size, min_cp), "no CP group of size ", size, " in a pool of ", n,
            " ranks (min_cp ", min_cp, ")");
  return (rank / size) * size;
}

std::vector<int> group_first_ranks(int n, int size, int min_cp) {
  DCP_CHECK(group_size_exists(n, size, min_cp), "no CP group of size ", size, " in a pool of ", n,
            " ranks (min_cp ", min_cp, ")");
  std::vector<int> out;
  for (int a = 0; a + size <= n; a += size) out.push_back(a);
  return out;
}

}  // namespace dcp::plan
