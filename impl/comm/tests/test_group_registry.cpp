// Group registry over the thread backend for every pool size N = 1..64: the sizes created agree
// with plan/geometry.h, each group is the aligned block that contains the rank (checked by an
// all-gather of pool indices inside the group), and missing sizes are clear errors.
#include <gtest/gtest.h>

#include "comm/group_registry.h"
#include "comm/thread_comm.h"
#include "plan/geometry.h"

namespace dcp::comm {
namespace {

std::vector<int> expected_sizes(int n, int min_cp) {
  // Written out from the documented rule, independently of plan::group_sizes.
  std::vector<int> out;
  for (int k = 1; k < n; k *= 2)
    if (k >= min_cp && n % k == 0) out.push_back(k);
  out.push_back(n);
  return out;
}

void check_pool(int n, int min_cp) {
  run_threads(n, [n, min_cp](Communicator& pool) {
    GroupRegistry reg(pool, min_cp);
    ASSERT_EQ(reg.sizes(), expected_sizes(n, min_cp)) << "N=" << n;
    ASSERT_EQ(reg.sizes(), plan::group_sizes(n, min_cp));
    const int j = pool.rank();
    for (int k : reg.sizes()) {
      Communicator& g = reg.group(k);
      ASSERT_EQ(g.size(), k);
      const int first = (k == n) ? 0 : (j / k) * k;
      ASSERT_EQ(reg.group_first_rank(k), first);
      ASSERT_EQ(g.rank(), j - first);
      // The members are exactly the pool indices [first, first + k) in order.
      std::vector<int32_t> members(k);
      const int32_t mine = j;
      g.all_gather(std::span<const int32_t>(&mine, 1), std::span<int32_t>(members));
      for (int i = 0; i < k; ++i) ASSERT_EQ(members[i], first + i) << "N=" << n << " k=" << k;
    }
    for (int k = 1; k <= 2 * n; ++k) {
      if (std::find(reg.sizes().begin(), reg.sizes().end(), k) == reg.sizes().end()) {
        ASSERT_FALSE(reg.has(k));
        ASSERT_THROW(reg.group(k), InputError) << "N=" << n << " k=" << k;
      }
    }
  });
}

TEST(GroupRegistry, EveryPoolSize1To64) {
  for (int n = 1; n <= 64; ++n) check_pool(n, 1);
}

TEST(GroupRegistry, MinCpDropsSmallSizes) {
  check_pool(8, 2);
  check_pool(16, 4);
  check_pool(12, 2);
  check_pool(8, 8);
  // Larger than the pool (Megatron asserts it is at most dp x cp), or below 1: refused on every rank.
  for (int bad : {9, 0})
    EXPECT_THROW(run_threads(8, [bad](Communicator& pool) { GroupRegistry reg(pool, bad); }), Error) << bad;
}

TEST(GroupRegistry, NonPowerOfTwoPoolsAreDocumented) {
  EXPECT_EQ(expected_sizes(6, 1), (std::vector<int>{1, 2, 6}));
  EXPECT_EQ(expected_sizes(12, 1), (std::vector<int>{1, 2, 4, 12}));
  EXPECT_EQ(expected_sizes(10, 1), (std::vector<int>{1, 2, 10}));
  run_threads(6, [](Communicator& pool) {
    GroupRegistry reg(pool);
    try {
      reg.group(4);
      FAIL() << "size 4 must not exist in a pool of 6";
    } catch (const InputError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("no CP group of size 4 in a pool of 6"), std::string::npos) << msg;
      EXPECT_NE(msg.find("sizes that exist: 1 2 6"), std::string::npos) << msg;
    }
  });
}

TEST(GroupRegistry, PoolIndexIsDpMajor) {
  EXPECT_EQ(pool_index(0, 3, 4), 3);
  EXPECT_EQ(pool_index(2, 1, 4), 9);
  EXPECT_EQ(pool_index(1, 0, 8), 8);
}

}  // namespace
}  // namespace dcp::comm
