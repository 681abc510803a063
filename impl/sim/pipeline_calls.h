// Pipeline schedules as Megatron runs them (the model: simulator.h): each stage's op order
// (1F1B, interleaved 1F1B), 1F1B's blocking P2P calls, and the interleaved schedule's P2P calls
// with the walk that times them. Internal to the simulator (simulator.cpp, lower_bound.cpp).
#pragma once

#include "core/error.h"
#include "sim/simulator.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace dcp::sim::detail {

// Whether simulate_schedule walks the interleaved schedule's calls (simulator.h): VPP on a real
// pipeline with Megatron's calls and interleaved_calls on. The size guard and the walk both ask.
inline bool walks_interleaved_calls(const ScheduleInput& in) {
  return in.vpp > 1 && in.pp > 1 && in.blocking_p2p && in.interleaved_calls;
}

// With --overlap-grad-reduce (the callers check it) and 1F1B without VPP, whether stage s
// launches its gradient reduce only after its cool-down, fully exposed: Megatron's
// align_grad_reduce (default True, d48bd6be0a training/config/common_config.py:83) installs
// grad_sync_func (training.py:4073-4076), and then only the first pipeline stage enables the
// grad sync in its last backward (schedules.py:2576-2578 on a stage without warm-up, 2603-2605 in
// the cool-down); the others call grad_sync_func after the schedule (2621-2624). (The interleaved
// schedule's per-chunk launches are not modelled, simulator.h.) Asked by the simulation and the
// lower bound (lower_bound.cpp).
inline bool reduce_after_cooldown(int pp, int vpp, int s) { return vpp == 1 && pp > 1 && s > 0; }

struct Op {
  int mb;
  int chunk;
  bool bwd;
};

// The interleaved schedule's k-th forward (bwd = false) or backward of a stage: Megatron's
// get_schedule_table / get_model_chunk_id (d48bd6be0a schedules.py:1333-1351), k < m * vpp.
Op interleaved_op(int k, bool bwd, int vpp, int group);

// Forwards stage s runs before its first backward (get_pp_rank_microbatches, schedules.py:878-931).
int interleaved_warmup(int s, int pp, int vpp, int group, int m);

// Stage s's ops in Megatron's order: 1F1B (forward_backward_pipelining_without_interleaving) when
// vpp == 1, interleaved 1F1B with micro-batch groups of `group` otherwise.
std::vector<Op> stage_order(int s, int pp, int vpp, int group, int m);

// One of Megatron's batched, blocking P2P calls of 1F1B without VPP (simulator.h): the
// micro-batches whose activation it sends / receives and whose gradient it sends / receives to
// or from one neighbouring stage; -1 = none.
struct Call {
  int peer = 0;
  int send_f = -1;
  int recv_f = -1;
  int send_b = -1;
  int recv_b = -1;
};

struct Item {
  bool is_call = false;
  Op op{};
  Call call{};
};

// Stage s's ops and calls in the order of forward_backward_pipelining_without_interleaving
// (d48bd6be0a schedules.py:2279 on, the same at 3b309c627e): the ops are stage_order(s, pp, 1, .., m).
std::vector<Item> blocking_1f1b_items(int s, int pp, int m);

// One side of a transfer in one of Megatron's interleaved-schedule P2P calls: a send of the
// activation (fwd) or gradient (bwd) that op (mb, v) produced, or a receive of one. A receive's
// data and both sides' peers are filled in by matching the sends and receives of each directed
// link in order (NCCL matches a pair of ranks' point-to-point operations in order).
struct VPart {
  bool send = false;
  bool fwd = true;
  int mb = -1;         // the producing op's micro-batch (a receive's: after matching)
  int v = -1;          // the producing op's virtual stage
  int peer_call = -1;  // the matching call on the neighbouring stage (global call index)
};

// One call: send_forward_recv_forward or send_backward_recv_backward (fwd: which), or a receive
// alone, with at most one send and one receive (possibly none: with sequence packing such a call
// still synchronises the device). blocking: waits for all its transfers (wait_on_reqs); else
// Megatron's overlap_p2p_comm call: a forward one's send is waited for at once
// (deallocate_pipeline_outputs, on in Megatron's training: d48bd6be0a training/arguments.py:2230,
// schedules.py:1915-1917), a backward one's in the next overlapped backward call (1971-1972) or
// after the cool-down (2162-2163); a receive before the op that reads it (pp_pre_forward /
// pp_pre_backward).
struct VCall {
  bool blocking = false;
  bool fwd = true;
  int parts = 0;
  VPart part[2];
};

struct VItem {
  bool is_call = false;
  Op op{};
  int call = -1;  // index into the stage's calls
};

struct VStage {
  std::vector<VItem> items;
  std::vector<VCall> calls;
};

