// Discrete-event simulation of one training step (model and formulas in simulator.h).
//
// Every pool rank runs the same static op order per pipeline stage, so the simulation walks the
// per-stage op lists in dependency order: an op (micro-batch, virtual stage, fwd|bwd) is
// processed for all pool ranks at once when its upstream op is done; within it each CP group
// starts at the latest ready time of its members (coupling) and all members end together. 1F1B
// without VPP walks each stage's list of ops and Megatron's blocking P2P calls instead: a call is
// processed when both its stage and the neighbour have reached it (simulator.h).
// Cost: O(pp * ops_per_stage * N) plus the time model's O(V * samples).
// Schedules follow Megatron-LM megatron/core/pipeline_parallel/schedules.py:
//   1F1B: warmup = min(pp - s - 1, M) forwards, steady (F, B) pairs, cooldown backwards;
//   interleaved: warmup = min((pp - s - 1) * 2 + (vpp - 1) * G, M * vpp), forward op k runs
//   chunk (k mod (G*vpp)) / G of micro-batch (k / (G*vpp)) * G + k mod G; backward chunks reversed.
//   (get_pp_rank_microbatches, d48bd6be0a schedules.py:878-931: no special case for M == pp;
//   older Megatron ran every forward first then, a rule removed in 4295be1a6c, 2024-11-01.)
#include "sim/simulator.h"

#include "core/error.h"
#include "core/nvtx.h"
#include "plan/geometry.h"
#include "plan/validate.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <unordered_map>

