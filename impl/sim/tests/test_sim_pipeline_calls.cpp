// Megatron's pipeline P2P calls (impl/sim/pipeline_calls.h; the rules: simulator.h): 1F1B's
// blocking calls without VPP, the interleaved schedule's calls with it. Hand-traced cases, the
// multi-rank and CP-group cases, and the random property that the calls only add waits.
#include "core/error.h"
#include "core/rng.h"
#include "sim/simulator.h"
#include "sim_fixtures.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace dcp::sim {
namespace {

using namespace fixtures;

TEST(Schedule, BlockingCallsMakeTheSenderWaitForItsNeighbour) {
  // pp = 2, m = 2, every op 1 s, every transfer 0.5 s. Megatron's calls (stage 0: F0 send_f(0)
  // F1 send_f_recv_b(1, 0) B0 recv_b(1) B1; stage 1: recv_f(0) F0 B0 send_b_recv_f(0, 1) F1 B1
  // send_b(1)): s0 F0 [0, 1], its send and s1's receive end at 1.5; s0 F1 [1.5, 2.5]; s1 F0
  // [1.5, 2.5] B0 [2.5, 3.5]; the exchange ends at max(2.5, 3.5) + 0.5 = 4; s0 B0 [4, 5]; s1 F1
  // [4, 5] B1 [5, 6]; its send_b(1) ends at max(6, 5) + 0.5; s0 B1 [6.5, 7.5].
  ScheduleInput in = singles(1, 2, 1, 2, op(1, 1, 0.5));
  EXPECT_DOUBLE_EQ(simulate_schedule(in).step_s, 7.5);
  // Non-blocking, stage 1's F1 starts when its B0 ends (3.5 >= 2.5 + 0.5): s1 F1 [3.5, 4.5]
  // B1 [4.5, 5.5]; s0 B0 [4, 5] B1 [6, 7].
  in.blocking_p2p = false;
  EXPECT_DOUBLE_EQ(simulate_schedule(in).step_s, 7.0);
  // A packed plan's shape exchange (0.25 s here) before each call: every call 0.75 s; s0 F1
  // [1.75, 2.75]; s1 F0 [1.75, 2.75] B0 [2.75, 3.75]; exchange ends 4.5; s1 F1 [4.5, 5.5] B1
  // [5.5, 6.5]; send_b(1) ends 7.25; s0 B1 [7.25, 8.25]. The non-blocking model has none.
  for (auto& c : in.cost) c[0][0].p2p_shape_s = c[0][1].p2p_shape_s = 0.25;
  in.blocking_p2p = true;
  EXPECT_DOUBLE_EQ(simulate_schedule(in).step_s, 8.25);
  in.blocking_p2p = false;
  EXPECT_DOUBLE_EQ(simulate_schedule(in).step_s, 7.0);
}

TEST(Schedule, BlockingCallsOfAMiddleStageUseEachLinksOwnTransfer) {
  // pp = 3, m = 2, every op 1 s; link 0<->1 0.5 s, link 1<->2 0.25 s (the last stage's own p2p_s,
  // a link that does not exist, is 9 s and must never be read). Calls (simulator.h): stage 0 F0
  // send_f(0) F1 send_f(1) recv_b(0) B0 recv_b(1) B1; stage 1 recv_f(0) F0 send_f(0) recv_f(1)
  // F1 send_f_recv_b(1, 0) B0 send_b(0) recv_b(1) B1 send_b(1); stage 2 recv_f(0) F0 B0
  // send_b_recv_f(0, 1) F1 B1 send_b(1). Times: s0 F0 [0, 1], call 1.5; s0 F1 [1.5, 2.5];
  // s1 F0 [1.5, 2.5], send_f(0) to s2 2.75, recv_f(1) max(2.75, 2.5) + 0.5 = 3.25; s2 F0
  // [2.75, 3.75] B0 [3.75, 4.75]; s1 F1 [3.25, 4.25], exchange with s2 max(4.25, 4.75) + 0.25 = 5;
  // s1 B0 [5, 6], send_b(0) 6.5; s0 B0 [6.5, 7.5]; s2 F1 [5, 6] B1 [6, 7], send_b(1) 7.25;
  // s1 B1 [7.25, 8.25], send_b(1) max(8.25, 7.5) + 0.5 = 8.75; s0 B1 [8.75, 9.75].
  ScheduleInput in = singles(1, 3, 1, 2, op(1, 1));
  for (auto& mb : in.cost) {
    mb[0][0].p2p_s = 0.5;
    mb[0][1].p2p_s = 0.25;
    mb[0][2].p2p_s = 9;
  }
  const auto r = simulate_schedule(in);
  EXPECT_DOUBLE_EQ(r.step_s, 9.75);
  EXPECT_DOUBLE_EQ(r.gpu[1].finish_s, 8.75);  // stage 1 waits for its send_b(1) to stage 0
  EXPECT_DOUBLE_EQ(r.gpu[2].finish_s, 7.25);
}

TEST(Schedule, InterleavedCallsFollowMegatronsOrder) {
  // pp = 2, vpp = 2, m = 2 (one group of 2), every op 1 s, every transfer 0.5 s, no shape exchange.
  // Forward k runs (mb, chunk) (0,0) (1,0) (0,1) (1,1), backward k (0,1) (1,1) (0,0) (1,0).
  // Stage 0 (warm-up 4, all of it): F00 send | F10 send+recv | F01 send+recv | F11 send |
  // recv_backward | B01 send+recv | B11 send+recv | B00 recv | B10, every call blocking.
  // Stage 1 (warm-up 2): recv | F00 send+recv | F10 send+recv (blocking) | F01 recv | B01 send |
  // F11 (nothing) | B11 send+recv (overlapped: a forward call waits for its send, a backward one
  // for the previous backward call's send) | B00 send+recv | B10 send (blocking).
  // Without a shape exchange each transfer ends at the later of its two sides' posts + 0.5.
  // Times: s0 F00 [0, 1], its send and s1's first receive end 1.5; s0 F10 [1.5, 2.5] and s1 F00
  // [1.5, 2.5] exchange until 3; F01 [3, 4] / F10 [3, 4] until 4.5; s0 F11 [4.5, 5.5], s1 F01
  // [4.5, 5.5]; s1's receive of F11's output does not hold it: B01 [5.5, 6.5], its send is left
  // pending; s0's send of F11 ends 6, its recv_backward meets s1's send (6.5), ends 7; s1 F11
  // [6.5, 7.5] B11 [7.5, 8.5], its call waits for B01's send (7); s0 B01 [7, 8], its call meets
  // s1's at 8.5, ends 9; s1 B00 [9, 10] and s0 B11 [9, 10] until 10.5; s0 B00 [10.5, 11.5] and
  // s1 B10 [10.5, 11.5] until 12; s0 B10 [12, 13].
  ScheduleInput in = singles(1, 2, 2, 2, op(1, 1, 0.5));
  in.interleaved_calls = true;
  auto r = simulate_schedule(in);
  EXPECT_DOUBLE_EQ(r.step_s, 13.0);
  EXPECT_DOUBLE_EQ(r.gpu[1].finish_s, 12.0);
  expect_breakdown_sums(r);
  // Transfers that delay only the receiving op (interleaved_calls off, or blocking_p2p off)
  // give the same step here: s1 F11 [6.5, 7.5] after B01, s0 B11 waits for
  // it: s0 ... B00 [10, 11] B10 [12, 13].
  in.interleaved_calls = false;
  EXPECT_DOUBLE_EQ(simulate_schedule(in).step_s, 13.0);
  in.interleaved_calls = true;
  in.blocking_p2p = false;
  EXPECT_DOUBLE_EQ(simulate_schedule(in).step_s, 13.0);
  in.blocking_p2p = true;
  // With stage 0's F11 2 s the calls cost 0.5 s: s0 F11 [4.5, 6.5], s1 F01 [4.5, 5.5] B01
  // [5.5, 6.5] (its receive does not wait for s0's send); s0's send ends 7, its recv_backward
  // meets s1's send of B01 at 7, ends 7.5; s1 F11 [7, 8] B11 [8, 9], its call waits for that
  // send (7.5); s0 B01 [7.5, 8.5], meets s1 at 9, ends 9.5; then as above, 0.5 s later: s1 ends
  // 12.5, s0 B10 [12.5, 13.5]. Without the calls: s0 B01 [7, 8] ... B10 [12, 13].
  {
    ScheduleInput slow = in;
    slow.cost[1][0][2].fwd_s = 2;
    r = simulate_schedule(slow);
    EXPECT_DOUBLE_EQ(r.step_s, 13.5);
    EXPECT_DOUBLE_EQ(r.gpu[1].finish_s, 12.5);
    slow.interleaved_calls = false;
    EXPECT_DOUBLE_EQ(simulate_schedule(slow).step_s, 13.0);
  }
  // A packed plan's shape exchange (0.25 s on every link, here including F11's empty call on
  // s1): every call first meets its neighbours (overlapped receives included), then waits for
  // the stage's transfers still running (torch.cuda.synchronize). s0 F00 [0, 1], exchange 1.25,
  // transfer 1.75; F10 / F00 [1.75, 2.75] until 3.5; F01 / F10 [3.5, 4.5] until 5.25; s0 F11
  // [5.25, 6.25], s1 F01 [5.25, 6.25]: s1's receive meets s0's send at 6.5, s1 B01 [6.5, 7.5];
  // s0's send ends 7; its recv_backward and s1's B01 send meet at 7.75 and end 8.25 (s1 goes on at
  // 7.75); s1 F11 [7.75, 8.75], its empty call waits for B01's send (8.25), B11 [8.75, 9.75];
  // s0 B01 [8.25, 9.25] meets s1's call at 10, ends 10.5; s1 B00 / s0 B11 [10.5, 11.5] until
  // 12.25; s0 B00 / s1 B10 [12.25, 13.25] until 14; s0 B10 [14, 15].
  {
    ScheduleInput packed = in;
    for (auto& mb : packed.cost)
      for (auto& c : mb[0]) c.p2p_shape_s = 0.25;
    r = simulate_schedule(packed);
    EXPECT_DOUBLE_EQ(r.step_s, 15.0);
    EXPECT_DOUBLE_EQ(r.gpu[1].finish_s, 14.0);
    // With stage 0's F11 2 s s1's receive waits for s0's send: s0 F11 [5.25, 7.25]; they meet
    // at 7.5, s1 B01 [7.5, 8.5]; s0's send ends 8, recv_backward meets s1's send at 8.75, ends
    // 9.25; s1 F11 [8.75, 9.75] B11 [9.75, 10.75]; s0 B01 [9.25, 10.25], meets s1 at 11, ends
    // 11.5; B00 / B11 [11.5, 12.5] until 13.25; B00 / B10 [13.25, 14.25] until 15; B10 [15, 16].
    packed.cost[1][0][2].fwd_s = 2;
    r = simulate_schedule(packed);
    EXPECT_DOUBLE_EQ(r.step_s, 16.0);
    EXPECT_DOUBLE_EQ(r.gpu[1].finish_s, 15.0);
    // The device synchronisation holds even a call that moves nothing: with s1's F11 0.25 s and
    // s0's B01 0.25 s, s1 F11 [7.75, 8] and its empty call waits for B01's send (8.25): B11
    // [8.25, 9.25]; s0 B01 [8.25, 8.5] meets s1's next call at 9.5, ends 10; s1 B00 / s0 B11
    // [10, 11] until 11.75; B00 / B10 [11.75, 12.75] until 13.5; s0 B10 [13.5, 14.5]. (Without
    // that wait s1's B11 would start at 8 and the step end at 14.25.)
    packed.cost[1][0][2].fwd_s = 1;
    packed.cost[1][0][3].fwd_s = 0.25;
    packed.cost[0][0][2].bwd_s = 0.25;
    r = simulate_schedule(packed);
    EXPECT_DOUBLE_EQ(r.step_s, 14.5);
    EXPECT_DOUBLE_EQ(r.gpu[1].finish_s, 13.5);
  }
  // Without a shape exchange each transfer waits only for its own two sides (Megatron posts
  // every isend / irecv on its own, _p2p_ops), not for a neighbour's other neighbour: pp = 3,
  // vpp = 2, m = 3, every op 1 s, every transfer 0.5 s. Stages end at 21, 20 and 18.5 (36 ops:
  // not traced by hand here; an independent walk of Megatron's rules written for the review of
  // this model gives the same, 21.5 / 20.5 / 19 with the waits chained across neighbours and
  // 21 / 19.5 / 18 without the calls).
  {
    ScheduleInput three = singles(1, 3, 2, 3, op(1, 1, 0.5));
    three.interleaved_calls = true;
    r = simulate_schedule(three);
    EXPECT_DOUBLE_EQ(r.gpu[0].finish_s, 21.0);
    EXPECT_DOUBLE_EQ(r.gpu[1].finish_s, 20.0);
    EXPECT_DOUBLE_EQ(r.gpu[2].finish_s, 18.5);
    three.interleaved_calls = false;
    r = simulate_schedule(three);
    EXPECT_DOUBLE_EQ(r.gpu[0].finish_s, 21.0);
    EXPECT_DOUBLE_EQ(r.gpu[1].finish_s, 19.5);
    EXPECT_DOUBLE_EQ(r.gpu[2].finish_s, 18.0);
  }
  // A steady-phase forward call holds its stage until its send ends (deallocate_pipeline_outputs):
  // pp = 2, vpp = 2, m = 4 (two groups of 2, so stage 0 has a steady phase), every op 1 s, every
  // transfer 0.5 s. The stages end at 22.5 and 21.5 (not traced by hand; the same independent
  // walk gives the same; 21 and 20 if that send were not waited for).
  {
    ScheduleInput four = singles(1, 2, 2, 4, op(1, 1, 0.5));
    r = simulate_schedule(four);
    EXPECT_DOUBLE_EQ(r.gpu[0].finish_s, 22.5);
    EXPECT_DOUBLE_EQ(r.gpu[1].finish_s, 21.5);
  }
  // The wrap-round link (stage 1's chunk 0 feeds stage 0's chunk 1: virtual stage 1's p2p_s)
  // is read: 0.5 s more on it delays the step.
  for (auto& mb : in.cost) mb[0][1].p2p_s = 1.0;
  EXPECT_GT(simulate_schedule(in).step_s, 13.0 + 0.4);
}

// The interleaved calls per pool rank: with every group a single rank each rank's pipeline runs
// alone, so a pool of 3 ends each stage (after its slowest rank: finish_s is the stage's) where
// the slowest of three pools of 1 with those ranks' costs does; and a CP group of ranks with the
// same costs runs as each of them alone (it starts at the latest member's ready time, the same
// for all). Random costs, pp 3, vpp 2, 6 micro-batches, with and without a shape exchange.
TEST(Schedule, InterleavedCallsRunEveryPoolRanksPipeline) {
  Rng rng(77);
  for (const double shape : {0.0, 0.03}) {
    const int pp = 3, vpp = 2, m = 6, pool = 3;
    std::vector<ScheduleInput> alone(pool, singles(1, pp, vpp, m, op(1, 1)));
    ScheduleInput all = singles(pool, pp, vpp, m, op(1, 1));
    for (int j = 0; j < pool; ++j)
      for (int mb = 0; mb < m; ++mb)
        for (int v = 0; v < pp * vpp; ++v) {
          OpCost c = op(rng.uniform(0.2, 2.0), rng.uniform(0.4, 4.0), rng.uniform(0.0, 0.6));
          c.p2p_shape_s = shape;
          alone[j].cost[mb][0][v] = c;
          all.cost[mb][j][v] = c;
        }
    std::vector<ScheduleResult> a;
    for (const auto& x : alone) a.push_back(simulate_schedule(x));
    const ScheduleResult r = simulate_schedule(all);
    for (int st = 0; st < pp; ++st) {
      const double slowest = std::max({a[0].gpu[st].finish_s, a[1].gpu[st].finish_s, a[2].gpu[st].finish_s});
      for (int j = 0; j < pool; ++j) EXPECT_DOUBLE_EQ(r.gpu[st * pool + j].finish_s, slowest) << "stage " << st;
      // The ranks' finish times differ: the check above sees a rank's pipeline mixed up.
      EXPECT_NE(a[0].gpu[st].finish_s, a[1].gpu[st].finish_s);
    }
    // Ranks 0 and 1 grouped in micro-batches 1 and 4, rank 1 given rank 0's costs everywhere:
    // every stage ends where the slower of rank 0 and rank 2 alone does.
    ScheduleInput grouped = all;
    for (int mb = 0; mb < m; ++mb) {
      grouped.cost[mb][1] = grouped.cost[mb][0];
      if (mb % 3 != 1) continue;
      grouped.groups[mb] = {{0, 2}, {2, 1}};
      grouped.cost[mb] = {all.cost[mb][0], all.cost[mb][2]};
    }
    const ScheduleResult g = simulate_schedule(grouped);
    for (int st = 0; st < pp; ++st)
      EXPECT_DOUBLE_EQ(g.gpu[st * pool].finish_s, std::max(a[0].gpu[st].finish_s, a[2].gpu[st].finish_s))
          << "stage " << st;
  }
}

// Megatron's calls only add waits (every non-blocking constraint holds, plus the sender's and
// the rendezvous of the interleaved schedule's calls), never change what a GPU computes, and leave
// pp = 1 alone. Random groups and costs; pp 1-8, m 1-12 (m < pp too); on ~30% of the pp > 1
// cases VPP 2-4 with a micro-batch group (vpp_group) of pp to pp + 2 and 1-3 such groups (every
// micro-batch in the warm-up too); a shape exchange on every other trial. The calls' pairing (and with VPP every op's
// input) is checked inside simulate_schedule on every case.
TEST(Schedule, BlockingCallsOnlyAddWaits) {
  Rng rng(2027);
  int slower = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const int pool = static_cast<int>(rng.uniform_int(1, 4));
    const int pp = static_cast<int>(rng.uniform_int(1, 8));
    const int vpp = pp > 1 && rng.uniform() < 0.3 ? static_cast<int>(rng.uniform_int(2, 4)) : 1;
    const int group = vpp > 1 ? pp + static_cast<int>(rng.uniform_int(0, 2)) : 0;
    const int m = vpp > 1 ? group * static_cast<int>(rng.uniform_int(1, 3)) : static_cast<int>(rng.uniform_int(1, 12));
    ScheduleInput in;
    in.pool = pool;
    in.pp = pp;
    in.vpp = vpp;
    in.vpp_group = group;
    for (int mb = 0; mb < m; ++mb) {
      auto& g = in.groups.emplace_back();
      auto& k = in.cost.emplace_back();
      for (int j = 0; j < pool;) {
        const int size = static_cast<int>(rng.uniform_int(1, pool - j));
        g.push_back({j, size});
        auto& per_stage = k.emplace_back();
        for (int v = 0; v < pp * vpp; ++v) {
          OpCost c = op(rng.uniform(0.1, 2.0), rng.uniform(0.2, 4.0), rng.uniform(0.0, 0.5));
          c.p2p_shape_s = trial % 2 ? rng.uniform(0.0, 0.05) : 0.0;
          per_stage.push_back(c);
        }
        j += size;
      }
    }
    in.grad_reduce_s.assign(static_cast<size_t>(pp), 0.3);
    in.interleaved_calls = false;
    const auto off = simulate_schedule(in);  // VPP does not block
    in.interleaved_calls = true;
    const auto blocking = simulate_schedule(in);
    in.blocking_p2p = false;
    const auto free = simulate_schedule(in);
    const std::string at = "trial " + std::to_string(trial) + " pool " + std::to_string(pool) + " pp " +
                           std::to_string(pp) + " vpp " + std::to_string(vpp) + " m " + std::to_string(m);
    ASSERT_EQ(blocking.gpu.size(), free.gpu.size()) << at;
    for (size_t i = 0; i < free.gpu.size(); ++i) {
      EXPECT_GE(blocking.gpu[i].finish_s, free.gpu[i].finish_s - 1e-9) << at << " gpu " << i;
      EXPECT_NEAR(blocking.gpu[i].compute_s, free.gpu[i].compute_s, 1e-9) << at;
    }
    EXPECT_EQ(blocking.events, free.events) << at;
    expect_breakdown_sums(blocking);
    if (pp == 1) {
      EXPECT_EQ(blocking.step_s, free.step_s) << at;
    }
    if (vpp > 1) {
      EXPECT_EQ(off.step_s, free.step_s) << at;
    }
    if (blocking.step_s > free.step_s + 1e-9) ++slower;
  }
  EXPECT_GT(slower, 100);  // the sender's waits do show on most pipelined cases
}

}  // namespace
}  // namespace dcp::sim