// Stage s's ops and P2P calls in the order of forward_backward_pipelining_with_interleaving
// (d48bd6be0a schedules.py:1098-2180) as Megatron's training runs it: overlap_p2p_comm on (its
// default, arguments.py:4116-4119; with VPP it stays on, arguments.py:1043-1054), so
// batch_p2p_comm off; overlap_p2p_comm_warmup_flush off (model_parallel_config.py:417-419):
//   recv_forward (blocking, schedules.py:1646-1650; none on the first stage);
//   warm-up k < W: F(k), send_forward_recv_forward (blocking, 1757-1759); after the last one
//     send_backward_recv_backward posting the first gradient's receive (overlap, 1799-1830);
//   steady k < T - W: F(W + k), send_forward_recv_forward (overlap, pp_post_forward 1873-1929),
//     B(k), send_backward_recv_backward (overlap, pp_post_backward 1949-1990);
//   cool-down k in [T - W, T): B(k), send_backward_recv_backward (blocking, 2155-2157)
//     (with every micro-batch in the warm-up, a recv_backward first, 2064-2072).
// Receives follow recv_tensor_from_previous_stage (1387-1434): the first stage receives a
// forward input only from the last stage (chunks wrap round: the last stage's chunk c feeds the
// first stage's chunk c + 1), pp - 1 iterations behind, and never for chunk 0; the last stage
// receives gradients likewise; none after the last iteration of a phase (1696-1697, 1890-1891,
// 2095-2096). The first stage sends no gradient of chunk 0, the last no activation of its last
// chunk. A send_*_recv_* call with nothing to send or receive is kept (with sequence packing it
// synchronises the device, p2p_communication.py:263); a recv_forward / recv_backward on the
// first / last stage makes no call (p2p_communication.py:456-457).
VStage interleaved_items(int s, int pp, int vpp, int group, int m);