namespace dcp::sim {
namespace {

// Whether a plan pays the scenario's THD data path (cost::iteration_time, training.data_path):
// every THD plan, the static packing baseline as much as the dynamic planners (in Megatron's
// sequence-packing path DefaultDynamicCPScheduler inherits dp_balanced's DpBalancedScheduler.run;
// NVIDIA's prototype packs every plan's micro-batches the same way in the step); not a padded
// bshd plan, which takes Megatron's ordinary data path.
bool uses_packing_scheduler(const plan::Plan& plan) { return plan.pad_to == 0; }

// The layout a plan's CP rings run on: TE's bshd ring for a padded plan (bshd's planner puts one
// sequence in each group; a plan file with more runs [b, s, h, d] with b > 1, whose halves the
// flash-attention path still reads as views), its THD ring for a packed one.
cost::QkvFormat ring_format(const plan::Plan& plan) {
  return plan.pad_to > 0 ? cost::QkvFormat::bshd : cost::QkvFormat::thd;
}

// The re-route's volume: the most tokens one pool rank receives, every sample of its groups
// whole (CP siblings each receive the whole sample and slice it afterwards).
double max_received_tokens(const plan::Plan& plan, const plan::Batch& batch, int pool) {
  std::vector<double> per_rank(static_cast<size_t>(pool), 0.0);
  for (const auto& mbatch : plan.microbatches)
    for (const auto& g : mbatch.groups) {
      double sum = 0;
      for (int id : g.samples) sum += static_cast<double>(batch.lengths[static_cast<size_t>(id)]);
      for (int j = g.first_rank; j <= g.last_rank() && j < pool; ++j) per_rank[static_cast<size_t>(j)] += sum;
    }
  return *std::max_element(per_rank.begin(), per_rank.end());
}

// With --overlap-grad-reduce (the callers check it) and 1F1B without VPP, whether stage s
// launches its gradient reduce only after its cool-down, fully exposed: Megatron's
// align_grad_reduce (default True, d48bd6be0a training/config/common_config.py:83) installs
// grad_sync_func (training.py:4073-4076), and then only the first pipeline stage enables the
// grad sync in its last backward (schedules.py:2576-2578 on a stage without warm-up, 2603-2605 in
// the cool-down); the others call grad_sync_func after the schedule (2621-2624). (The interleaved
// schedule's per-chunk launches are not modelled, simulator.h.)
bool reduce_after_cooldown(int pp, int vpp, int s) { return vpp == 1 && pp > 1 && s > 0; }

struct Op {
  int mb;
  int chunk;
  bool bwd;
};

// The interleaved schedule's k-th forward (bwd = false) or backward of a stage: Megatron's
// get_schedule_table / get_model_chunk_id (d48bd6be0a schedules.py:1333-1351), k < m * vpp.
Op interleaved_op(int k, bool bwd, int vpp, int group) {
  const int span = group * vpp;
  const int r = k % span;
  int chunk = r / group;
  if (bwd) chunk = vpp - 1 - chunk;
  return Op{(k / span) * group + r % group, chunk, bwd};
}

// Forwards stage s runs before its first backward (get_pp_rank_microbatches, schedules.py:878-931).
int interleaved_warmup(int s, int pp, int vpp, int group, int m) {
  return std::min((pp - s - 1) * 2 + (vpp - 1) * group, m * vpp);
}

std::vector<Op> stage_order(int s, int pp, int vpp, int group, int m) {
  std::vector<Op> order;
  if (vpp == 1) {
    const int warm = std::min(pp - s - 1, m);
    for (int i = 0; i < warm; ++i) order.push_back({i, 0, false});
    for (int i = 0; i < m - warm; ++i) {
      order.push_back({warm + i, 0, false});
      order.push_back({i, 0, true});
    }
    for (int i = m - warm; i < m; ++i) order.push_back({i, 0, true});
    return order;
  }
  const int total = m * vpp;
  auto op_of = [&](int k, bool bwd) { return interleaved_op(k, bwd, vpp, group); };
  const int warm = interleaved_warmup(s, pp, vpp, group, m);
  for (int k = 0; k < warm; ++k) order.push_back(op_of(k, false));
  for (int k = 0; k < total - warm; ++k) {
    order.push_back(op_of(warm + k, false));
    order.push_back(op_of(k, true));
  }
  for (int k = total - warm; k < total; ++k) order.push_back(op_of(k, true));
  return order;
}

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
std::vector<Item> blocking_1f1b_items(int s, int pp, int m) {
  const bool first = s == 0, last = s == pp - 1;
  const int warm = std::min(pp - s - 1, m), rem = m - warm;
  std::vector<Item> items;
  const auto op = [&](int mb, bool bwd) { items.push_back({false, {mb, 0, bwd}, {}}); };
  const auto call = [&](int peer, int send_f, int recv_f, int send_b, int recv_b) {
    items.push_back({true, {}, {peer, send_f, recv_f, send_b, recv_b}});
  };
  for (int i = 0; i < warm; ++i) {
    if (!first) call(s - 1, -1, i, -1, -1);  // recv_forward
    op(i, false);
    if (!last) call(s + 1, i, -1, -1, -1);  // send_forward
  }
  if (rem > 0 && !first) call(s - 1, -1, warm, -1, -1);  // recv_forward
  for (int i = 0; i < rem; ++i) {
    op(warm + i, false);
    if (!last) call(s + 1, warm + i, -1, -1, i);  // send_forward_recv_backward
    op(i, true);
    if (!first) {
      if (i == rem - 1)
        call(s - 1, -1, -1, i, -1);  // send_backward
      else
        call(s - 1, -1, warm + i + 1, i, -1);  // send_backward_recv_forward
    }
  }
  for (int i = rem; i < m; ++i) {
    if (!last) call(s + 1, -1, -1, -1, i);  // recv_backward
    op(i, true);
    if (!first) call(s - 1, -1, -1, i, -1);  // send_backward
  }
  return items;
}

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
VStage interleaved_items(int s, int pp, int vpp, int group, int m) {
  const bool first = s == 0, last = s == pp - 1;
  const int total = m * vpp;
  const int warm = interleaved_warmup(s, pp, vpp, group, m), rem = total - warm;
  const auto op_of = [&](int k, bool bwd) { return interleaved_op(k % total, bwd, vpp, group); };
  const auto receives = [&](int k, bool fwd) {  // recv_tensor_from_previous_stage(k, fwd).recv
    if (!(fwd ? first : last)) return true;
    if (k < pp - 1) return false;
    return op_of(k - (pp - 1), !fwd).chunk != (fwd ? vpp - 1 : 0);
  };
  VStage st;
  st.items.reserve(4 * static_cast<size_t>(total) + 2);  // 2 T ops, at most 2 T + 2 calls
  st.calls.reserve(2 * static_cast<size_t>(total) + 2);
  const auto op = [&](const Op& o) { st.items.push_back({false, o, -1}); };
  // A call in direction fwd; send: the op whose output it sends (nullptr: none); recv: whether
  // it receives.
  const auto call = [&](bool blocking, const Op* send, bool recv, bool fwd) {
    VCall c;
    c.blocking = blocking;
    c.fwd = fwd;
    if (send) c.part[c.parts++] = VPart{true, fwd, send->mb, send->chunk * pp + s, -1};
    if (recv) c.part[c.parts++] = VPart{false, fwd, -1, -1, -1};
    st.items.push_back({true, {}, static_cast<int>(st.calls.size())});
    st.calls.push_back(c);
  };
  const auto sends_fwd = [&](const Op& f) { return !(last && f.chunk == vpp - 1); };
  const auto sends_bwd = [&](const Op& b) { return !(first && b.chunk == 0); };
  if (!first) call(true, nullptr, true, true);  // recv_forward
  for (int k = 0; k < warm; ++k) {
    const Op f = op_of(k, false);
    op(f);
    call(true, sends_fwd(f) ? &f : nullptr, receives(k, true) && k != total - 1, true);
    if (k == warm - 1 && rem > 0) call(false, nullptr, !last, false);
  }
  for (int k = 0; k < rem; ++k) {
    const Op f = op_of(warm + k, false);
    op(f);
    call(false, sends_fwd(f) ? &f : nullptr, receives(warm + k, true) && k != rem - 1, true);
    const Op b = op_of(k, true);
    op(b);
    call(false, sends_bwd(b) ? &b : nullptr, receives(k, false), false);
  }
  if (rem == 0 && !last) call(true, nullptr, true, false);  // recv_backward
  for (int k = rem; k < total; ++k) {
    const Op b = op_of(k, true);
    op(b);
    call(true, sends_bwd(b) ? &b : nullptr, receives(k, false) && k != total - 1, false);
  }
  return st;
}

void check_input(const ScheduleInput& in) {
  DCP_CHECK(in.pool >= 1 && in.pp >= 1 && in.vpp >= 1, "pool ", in.pool, " pp ", in.pp, " vpp ",
            in.vpp);
  const int m = static_cast<int>(in.groups.size());
  DCP_CHECK(m >= 1, "no micro-batches");
  DCP_CHECK(static_cast<int>(in.cost.size()) == m, "cost has ", in.cost.size(),
            " micro-batches, groups ", m);
  const int stages = in.pp * in.vpp;
  for (int mb = 0; mb < m; ++mb) {
    int next = 0;
    DCP_CHECK(in.cost[mb].size() == in.groups[mb].size(), "micro-batch ", mb, ": ",
              in.groups[mb].size(), " groups but ", in.cost[mb].size(), " cost entries");
    for (size_t g = 0; g < in.groups[mb].size(); ++g) {
      const auto& gs = in.groups[mb][g];
      DCP_CHECK(gs.first_rank == next && gs.size >= 1, "micro-batch ", mb, " group ", g,
                " starts at ", gs.first_rank, " (expected ", next, ") size ", gs.size);
      next += gs.size;
      DCP_CHECK(static_cast<int>(in.cost[mb][g].size()) == stages, "micro-batch ", mb, " group ", g,
                ": ", in.cost[mb][g].size(), " stage costs, expected ", stages);
    }
    DCP_CHECK(next == in.pool, "micro-batch ", mb, " covers ", next, " of ", in.pool, " ranks");
  }
  if (in.vpp > 1) {
    const int g = in.vpp_group > 0 ? in.vpp_group : in.pp;
    if (auto v = plan::vpp_group_violation(m, g, in.pp)) throw InputError("interleaved schedule: " + *v);
  }
}

// Memory peak of every GPU: walk its stage's op order; a forward adds its chunk's stored
// activations (tokens per rank x stored bytes per token per layer x layers of the chunk), the
// matching backward releases them; the running op adds its transient (a backward's own, with the
// MLP's gradients); on the last virtual stage the head's inputs and the logits (cost/memory.h:
// saved from forward to backward, the logits' peak never on top of the layer transient); after a
// backward of virtual stage 0 the embedding's dense gradient (with tied embeddings at pp 1 the
// output weight's too, held from the loss's backward).
void peak_memory(const ScheduleInput& in, const std::vector<std::vector<Op>>& order, ScheduleResult& r) {
  const int n = in.pool, pp = in.pp, stages = pp * in.vpp;
  DCP_CHECK(static_cast<int>(in.static_bytes.size()) == pp &&
                static_cast<int>(in.layers.size()) == stages && in.tokens.size() == in.groups.size(),
            "memory input sizes do not match the schedule");
  DCP_CHECK(in.transient_bytes_per_token.empty() || in.transient_bytes_per_token.size() == in.groups.size(),
            "memory input: transient sizes do not match the schedule");
  DCP_CHECK(in.backward_transient_bytes_per_token.empty() ||
                in.backward_transient_bytes_per_token.size() == in.groups.size(),
            "memory input: backward transient sizes do not match the schedule");
  // tokens per rank: rank_tokens[mb * n + j]; the running op's transients per token likewise
  std::vector<double> rank_tokens(in.groups.size() * static_cast<size_t>(n), 0.0);
  std::vector<double> rank_transient(rank_tokens.size(), in.layer_transient_bytes_per_token);
  std::vector<double> rank_bwd_transient(rank_tokens.size(), in.layer_transient_bytes_per_token);
  for (size_t mb = 0; mb < in.groups.size(); ++mb)
    for (size_t g = 0; g < in.groups[mb].size(); ++g)
      for (int j = in.groups[mb][g].first_rank; j < in.groups[mb][g].first_rank + in.groups[mb][g].size; ++j) {
        const size_t at = mb * n + j;
        rank_tokens[at] = in.tokens[mb][g];
        if (!in.transient_bytes_per_token.empty()) rank_transient[at] = in.transient_bytes_per_token[mb].at(g);
        rank_bwd_transient[at] = in.backward_transient_bytes_per_token.empty()
                                     ? rank_transient[at]  // the forward's
                                     : in.backward_transient_bytes_per_token[mb].at(g);
      }
  r.fits = true;
  for (int s = 0; s < pp; ++s) {
    for (int j = 0; j < n; ++j) {
      double live = 0, peak = 0;
      for (const Op& op : order[s]) {
        const int v = op.chunk * pp + s;
        const double tok = rank_tokens[static_cast<size_t>(op.mb) * n + j];
        const double stored = tok * in.stored_bytes_per_token_layer * in.layers[v];
        const size_t at = static_cast<size_t>(op.mb) * n + j;
        const double layer_t = tok * (op.bwd ? rank_bwd_transient : rank_transient)[at];
        const bool loss = v == stages - 1;
        const double saved = loss ? tok * in.logits_saved_bytes_per_token : 0.0;
        const double head = loss ? tok * in.head_saved_bytes_per_token : 0.0;
        if (!op.bwd) {
          live += stored;
          const double head_and_logits = loss ? head + tok * in.logits_peak_bytes_per_token : 0.0;
          peak = std::max(peak, live + std::max(layer_t, head_and_logits));
          live += head + saved;
        } else {
          // The tied output gradient (pp 1: v is 0 and the loss stage) from the output layer's
          // weight-gradient GEMM on, beside the logits' gradient it reads.
          const double tied = loss && v == 0 ? in.tied_output_grad_bytes : 0.0;
          if (loss) peak = std::max(peak, live + tok * in.logits_peak_bytes_per_token - saved);
          if (tied > 0) peak = std::max(peak, live - saved + tok * in.logits_grad_bytes_per_token + tied);
          live += tied - head - saved;
          peak = std::max(peak, live + layer_t);
          live -= stored;
          if (v == 0)
            peak = std::max(peak, live + in.embedding_grad_bytes + tok * in.embedding_input_grad_bytes_per_token);
          live -= tied;  // added into the main-grad buffer with the embedding's
        }
      }
      GpuTime& t = r.gpu[static_cast<size_t>(s) * n + j];
      t.peak_bytes = in.static_bytes[s] + peak;
      if (t.peak_bytes > r.peak_bytes) {
        r.peak_bytes = t.peak_bytes;
        r.peak_gpu = s * n + j;
      }
      if (t.peak_bytes > in.capacity_bytes) r.fits = false;
    }
  }
}

}  // namespace

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

ScheduleResult simulate_schedule(const ScheduleInput& in) {
  DCP_NVTX_RANGE();
  {  // Size the work before checking or allocating anything (kMaxScheduleEntries).
    const int64_t mbs = static_cast<int64_t>(in.groups.size()), stages = int64_t{in.pp} * in.vpp;
    // The interleaved schedule's calls keep two times per call and pool rank (kMaxScheduleEntries).
    const bool calls = in.vpp > 1 && in.pp > 1 && in.blocking_p2p && in.interleaved_calls;
    const int64_t per_rank = calls ? 2 : 1, per_op = calls ? 24 : 8;
    const int64_t entries = mbs * stages * (int64_t{in.pool} * per_rank + per_op);
    DCP_REQUIRE(entries <= kMaxScheduleEntries, "simulating this plan needs ", mbs, " micro-batches x ", stages,
                " pipeline stages x (", in.pool, calls ? " ranks x 2 + 24 (interleaved calls)" : " ranks + 8",
                ") = ", entries, " entries, more than the limit of ",
                kMaxScheduleEntries, " (about 2 GiB); use fewer samples, fewer ranks or fewer pipeline stages");
  }
  check_input(in);
  const int n = in.pool, pp = in.pp, vpp = in.vpp, stages = pp * vpp;
  const int m = static_cast<int>(in.groups.size());
  const int group = in.vpp_group > 0 ? in.vpp_group : pp;

  std::vector<std::vector<Op>> order(pp);
  for (int s = 0; s < pp; ++s) order[s] = stage_order(s, pp, vpp, group, m);

  // Megatron's P2P calls (simulator.h): 1F1B's blocking ones without VPP, the interleaved
  // schedule's with it; or transfers that only delay the receiving op.
  const bool calls_1f1b = vpp == 1 && pp > 1 && in.blocking_p2p;
  const bool calls_vpp = vpp > 1 && pp > 1 && in.blocking_p2p && in.interleaved_calls;
  const bool blocking = calls_1f1b || calls_vpp;
  // End times per (mb, v, dir) for every pool rank; done flags per (mb, v, dir): the upstream
  // dependencies of non-blocking transfers (a blocking call carries its own; not kept then).
  auto key = [&](int mb, int v, bool bwd) { return (static_cast<size_t>(mb) * stages + v) * 2 + bwd; };
  std::vector<double> end(blocking ? 0 : static_cast<size_t>(m) * stages * 2 * n, 0.0);
  std::vector<char> done(blocking ? 0 : static_cast<size_t>(m) * stages * 2, 0);
  std::vector<double> free_at(static_cast<size_t>(pp) * n, 0.0);
  ScheduleResult r;
  r.gpu.assign(static_cast<size_t>(pp) * n, GpuTime{});
  std::vector<double> last_bwd_s(static_cast<size_t>(pp) * n, 0.0);
  std::vector<double> first_fwd_s(static_cast<size_t>(pp) * n, -1.0);

  // Runs op on stage s for every CP group: each group starts at the latest ready time of its
  // members (their free time and input_at(g, j), when its input has arrived on pool rank j).
  const auto run_op = [&](int s, const Op& op, auto&& input_at) {
    const int v = op.chunk * pp + s;
    const auto& groups = in.groups[op.mb];
    for (size_t g = 0; g < groups.size(); ++g) {
      const auto& gs = groups[g];
      const OpCost& c = in.cost[op.mb][g][v];
      double start = 0;
      for (int j = gs.first_rank; j < gs.first_rank + gs.size; ++j)
        start = std::max({start, free_at[static_cast<size_t>(s) * n + j], input_at(g, j)});
      const double dur = op.bwd ? c.bwd_s : c.fwd_s;
      for (int j = gs.first_rank; j < gs.first_rank + gs.size; ++j) {
        const size_t gi = static_cast<size_t>(s) * n + j;
        if (!blocking) end[key(op.mb, v, op.bwd) * n + j] = start + dur;
        free_at[gi] = start + dur;
        GpuTime& t = r.gpu[gi];
        t.compute_s += op.bwd ? c.bwd_compute_s : c.fwd_compute_s;
        t.recompute_s += op.bwd ? c.recompute_s : 0.0;
        t.comm_s += op.bwd ? c.bwd_comm_s : c.fwd_comm_s;
        t.overhead_s += op.bwd ? c.bwd_overhead_s : c.fwd_overhead_s;
        if (op.bwd) last_bwd_s[gi] = dur;
        if (!op.bwd && first_fwd_s[gi] < 0) first_fwd_s[gi] = dur;
      }
      r.events += gs.size;
    }
    if (!blocking) done[key(op.mb, v, op.bwd)] = 1;
  };

  if (calls_vpp) {
    walk_interleaved_calls(in, free_at, run_op);
  } else if (calls_1f1b) {
    // Blocking calls (simulator.h): a stage's ops wait only for its own calls, which end at
    // max(the two sides' posts) + the transfer, per pool rank.
    std::vector<int> group_of(static_cast<size_t>(m) * n);
    for (int mb = 0; mb < m; ++mb)
      for (size_t g = 0; g < in.groups[mb].size(); ++g)
        for (int j = in.groups[mb][g].first_rank; j < in.groups[mb][g].first_rank + in.groups[mb][g].size; ++j)
          group_of[static_cast<size_t>(mb) * n + j] = static_cast<int>(g);
    // The transfer of micro-batch mb's data over the link u <-> u+1 for pool rank j.
    const auto transfer = [&](int mb, int u, int j) {
      if (mb < 0) return 0.0;
      const OpCost& c = in.cost[mb][group_of[static_cast<size_t>(mb) * n + j]][u];
      return c.p2p_s + c.p2p_shape_s;
    };
    std::vector<std::vector<Item>> items(pp);
    size_t remaining = 0;
    for (int s = 0; s < pp; ++s) remaining += (items[s] = blocking_1f1b_items(s, pp, m)).size();
    std::vector<size_t> at(pp, 0);
    while (remaining > 0) {
      bool progress = false;
      for (int s = 0; s < pp; ++s) {
        while (at[s] < items[s].size()) {
          const Item& it = items[s][at[s]];
          if (!it.is_call) {
            run_op(s, it.op, [](size_t, int) { return 0.0; });
          } else {
            const int p = it.call.peer;
            if (at[p] >= items[p].size() || !items[p][at[p]].is_call || items[p][at[p]].call.peer != s)
              break;  // the neighbour has not posted its side yet
            const Call& lo = s < p ? it.call : items[p][at[p]].call;  // the stage before the link
            const Call& hi = s < p ? items[p][at[p]].call : it.call;
            DCP_CHECK(lo.send_f == hi.recv_f && lo.recv_b == hi.send_b, "pipeline calls of stages ",
                      std::min(s, p), " and ", std::max(s, p), " do not match (internal error)");
            const int u = std::min(s, p);
            for (int j = 0; j < n; ++j) {
              double& a = free_at[static_cast<size_t>(s) * n + j];
              double& b = free_at[static_cast<size_t>(p) * n + j];
              a = b = std::max(a, b) + std::max(transfer(lo.send_f, u, j), transfer(lo.recv_b, u, j));
            }
            ++at[p];
            --remaining;
          }
          ++at[s];
          --remaining;
          progress = true;
        }
      }
      DCP_CHECK(progress, "pipeline schedule deadlocked (internal error)");
    }
  } else {
    std::vector<size_t> next(pp, 0);
    size_t remaining = 0;
    for (const auto& o : order) remaining += o.size();
    while (remaining > 0) {
      bool progress = false;
      for (int s = 0; s < pp; ++s) {
        while (next[s] < order[s].size()) {
          const Op op = order[s][next[s]];
          const int v = op.chunk * pp + s;
          // Upstream op: F(mb, v-1) / B(mb, v+1) / none.
          int up_v = -1;
          if (!op.bwd && v > 0) up_v = v - 1;
          if (op.bwd && v < stages - 1) up_v = v + 1;
          if (up_v >= 0 && !done[key(op.mb, up_v, op.bwd)]) break;
          if (up_v < 0) {
            run_op(s, op, [](size_t, int) { return 0.0; });
          } else {
            // p2p_s of virtual stage u is the link u -> u+1: forward F(v-1) -> F(v) uses stage
            // v-1's, backward B(v+1) -> B(v) crosses the same link v <-> v+1, i.e. stage v's.
            const size_t at = key(op.mb, up_v, op.bwd) * n;
            const auto& c = in.cost[op.mb];
            const int link = op.bwd ? v : up_v;
            run_op(s, op, [&](size_t g, int j) { return end[at + j] + c[g][link].p2p_s; });
          }
          ++next[s];
          --remaining;
          progress = true;
        }
      }
      DCP_CHECK(progress, "pipeline schedule deadlocked (internal error)");
    }
  }

  // DP x CP gradient sync per stage: a collective over the pool, after the slowest rank.
  std::vector<double> busy_ops(r.gpu.size());
  for (size_t i = 0; i < r.gpu.size(); ++i) busy_ops[i] = r.gpu[i].busy_s();
  double finish_all = 0;
  for (int s = 0; s < pp; ++s) {
    const double rs = in.grad_reduce_s.empty() ? 0.0 : in.grad_reduce_s[s];
    const double ag = in.grad_gather_s.empty() ? 0.0 : in.grad_gather_s[s];
    int slow = 0;
    for (int j = 1; j < n; ++j)
      if (free_at[static_cast<size_t>(s) * n + j] > free_at[static_cast<size_t>(s) * n + slow]) slow = j;
    const size_t si = static_cast<size_t>(s) * n + slow;
    double exposed = rs + ag;
    if (in.overlap_grad_reduce) {
      const double behind = reduce_after_cooldown(pp, vpp, s) ? 0.0 : last_bwd_s[si];
      exposed = std::max(0.0, rs - behind) + std::max(0.0, ag - std::max(0.0, first_fwd_s[si]));
    }
    const double finish = free_at[si] + exposed;
    for (int j = 0; j < n; ++j) {
      GpuTime& t = r.gpu[static_cast<size_t>(s) * n + j];
      t.comm_s += exposed;
      t.sync_s = exposed;
      t.finish_s = finish;
    }
    finish_all = std::max(finish_all, finish);
  }
  // The per-iteration cost (optimizer step, fixed cost, THD data path) follows the slowest GPU.
  r.step_s = finish_all + in.iteration_s;
  for (auto& t : r.gpu) {
    t.overhead_s += in.iteration_s;
    t.iteration_s = in.iteration_s;
    t.finish_s += in.iteration_s;
  }
  if (!in.static_bytes.empty()) peak_memory(in, order, r);

  const double bubble_share = static_cast<double>(pp - 1) / (static_cast<double>(m) * vpp);
  double busiest = 0;
  for (size_t i = 0; i < r.gpu.size(); ++i) {
    GpuTime& t = r.gpu[i];
    busiest = std::max(busiest, t.busy_s());
    const double idle = std::max(0.0, r.step_s - t.compute_s - t.comm_s - t.overhead_s);
    t.bubble_s = std::min(idle, busy_ops[i] * bubble_share);
    t.imbalance_s = idle - t.bubble_s;
    r.compute_s += t.compute_s;
    r.recompute_s += t.recompute_s;
    r.comm_s += t.comm_s;
    r.overhead_s += t.overhead_s;
    r.bubble_s += t.bubble_s;
    r.imbalance_s += t.imbalance_s;
  }
  r.busiest_idle_s = std::max(0.0, r.step_s - busiest);
  const double count = static_cast<double>(r.gpu.size());
  r.compute_s /= count;
  r.recompute_s /= count;
  r.comm_s /= count;
  r.overhead_s /= count;
  r.bubble_s /= count;
  r.imbalance_s /= count;
  return r;
}

OpCost OpCost::of(const cost::StageTimes& st) {
  OpCost o;
  o.fwd_s = st.fwd.total_s();
  o.bwd_s = st.bwd.total_s();
  o.fwd_compute_s = st.fwd.compute_s;
  o.bwd_compute_s = st.bwd.compute_s;
  o.recompute_s = st.bwd.recompute_s;
  o.fwd_comm_s = st.fwd.comm_exposed_s;
  o.bwd_comm_s = st.bwd.comm_exposed_s;
  o.fwd_overhead_s = st.fwd.overhead_s;
  o.bwd_overhead_s = st.bwd.overhead_s;
  o.p2p_s = st.p2p_s;
  o.p2p_shape_s = st.p2p_shape_s;
  return o;
}

OpCost& OpCost::operator+=(const OpCost& o) {
  fwd_s += o.fwd_s;
  bwd_s += o.bwd_s;
  fwd_compute_s += o.fwd_compute_s;
  bwd_compute_s += o.bwd_compute_s;
  recompute_s += o.recompute_s;
  fwd_comm_s += o.fwd_comm_s;
  bwd_comm_s += o.bwd_comm_s;
  fwd_overhead_s += o.fwd_overhead_s;
  bwd_overhead_s += o.bwd_overhead_s;
  p2p_s += o.p2p_s;
  p2p_shape_s += o.p2p_shape_s;
  return *this;
}

ScheduleInput build_schedule_input(const plan::Plan& plan, const plan::Batch& batch,
                                   const cost::CostModel& cm) {
  const auto& c = cm.cluster;
  cost::validate_cluster(c);
  cost::validate_model(cm.model);
  cost::validate_profile(cm.hardware);
  DCP_REQUIRE(plan.config.pool() == c.pool(), "plan pool dp*cp=", plan.config.pool(),
              " does not match the cluster's gpus/(tp*pp)=", c.pool());
  DCP_REQUIRE(!plan.microbatches.empty(), "plan '", plan.planner, "' has no micro-batches");
  ScheduleInput in;
  in.pool = c.pool();
  in.pp = c.pp;
  in.vpp = c.vpp;
  in.vpp_group = plan.config.vpp_group.value_or(0);
  in.overlap_grad_reduce = cm.training.overlap_grad_reduce;
  in.interleaved_calls = cm.training.interleaved_p2p_calls;
  const int stages = c.pp * c.vpp;
  const cost::QkvFormat format = ring_format(plan);
  std::vector<int64_t> lens;
  for (const auto& mbatch : plan.microbatches) {
    auto& groups = in.groups.emplace_back();
    auto& costs = in.cost.emplace_back();
    auto& tokens = in.tokens.emplace_back();
    auto& transient = in.transient_bytes_per_token.emplace_back();
    auto& bwd_transient = in.backward_transient_bytes_per_token.emplace_back();
    for (const auto& g : mbatch.groups) {
      groups.push_back({g.first_rank, g.cp_size});
      transient.push_back(cost::layer_transient_bytes_per_token(cm, g.cp_size));
      bwd_transient.push_back(cost::layer_backward_transient_bytes_per_token(cm, g.cp_size));
      lens.clear();
      double sum = 0;
      for (int id : g.samples) {
        DCP_REQUIRE(id >= 0 && id < batch.size(), "plan '", plan.planner, "': sample id ", id,
                    " outside the batch of ", batch.size());
        lens.push_back(std::max(batch.lengths[static_cast<size_t>(id)], plan.pad_to));
        sum += static_cast<double>(lens.back());
      }
      tokens.push_back(sum / g.cp_size);
      auto& per_stage = costs.emplace_back(stages);
      for (int v = 0; v < stages; ++v) {
        const auto st = cost::group_stage_times(cm, lens, g.cp_size, g.first_rank, v, format);
        per_stage[v] = OpCost::of(st);
      }
    }
  }
  for (int s = 0; s < c.pp; ++s) {
    const auto g = cost::grad_sync_time(cm, s);
    in.grad_reduce_s.push_back(g.reduce_s);
    in.grad_gather_s.push_back(g.gather_s);
    in.static_bytes.push_back(cost::static_memory(cm, s).total());
  }
  in.iteration_s =
      cost::iteration_time(cm, uses_packing_scheduler(plan), max_received_tokens(plan, batch, c.pool())).total_s();
  in.stored_bytes_per_token_layer = cost::stored_bytes_per_token_layer(cm);
  in.layer_transient_bytes_per_token = cost::layer_transient_bytes_per_token(cm);
  in.embedding_grad_bytes = cost::embedding_grad_bytes(cm);
  in.embedding_input_grad_bytes_per_token = cost::embedding_input_grad_bytes_per_token(cm);
  const cost::LogitBytes logits = cost::logit_bytes_per_token(cm);
  in.logits_saved_bytes_per_token = logits.saved;
  in.logits_peak_bytes_per_token = logits.peak;
  in.logits_grad_bytes_per_token = logits.grad;
  in.tied_output_grad_bytes = cost::tied_output_grad_bytes(cm);
  in.head_saved_bytes_per_token = cost::head_saved_bytes_per_token(cm);
  for (int v = 0; v < stages; ++v) in.layers.push_back(cost::layers_of_virtual_stage(cm.model, c, v));
  in.capacity_bytes = cost::capacity_bytes(cm);
  return in;
}

double lower_bound_s(const plan::Batch& batch, const cost::CostModel& cm, int64_t m_tokens, int static_cp,
                     cost::QkvFormat format) {
  // Per pipeline stage s: its layers' share of every sample's layer work (+ the output layer and
  // loss on the last stage), spread evenly over the N GPUs of that stage. The step cannot be
  // shorter than the busiest stage's share: the stage a layer lives on is fixed by the scenario,
  // not by the plan (with Llama-13B at PP8 the last stage's output layer alone is ~2 layers'
  // GEMMs, so the stages are never equal). The whole-pipeline average is the max's lower bound too.
  // Then the costs no plan avoids (simulator.h, "Lower bound"): every micro-batch runs on every
  // rank of a stage, a pass takes max(GPU time, host issue time) + half the micro-batch overhead,
  // there are at least m_min = ceil(tokens / (N * M)) micro-batches, and the longest sample's
  // group cannot both spread it and skip ring steps (below); the gradient sync when it is not
  // overlapped; the optimizer step and the fixed per-iteration cost.
  // Each sample's work is the least GPU time over the group sizes a valid plan may give it
  // (plan/validate.h rules 4-5: a size that exists in the pool or the static cp, holding at most
  // M tokens per rank, so k >= ceil(L / M)): the FLOPs are the same at every k, but the attention
  // tables may rate a ring step's shorter, non-causal shapes faster than one (L, L) causal kernel
  // (on the h100 tables, Llama-13B with FA3, k = 2 beats k = 1 from about 20k tokens and k = 8
  // from about 64k, by 2.3% and 4.0% of the compute at 512k tokens; a bound at cp = 1 exceeded a
  // plan of one 512k-token sample on 8 ranks by 0.8% when it was introduced). Memoised per
  // length: real batches repeat lengths; each size costs O(1) (cost::sequence_compute_s).
  const double gemm_tokens = static_cast<double>(m_tokens > 0 ? m_tokens : 1);
  const auto& c = cm.cluster;
  const auto& hw = cm.hardware;
  // GEMM efficiency is read where it is highest at or below M: a micro-batch runs T <= M tokens per
  // rank and the simulator rates its GEMMs at T, so the efficiency at M itself is a bound only
  // while the curve never falls as tokens grow. The built-in curves rise, a measured one may dip
  // (helper-20: {1024: 0.70, 4096: 0.80, 8192: 0.70} at M = 8192 gave plan efficiency 1.036).
  // The curve interpolates between its points and is flat beyond its ends, so its highest value
  // on (0, M] is at one of its points below M or at M. (gemm_tokens stays M for m_min and the
  // valid group sizes.)
  double eff_tokens = gemm_tokens;
  for (const auto& pt : hw.gemm_efficiency.points)
    if (pt.x <= gemm_tokens && hw.gemm_efficiency_at(pt.x) > hw.gemm_efficiency_at(eff_tokens)) eff_tokens = pt.x;
  const int pool = c.pool();
  const double n = static_cast<double>(pool);
  // The group sizes a valid plan may give a sample of l tokens (none if l > N * M): those that
  // exist in the pool (plan/geometry.h; min_cp is not known here and only adds sizes to the
  // choice, which keeps the bound a bound) and the plan's static cp.
  std::vector<int> sizes = plan::group_sizes(pool);
  const int cp = static_cp > 0 ? static_cp : c.cp;
  if (cp <= pool && std::find(sizes.begin(), sizes.end(), cp) == sizes.end()) sizes.push_back(cp);
  const auto valid_sizes = [&](int64_t l) {
    const int64_t need = (l + static_cast<int64_t>(gemm_tokens) - 1) / static_cast<int64_t>(gemm_tokens);
    std::vector<int> ks;
    for (int k : sizes)
      if (k >= need) ks.push_back(k);
    return ks;
  };
  std::unordered_map<int64_t, double> least_work;
  const auto work_of = [&](int64_t l) {
    if (auto it = least_work.find(l); it != least_work.end()) return it->second;
    double best = std::numeric_limits<double>::infinity();
    for (int k : valid_sizes(l)) best = std::min(best, cost::sequence_compute_s(cm, l, eff_tokens, k));
    if (!std::isfinite(best)) best = cost::sequence_compute_s(cm, l, eff_tokens);  // no valid plan holds l
    least_work.emplace(l, best);
    return best;
  };
  double total = 0, head = 0, tokens = 0;
  int64_t longest = 0;
  for (int64_t l : batch.lengths) {
    total += work_of(l);
    head += cost::sequence_head_compute_s(cm, l, eff_tokens);
    tokens += static_cast<double>(l);
    longest = std::max(longest, l);
  }
  const double m_min = std::max(1.0, std::ceil(tokens / (n * gemm_tokens)));
  const double per_layer = cm.model.layers > 0 ? (total - head) / cm.model.layers : 0.0;
  // Host issue time of one micro-batch's fwd + bwd per layer at cp = 1 (no ring steps); full
  // recompute issues the forward again before the backward (cost::group_stage_times).
  const double rec = cm.training.recompute_full ? 1.0 : 0.0;
  const double host_layer = hw.host_layer_fwd_s + hw.host_layer_bwd_s + rec * hw.host_layer_fwd_s;
  // The longest sample runs in some micro-batch on a group of some valid size k. Each rank of that
  // group spends, in that micro-batch, at least max(its 1/k share of the sample's compute at k
  // plus the backward's sync idle, its host issue time incl. the ring per layer at k), and at
  // least the host floor in each of its
  // other m_min - 1 micro-batches: a critical path no plan avoids, whichever k it picks (one long
  // sample on few ranks is imbalance; on many, ring steps). Per stage, the least over k.
  struct LongestAt {
    int k;
    double per_layer, head;  // the sample's compute per layer and head part, summed over the k ranks
  };
  std::vector<LongestAt> longest_at;
  {
    const double h = cost::sequence_head_compute_s(cm, longest, eff_tokens);
    std::vector<int> ks = valid_sizes(longest);
    if (ks.empty()) ks.push_back(1);  // no valid plan holds it
    for (int k : ks) {
      const double all = cost::sequence_compute_s(cm, longest, eff_tokens, k);
      longest_at.push_back({k, cm.model.layers > 0 ? (all - h) / cm.model.layers : 0.0, h});
    }
  }
  double worst = total / static_cast<double>(c.pp) / n;  // even split (pp = 1: everything)
  for (int s = 0; s < c.pp; ++s) {
    double layers = 0;
    for (int chunk = 0; chunk < c.vpp; ++chunk) layers += cost::layers_of_virtual_stage(cm.model, c, chunk * c.pp + s);
    const bool last = s == c.pp - 1;
    // The main-gradient adds: every backward pass of each of the stage's virtual stages pays
    // them, GPU and host, whatever the plan.
    double add_gpu = 0, add_host = 0, fixed = 0;  // fixed: one micro-batch's on the stage's chunks
    for (int chunk = 0; chunk < c.vpp; ++chunk) {
      const cost::GradAddTime a = cost::grad_add(cm, chunk * c.pp + s);
      add_gpu += a.gpu_s;
      add_host += a.host_s;
      fixed += cost::microbatch_overhead(cm, chunk * c.pp + s);
    }
    const double work = (layers * per_layer + (last ? head : 0.0)) / n + m_min * add_gpu;
    const cost::GradSyncTime g = cost::grad_sync_time(cm, s);
    // Overlapped it may hide entirely, except a reduce launched after the cool-down.
    const double sync = !g.overlap ? g.reduce_s + g.gather_s
                                   : (reduce_after_cooldown(c.pp, c.vpp, s) ? g.reduce_s : 0.0);
    double critical = std::numeric_limits<double>::infinity();
    for (const LongestAt& a : longest_at) {
      // The ring per layer at k in the plan's layout (a padded plan's bshd ring reads its halves as
      // views, cost::QkvFormat): its host time (fwd + bwd, the call with its diagonal step and k - 1
      // later steps) and the backward's device-sync idle, on the GPU side of a pass
      // (cost::group_stage_times: max(GPU + idle, host)).
      const cost::RingHost r = cost::ring_host(cm, a.k, format);
      const double gpu = (layers * a.per_layer + (last ? a.head : 0.0)) / a.k + layers * r.bwd_sync_s;
      const double host = layers * (host_layer + r.fwd_s + r.bwd_s + rec * r.fwd_s) + add_host;
      critical = std::min(critical, std::max(gpu + add_gpu, host));
    }
    critical += (m_min - 1) * (layers * host_layer + add_host);
    worst = std::max(worst, std::max(work, critical) + m_min * fixed + sync);
  }
  const cost::IterationTime it = cost::iteration_time(cm, /*packed=*/false, 0.0);
  return worst + it.total_s();  // bshd's iteration cost: the sequence-packing data path is extra
}

StepResult simulate_step(const plan::Plan& plan, const plan::Batch& batch, const cost::CostModel& cm,
                         std::span<const int64_t> real_lengths, Bound bound) {
  DCP_NVTX_RANGE();
  if (real_lengths.empty()) real_lengths = batch.lengths;
  DCP_REQUIRE(static_cast<int64_t>(real_lengths.size()) == batch.size(), "real_lengths has ",
              real_lengths.size(), " entries, the batch ", batch.size());
  StepResult out;
  out.schedule = simulate_schedule(build_schedule_input(plan, batch, cm));
  const auto& s = out.schedule;
  out.step_s = s.step_s;
  out.microbatches = static_cast<int>(plan.microbatches.size());
  out.useful_flops = cost::useful_flops(cm.model, real_lengths);
  const double tokens = std::accumulate(real_lengths.begin(), real_lengths.end(), 0.0);
  const int gpus = cm.cluster.gpus;
  out.tflops_per_gpu = cost::tflops_per_gpu(out.useful_flops, out.step_s, gpus);
  out.tokens_per_s_per_gpu = tokens / (out.step_s * gpus);
  if (bound == Bound::compute) {
    // Over the real lengths: the plan's own padding (bshd's pad_to, a dynamic planner's multiple
    // of 2 * cp) is work the plan chose, not work the batch needs. (real_lengths keep the
    // scenario's dataset padding, which every strategy pays.)
    const plan::Batch real{std::vector<int64_t>(real_lengths.begin(), real_lengths.end())};
    out.bound_s = lower_bound_s(real, cm, plan.config.max_seqlen_per_rank, plan.config.cp, ring_format(plan));
    out.plan_efficiency = out.bound_s / out.step_s;
  }
  const int n = cm.cluster.pool(), pp = cm.cluster.pp;
  out.rank_busy_s.assign(n, 0.0);
  for (int st = 0; st < pp; ++st)
    for (int j = 0; j < n; ++j) {
      const auto& t = s.gpu[static_cast<size_t>(st) * n + j];
      out.rank_busy_s[j] += (t.busy_s() - t.sync_s - t.iteration_s) / pp;
    }
  const double mean = std::accumulate(out.rank_busy_s.begin(), out.rank_busy_s.end(), 0.0) / n;
  const double mx = *std::max_element(out.rank_busy_s.begin(), out.rank_busy_s.end());
  out.balance = mean > 0 ? mx / mean : 1.0;
  out.compute_frac = s.compute_s / s.step_s;
  out.comm_frac = s.comm_s / s.step_s;
  out.bubble_frac = s.bubble_s / s.step_s;
  out.imbalance_frac = s.imbalance_s / s.step_s;
  out.overhead_frac = s.overhead_s / s.step_s;
  out.source = cost::source_label(cm);
  out.iteration = cost::iteration_time(cm, uses_packing_scheduler(plan), max_received_tokens(plan, batch, n));
  out.peak_memory_bytes = s.peak_bytes;
  out.fits = s.fits;
  out.capacity_bytes = cost::capacity_bytes(cm);
  if (s.peak_gpu >= 0) out.peak_static = cost::static_memory(cm, s.peak_gpu / n);
  return out;
}

}  // namespace dcp::sim
