// Issue 11: the simulator sizes its work before allocating it. A schedule over the entry limit
// (micro-batches x virtual stages x (ranks + 8)) is an InputError naming the numbers, raised
// before the ~16 GB the run would have taken (1024 micro-batches on 2^20 ranks peaked at 16.9 GB).
#include "core/error.h"
#include "sim/simulator.h"

#include <gtest/gtest.h>

#include <string>

namespace dcp::sim {
namespace {

ScheduleInput whole_pool_groups(int pool, int pp, int vpp, int m) {
  ScheduleInput in;
  in.pool = pool;
  in.pp = pp;
  in.vpp = vpp;
  OpCost c;
  c.fwd_s = c.fwd_compute_s = 1;
  c.bwd_s = c.bwd_compute_s = 2;
  for (int mb = 0; mb < m; ++mb) {
    in.groups.push_back({ScheduleInput::GroupSpan{0, pool}});
    in.cost.push_back({std::vector<OpCost>(static_cast<size_t>(pp) * vpp, c)});
  }
  return in;
}

TEST(SimLimits, ScheduleOverTheEntryLimitIsRefusedBeforeAllocating) {
  try {
    simulate_schedule(whole_pool_groups(1 << 18, 1, 1, 1024));
    ADD_FAILURE() << "accepted 2^30 entries";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("1024 micro-batches x 1 pipeline stages x (262144 ranks + 8)"), std::string::npos) << m;
    EXPECT_NE(m.find("more than the limit of 134217728"), std::string::npos) << m;
  }
  // Stages count like ranks: 2^14 micro-batches x 2^10 stages x (1 + 8) is over the limit too.
  ScheduleInput deep = whole_pool_groups(1, 1024, 1, 1);
  deep.groups.resize(1 << 14, deep.groups[0]);  // the cost table is left short: sizing comes first
  EXPECT_THROW(simulate_schedule(deep), InputError);
  // The interleaved schedule's calls count each rank twice and 24 per op: 2 micro-batches x 4
  // virtual stages on 2^23 ranks is 2^26 + 64 entries without them (sized, then refused only
  // because the input is not filled in) and 2^27 + 192 with them.
  ScheduleInput wide = whole_pool_groups(1, 2, 2, 2);
  wide.pool = 1 << 23;  // the groups are left covering one rank: sizing comes first
  wide.interleaved_calls = false;
  try {
    simulate_schedule(wide);
    ADD_FAILURE() << "accepted groups that do not cover the pool";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find("more than the limit"), std::string::npos) << e.what();
  }
  wide.interleaved_calls = true;
  try {
    simulate_schedule(wide);
    ADD_FAILURE() << "accepted 2^27 + 192 entries";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("2 micro-batches x 4 pipeline stages x (8388608 ranks x 2 + 24 (interleaved calls)) = "
                     "134217920 entries"),
              std::string::npos)
        << m;
  }
  // Well inside the limit, the same shape simulates: 4 micro-batches of 2 x 3 s on 8 ranks.
  const ScheduleResult r = simulate_schedule(whole_pool_groups(8, 1, 1, 4));
  EXPECT_DOUBLE_EQ(r.step_s, 12.0);
}

}  // namespace
}  // namespace dcp::sim