// Walks every stage's ops and interleaved-schedule P2P calls (interleaved_items) for all pool
// ranks at once, in dependency order (the rules: simulator.h, "With VPP (interleaved_calls, the
// default").
// Per call and pool rank it keeps the post (the stage's free time when it reaches the call; with
// sequence packing the shape exchange's torch.cuda.synchronize ties the host to the GPU) and the
// time its data operations go out (the post; with a shape exchange after meeting the neighbours
// and the device sync). Every call's pairing and every op's input are checked. Checked against
// an independent Python walk of the same rules (helper-41's review, not committed) on 1,200
// random schedules (pp 2-6, vpp 2-4, group pp to pp + 2): identical step times without a shape
// exchange; with one, identical once that walk also charged the shape latency before the device
// sync (it had charged it after: at most one p2p_shape_s per call apart).
template <class RunOp>
void walk_interleaved_calls(const ScheduleInput& in, std::vector<double>& free_at, RunOp&& run_op) {
  const int n = in.pool, pp = in.pp, vpp = in.vpp, stages = pp * vpp;
  const int m = static_cast<int>(in.groups.size());
  const int group = in.vpp_group > 0 ? in.vpp_group : pp;
  std::vector<VStage> st(static_cast<size_t>(pp));
  std::vector<int> base(static_cast<size_t>(pp) + 1, 0);  // global index of stage s's first call
  for (int s = 0; s < pp; ++s) {
    st[s] = interleaved_items(s, pp, vpp, group, m);
    base[s + 1] = base[s] + static_cast<int>(st[s].calls.size());
  }
  const int ncalls = base[pp];
  std::vector<int> stage_of(static_cast<size_t>(ncalls));
  for (int s = 0; s < pp; ++s)
    for (int c = base[s]; c < base[s + 1]; ++c) stage_of[c] = s;
  const auto call_of = [&](int gc) -> VCall& { return st[stage_of[gc]].calls[gc - base[stage_of[gc]]]; };

  // Pair each directed link's sends and receives in order; channel 2 s + d: stage s's sends
  // forward (d = 0, to s + 1) or backward (d = 1, to s - 1), modulo pp (the chunks wrap round).
  std::vector<std::vector<std::pair<int, int>>> sends(2 * static_cast<size_t>(pp)), recvs(sends.size());
  for (int s = 0; s < pp; ++s)  // a stage sends and receives at most m * vpp tensors each way
    for (int d = 0; d < 2; ++d) {
      sends[2 * s + d].reserve(static_cast<size_t>(m) * vpp);
      recvs[2 * s + d].reserve(static_cast<size_t>(m) * vpp);
    }
  for (int s = 0; s < pp; ++s)
    for (int c = 0; c < static_cast<int>(st[s].calls.size()); ++c)
      for (int p = 0; p < st[s].calls[c].parts; ++p) {
        const VPart& part = st[s].calls[c].part[p];
        const int from = part.send ? s : part.fwd ? (s + pp - 1) % pp : (s + 1) % pp;
        (part.send ? sends : recvs)[2 * from + (part.fwd ? 0 : 1)].emplace_back(base[s] + c, p);
      }
  // The receive that carries the input of op (mb, v, bwd): call and part; -1 = none.
  const auto key = [&](int mb, int v, bool bwd) { return (static_cast<size_t>(mb) * stages + v) * 2 + bwd; };
  std::vector<int> input_call(static_cast<size_t>(m) * stages * 2, -1), input_part(input_call.size(), -1);
  for (size_t ch = 0; ch < sends.size(); ++ch) {
    DCP_CHECK(sends[ch].size() == recvs[ch].size(), "interleaved schedule: stage ", ch / 2, " sends ",
              sends[ch].size(), " tensors ", ch % 2 ? "backward" : "forward", " and its neighbour receives ",
              recvs[ch].size(), " (internal error)");
    for (size_t i = 0; i < sends[ch].size(); ++i) {
      const auto [sc, sp] = sends[ch][i];
      const auto [rc, rp] = recvs[ch][i];
      VPart& snd = call_of(sc).part[sp];
      VPart& rcv = call_of(rc).part[rp];
      rcv.mb = snd.mb;
      rcv.v = snd.v;
      snd.peer_call = rc;
      rcv.peer_call = sc;
      const int consumer = snd.fwd ? snd.v + 1 : snd.v - 1;
      DCP_CHECK(consumer >= 0 && consumer < stages && consumer % pp == stage_of[rc] && input_call[key(snd.mb, consumer, !snd.fwd)] < 0,
                "interleaved schedule: the ", i, "-th tensor on channel ", ch, " (micro-batch ", snd.mb,
                ", virtual stage ", snd.v, ") reaches stage ", stage_of[rc], " (internal error)");
      input_call[key(snd.mb, consumer, !snd.fwd)] = rc;
      input_part[key(snd.mb, consumer, !snd.fwd)] = rp;
    }
  }
  // Every op that reads a neighbour's output has a receive before it on its own stage.
  for (int s = 0; s < pp; ++s) {
    int calls_seen = 0;
    for (const VItem& it : st[s].items) {
      if (it.is_call) {
        ++calls_seen;
        continue;
      }
      const int v = it.op.chunk * pp + s;
      if (it.op.bwd ? v == stages - 1 : v == 0) continue;
      const int rc = input_call[key(it.op.mb, v, it.op.bwd)];
      DCP_CHECK(rc >= base[s] && rc < base[s] + calls_seen, "interleaved schedule: stage ", s, "'s ",
                it.op.bwd ? "backward" : "forward", " of micro-batch ", it.op.mb, " chunk ", it.op.chunk,
                " has no receive before it (internal error)");
    }
  }

  // t[j] = max(t[j], f(j, the cost entry of the part's link u -> u + 1 for pool rank j's group)),
  // group by group.
  const auto over_link = [&](const VPart& part, auto&& f) {
    const int u = part.fwd ? part.v : part.v - 1;
    const auto& groups = in.groups[part.mb];
    for (size_t g = 0; g < groups.size(); ++g) {
      const OpCost& c = in.cost[part.mb][g][u];
      for (int j = groups[g].first_rank; j < groups[g].first_rank + groups[g].size; ++j) f(j, c);
    }
  };
  std::vector<double> shape(static_cast<size_t>(n));
  bool shapes = false;  // a packed plan's calls exchange shapes first (OpCost::p2p_shape_s > 0)
  for (const auto& mb : in.cost)
    for (const auto& g : mb)
      for (const OpCost& c : g) shapes = shapes || c.p2p_shape_s > 0;

  // state: 0 not reached, 1 posted (post known), 2 its data operations posted (data known).
  std::vector<char> state(static_cast<size_t>(ncalls), 0);
  std::vector<double> post(static_cast<size_t>(ncalls) * n), data(post.size());
  std::vector<size_t> at(static_cast<size_t>(pp), 0);
  // Per stage: its previous call (global index, -1: none) and the send of its last overlapped
  // backward call not yet waited for (call, part; -1: none).
  std::vector<int> prev_call(static_cast<size_t>(pp), -1), pending_call(prev_call), pending_part(prev_call);
  size_t remaining = 0;
  for (const auto& x : st) remaining += x.items.size() + 1;  // + the wait at the end
  const auto zero = [](size_t, int) { return 0.0; };
  const auto processed = [&](int gc, int q) { return state[call_of(gc).part[q].peer_call] >= 2; };
  // t[j] = max(t[j], when part q of call gc ends on pool rank j).
  const auto end_of = [&](int gc, int q, double* t) {
    const VPart& part = call_of(gc).part[q];
    const double* mine = data.data() + static_cast<size_t>(gc) * n;
    const double* peer = data.data() + static_cast<size_t>(part.peer_call) * n;
    over_link(part, [&](int j, const OpCost& x) { t[j] = std::max(t[j], std::max(mine[j], peer[j]) + x.p2p_s); });
  };
  while (remaining > 0) {
    bool progress = false;
    for (int s = 0; s < pp; ++s) {
      double* free_s = free_at.data() + static_cast<size_t>(s) * n;
      while (at[s] <= st[s].items.size()) {
        if (at[s] == st[s].items.size()) {
          // After the cool-down Megatron waits for the last backward send (schedules.py:2162-2163).
          if (pending_call[s] >= 0) {
            if (!processed(pending_call[s], pending_part[s])) break;
            end_of(pending_call[s], pending_part[s], free_s);
          }
        } else if (const VItem& it = st[s].items[at[s]]; !it.is_call) {
          const Op& op = it.op;
          const int v = op.chunk * pp + s;
          if (op.bwd ? v == stages - 1 : v == 0) {
            run_op(s, op, zero);
          } else {
            const size_t k = key(op.mb, v, op.bwd);
            const int rc = input_call[k];
            const VPart& rcv = call_of(rc).part[input_part[k]];
            if (state[rcv.peer_call] < 2) break;  // the sender's side has not started yet
            const double* dr = data.data() + static_cast<size_t>(rc) * n;
            const double* ds = data.data() + static_cast<size_t>(rcv.peer_call) * n;
            const int u = op.bwd ? v : v - 1;
            const auto& c = in.cost[op.mb];
            run_op(s, op, [&](size_t g, int j) { return std::max(dr[j], ds[j]) + c[g][u].p2p_s; });
          }
        } else {
          const int gc = base[s] + it.call;
          const VCall& c = st[s].calls[it.call];
          double* p = post.data() + static_cast<size_t>(gc) * n;
          double* d = data.data() + static_cast<size_t>(gc) * n;
          if (state[gc] == 0) {
            std::copy(free_s, free_s + n, p);
            state[gc] = 1;
          }
          if (state[gc] == 1) {
            if (shapes) {
              // The shape exchange meets every neighbour of the call; its torch.cuda.synchronize
              // then waits for every transfer still running on the device: those of the stage's
              // previous call (each call synchronises, so no older one is left).
              bool ready = true;
              for (int q = 0; q < c.parts; ++q) ready = ready && state[c.part[q].peer_call] >= 1;
              const int pc = prev_call[s];
              for (int q = 0; pc >= 0 && q < call_of(pc).parts; ++q) ready = ready && processed(pc, q);
              if (!ready) break;
              std::copy(p, p + n, d);
              std::fill(shape.begin(), shape.end(), 0.0);
              for (int q = 0; q < c.parts; ++q) {
                const double* peer = post.data() + static_cast<size_t>(c.part[q].peer_call) * n;
                for (int j = 0; j < n; ++j) d[j] = std::max(d[j], peer[j]);
                over_link(c.part[q], [&](int j, const OpCost& x) { shape[j] = std::max(shape[j], x.p2p_shape_s); });
              }
              for (int j = 0; j < n; ++j) d[j] += shape[j];
              for (int q = 0; pc >= 0 && q < call_of(pc).parts; ++q) end_of(pc, q, d);
            } else {
              std::copy(p, p + n, d);  // each operation is posted at once (_p2p_ops)
            }
            state[gc] = 2;
          }
          // What the stage waits for before its next op: a blocking call all its transfers; an
          // overlapped forward call its send (deallocate_pipeline_outputs); an overlapped
          // backward call the send of the previous overlapped backward call (1971-1972).
          const bool defer = !c.blocking && !c.fwd;
          bool ready = true;
          for (int q = 0; q < c.parts; ++q)
            ready = ready && (!(c.blocking || (c.part[q].send && !defer)) || processed(gc, q));
          if (defer && pending_call[s] >= 0) ready = ready && processed(pending_call[s], pending_part[s]);
          if (!ready) break;
          std::copy(d, d + n, free_s);
          for (int q = 0; q < c.parts; ++q)
            if (c.blocking || (c.part[q].send && !defer)) end_of(gc, q, free_s);
          if (defer) {
            if (pending_call[s] >= 0) end_of(pending_call[s], pending_part[s], free_s);
            pending_call[s] = pending_part[s] = -1;
            for (int q = 0; q < c.parts; ++q)
              if (c.part[q].send) {
                pending_call[s] = gc;
                pending_part[s] = q;
              }
          }
          prev_call[s] = gc;
        }
        ++at[s];
        --remaining;
        progress = true;
      }
    }
    DCP_CHECK(progress, "interleaved pipeline schedule deadlocked (internal error)");
  }
}

}  // namespace dcp::sim::detail
