// See group_registry.h. Sizes and block starts come from plan/geometry.h, so the registry and
// every planner agree on which groups exist.
#include "comm/group_registry.h"

#include <sstream>

#include "core/nvtx.h"
#include "plan/geometry.h"

namespace dcp::comm {

GroupRegistry::GroupRegistry(Communicator& pool, int min_cp)
    : pool_size_(pool.size()), pool_rank_(pool.rank()), min_cp_(min_cp) {
  DCP_NVTX_RANGE();
  DCP_REQUIRE(min_cp >= 1, "group registry: min_cp must be >= 1, got ", min_cp);
  // Megatron asserts the smallest hybrid CP size is at most dp x cp (the pool); a larger one had
  // silently left the pool's one group.
  DCP_REQUIRE(min_cp <= pool_size_, "group registry: min_cp=", min_cp, " exceeds the pool of ", pool_size_, " ranks");
  sizes_ = plan::group_sizes(pool_size_, min_cp);
  for (int k : sizes_) {
    const int first = plan::group_first_rank(pool_size_, k, pool_rank_, min_cp);
    // color = block index, key = pool index: group rank = pool index - first.
    auto g = pool.split(first / k, pool_rank_);
    DCP_CHECK(g != nullptr && g->size() == k && g->rank() == pool_rank_ - first,
              "group registry: split for size ", k, " on pool rank ", pool_rank_,
              " gave a group of size ", (g ? g->size() : -1), " with rank ",
              (g ? g->rank() : -1));
    g->barrier();  // warm-up, as Megatron does for every size
    groups_.emplace(k, std::move(g));
  }
}

Communicator& GroupRegistry::group(int size) const {
  DCP_NVTX_RANGE();
  auto it = groups_.find(size);
  if (it == groups_.end()) {
    std::ostringstream os;
    os << "no CP group of size " << size << " in a pool of " << pool_size_ << " ranks (min_cp "
       << min_cp_ << "); sizes that exist:";
    for (int k : sizes_) os << ' ' << k;
    throw InputError(os.str());
  }
  return *it->second;
}

int GroupRegistry::group_first_rank(int size) const {
  group(size);  // throws with the list of sizes when it does not exist
  return plan::group_first_rank(pool_size_, size, pool_rank_, min_cp_);
}

}  // namespace dcp::comm
