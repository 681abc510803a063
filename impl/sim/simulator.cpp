// Discrete-event simulation of one training step (model and formulas in simulator.h).
//
// Every pool rank runs the same static op order per pipeline stage, so the simulation walks the
// per-stage op lists in dependency order: an op (micro-batch, virtual stage, fwd|bwd) is
// processed for all pool ranks at once when its upstream op is done; within it each CP group
// starts at the latest ready time of its members (coupling) and all members end together. 1F1B
// without VPP walks each stage's list of ops and Megatron's blocking P2P calls instead: a call is
// processed when both its stage and the neighbour have reached it (simulator.h).
// Cost: O(pp * ops_per_stage * N) plus the time model's O(V * samples).
// The op orders and P2P call lists are in pipeline_calls.h. Schedules follow Megatron-LM
// megatron/core/pipeline_parallel/schedules.py:
//   1F1B: warmup = min(pp - s - 1, M) forwards, steady (F, B) pairs, cooldown backwards;
//   interleaved: warmup = min((pp - s - 1) * 2 + (vpp - 1) * G, M * vpp), forward op k runs
//   chunk (k mod (G*vpp)) / G of micro-batch (k / (G*vpp)) * G + k mod G; backward chunks reversed.
//   (get_pp_rank_microbatches, d48bd6be0a schedules.py:878-931: no special case for M == pp;
//   older Megatron ran every forward first then, a rule removed in 4295be1a6c, 2024-11-01.)
#include "sim/simulator.h"

#include "sim/pipeline_calls.h"

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

using namespace detail;

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

// A per-stage value of an optional [pp] vector of ScheduleInput (empty = 0 on every stage).
double per_stage(const std::vector<double>& v, int s) { return v.empty() ? 0.0 : v[static_cast<size_t>(s)]; }

}  // namespace


ScheduleResult simulate_schedule(const ScheduleInput& in) {
  DCP_NVTX_RANGE();
  {  // Size the work before checking or allocating anything (kMaxScheduleEntries).
    const int64_t mbs = static_cast<int64_t>(in.groups.size()), stages = int64_t{in.pp} * in.vpp;
    // The interleaved schedule's calls keep two times per call and pool rank (kMaxScheduleEntries).
    const bool calls = walks_interleaved_calls(in);
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
  const bool calls_vpp = walks_interleaved_calls(in);
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
      // The stage's first forward first waits for the param all-gather (overlap: without VPP
      // each stage's, with VPP the first stage's chunk 0; cost::GradSyncTime::gather_waited_s;
      // per group: the collective's own sync across the stage's groups is not modelled).
      const bool first_fwd = !op.bwd && first_fwd_s[static_cast<size_t>(s) * n + gs.first_rank] < 0;
      const double wait = first_fwd ? per_stage(in.grad_gather_waited_s, s) : 0.0;
      const double dur = op.bwd ? c.bwd_s : c.fwd_s;
      for (int j = gs.first_rank; j < gs.first_rank + gs.size; ++j) {
        const size_t gi = static_cast<size_t>(s) * n + j;
        if (!blocking) end[key(op.mb, v, op.bwd) * n + j] = start + wait + dur;
        free_at[gi] = start + wait + dur;
        GpuTime& t = r.gpu[gi];
        t.compute_s += op.bwd ? c.bwd_compute_s : c.fwd_compute_s;
        t.recompute_s += op.bwd ? c.recompute_s : 0.0;
        t.comm_s += (op.bwd ? c.bwd_comm_s : c.fwd_comm_s) + wait;
        t.sync_s += wait;  // DP sync, not the rank's own work (rank_busy_s subtracts it)
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
    const double rs = per_stage(in.grad_reduce_s, s), ag = per_stage(in.grad_gather_s, s);
    int slow = 0;
    for (int j = 1; j < n; ++j)
      if (free_at[static_cast<size_t>(s) * n + j] > free_at[static_cast<size_t>(s) * n + slow]) slow = j;
    const size_t si = static_cast<size_t>(s) * n + slow;
    const double check = per_stage(in.grad_check_s, s);
    double exposed = rs + ag;
    if (in.overlap_grad_reduce) {
      // The embedding bucket's reduce follows the last backward unhidden; the gather waited at
      // the first forward was charged there (run_op).
      const double tail = per_stage(in.grad_reduce_tail_s, s), waited = per_stage(in.grad_gather_waited_s, s);
      const double behind = reduce_after_cooldown(pp, vpp, s) ? 0.0 : last_bwd_s[si];
      exposed = tail + std::max(0.0, rs - tail - behind) + std::max(0.0, ag - waited - std::max(0.0, first_fwd_s[si]));
    }
    exposed += check;  // on the compute stream before the reduce: never hidden
    const double finish = free_at[si] + exposed;
    for (int j = 0; j < n; ++j) {
      GpuTime& t = r.gpu[static_cast<size_t>(s) * n + j];
      t.comm_s += exposed;
      t.sync_s += exposed;
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
                                   const cost::CostModel& cm, cost::AttnTermsMemo* attn) {
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
      const auto all = cost::group_stage_times_all(cm, lens, g.cp_size, g.first_rank, format, attn);
      for (int v = 0; v < stages; ++v) per_stage[v] = OpCost::of(all[static_cast<size_t>(v)]);
    }
  }
  for (int s = 0; s < c.pp; ++s) {
    const auto g = cost::grad_sync_time(cm, s);
    in.grad_reduce_s.push_back(g.reduce_s);
    in.grad_gather_s.push_back(g.gather_s);
    in.grad_check_s.push_back(g.check_s);
    in.grad_gather_waited_s.push_back(g.gather_waited_s);
    in.grad_reduce_tail_s.push_back(g.reduce_tail_s);
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

int64_t bins_lower_bound(std::vector<int64_t> w, int64_t c) {
  DCP_CHECK(c >= 1, "bins_lower_bound: capacity ", c);
  if (w.empty()) return 0;
  std::sort(w.begin(), w.end());
  DCP_CHECK(w.front() >= 0 && w.back() <= c, "bins_lower_bound: an item outside [0, ", c, "]");
  // Prefix sums in 128 bits: up to 2^18 items of up to 2^60 tokens.
  std::vector<__int128> pre(w.size() + 1, 0);
  for (size_t i = 0; i < w.size(); ++i) pre[i + 1] = pre[i] + w[i];
  const auto count_le = [&](int64_t x) {  // items <= x
    return static_cast<size_t>(std::upper_bound(w.begin(), w.end(), x) - w.begin());
  };
  const auto count_lt = [&](int64_t x) {  // items < x
    return static_cast<size_t>(std::lower_bound(w.begin(), w.end(), x) - w.begin());
  };
  const size_t half_end = count_le(c / 2);  // items with 2w <= c (w <= floor(c / 2))
  int64_t best = 0;
  const auto bound_at = [&](int64_t a) {
    const size_t j1_begin = count_le(c - a);  // J1: w > c - a
    const size_t j2_begin = half_end;         // J2: c/2 < w <= c - a
    const size_t j3_begin = count_lt(a);      // J3: a <= w <= c/2
    const int64_t n1 = static_cast<int64_t>(w.size() - j1_begin);
    const int64_t n2 = j1_begin > j2_begin ? static_cast<int64_t>(j1_begin - j2_begin) : 0;
    const __int128 s2 = n2 > 0 ? pre[j1_begin] - pre[j2_begin] : 0;
    const __int128 s3 = j3_begin < half_end ? pre[half_end] - pre[j3_begin] : 0;
    const __int128 over = s3 - (static_cast<__int128>(n2) * c - s2);
    const int64_t extra = over > 0 ? static_cast<int64_t>((over + c - 1) / c) : 0;
    return n1 + n2 + extra;
  };
  best = bound_at(0);
  for (size_t i = 0; i < half_end; ++i)
    if (i == 0 || w[i] != w[i - 1]) best = std::max(best, bound_at(w[i]));
  return best;
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
  // Per length: the least whole work over the valid sizes (work(s), below), and apart the least
  // forward and the least backward per layer and the output layer's two passes (split(s), below;
  // each pass's least may come from another size, which only lowers the bound).
  struct LeastWork {
    double total = 0;
    cost::SequenceCompute pass;
  };
  std::unordered_map<int64_t, LeastWork> least_work;
  const auto work_of = [&](int64_t l) -> const LeastWork& {
    if (auto it = least_work.find(l); it != least_work.end()) return it->second;
    std::vector<int> ks = valid_sizes(l);
    if (ks.empty()) ks.push_back(1);  // no valid plan holds l
    LeastWork w;
    w.total = std::numeric_limits<double>::infinity();
    w.pass.layer_fwd_s = w.pass.layer_bwd_s = std::numeric_limits<double>::infinity();
    for (int k : ks) {
      const cost::SequenceCompute sc = cost::sequence_compute_split(cm, l, eff_tokens, k);
      w.total = std::min(w.total, sc.total_s(cm.model.layers));
      w.pass.layer_fwd_s = std::min(w.pass.layer_fwd_s, sc.layer_fwd_s);
      w.pass.layer_bwd_s = std::min(w.pass.layer_bwd_s, sc.layer_bwd_s);
      w.pass.head_fwd_s = sc.head_fwd_s;  // the output layer and loss do not depend on k
      w.pass.head_bwd_s = sc.head_bwd_s;
    }
    return least_work.emplace(l, w).first->second;
  };
  double total = 0, head = 0, tokens = 0;
  cost::SequenceCompute passes;  // summed over the samples
  int64_t longest = 0;
  // The sizes >= 2 a group may have, ascending, and the tokens of the long samples (L > M) whose
  // least valid size is the j-th of them (a sample no size holds: the largest): the ring tiers below.
  std::vector<int> ring_sizes;
  for (int k : sizes)
    if (k >= 2) ring_sizes.push_back(k);
  std::sort(ring_sizes.begin(), ring_sizes.end());
  std::vector<double> tier_tokens(ring_sizes.size(), 0.0);
  for (int64_t l : batch.lengths) {
    const LeastWork& w = work_of(l);
    total += w.total;
    head += w.pass.head_fwd_s + w.pass.head_bwd_s;
    passes.layer_fwd_s += w.pass.layer_fwd_s;
    passes.layer_bwd_s += w.pass.layer_bwd_s;
    passes.head_fwd_s += w.pass.head_fwd_s;
    passes.head_bwd_s += w.pass.head_bwd_s;
    tokens += static_cast<double>(l);
    if (static_cast<double>(l) > gemm_tokens) {  // a long sample: L > M
      const int64_t need = (l + static_cast<int64_t>(gemm_tokens) - 1) / static_cast<int64_t>(gemm_tokens);
      size_t j = 0;
      while (j + 1 < ring_sizes.size() && ring_sizes[j] < need) ++j;
      if (!tier_tokens.empty()) tier_tokens[j] += static_cast<double>(l);
    }
    longest = std::max(longest, l);
  }
  // Micro-batches: a sample lies whole in one micro-batch, which holds at most N * M tokens, so
  // their count is at least the bin-packing bound of the real lengths into bins of N * M (L2,
  // bins_lower_bound; a length above N * M, which no valid plan holds, counts as one full bin).
  // The token total alone, ceil(sum / (N * M)), read 3 where the samples of 6134, 5947, 5473 and
  // 3062 tokens of megatron-example-4gpu's step 3 need 4 (2026-12-07).
  const int64_t capacity = static_cast<int64_t>(n) * static_cast<int64_t>(gemm_tokens);
  std::vector<int64_t> clamped;
  clamped.reserve(batch.lengths.size());
  for (int64_t l : batch.lengths) clamped.push_back(std::min(l, capacity));
  const double m_min = std::max(
      {1.0, std::ceil(tokens / (n * gemm_tokens)), static_cast<double>(bins_lower_bound(std::move(clamped), capacity))});
  // Ring ranks the long samples force, by size (stop 64, 2026-12-07): a sample of L > M tokens lies on a
  // group of k >= ceil(L / M) ranks, each holding at most M of the micro-batch's tokens, so the
  // rank-micro-batches in groups of size >= ring_sizes[j] number at least R_j = ceil(the tokens
  // of the samples whose least valid size is >= ring_sizes[j], / M), and each issues the ring's host
  // calls per layer of its size, at least c_j = the least over the sizes >= ring_sizes[j]
  // (nondecreasing in j). A rank-micro-batch of size k pays c(k) >= the sum of the steps c_j -
  // c_(j-1) over the tiers j with ring_sizes[j] <= k, so all of them pay at least
  // sum_j R_j (c_j - c_(j-1)), c_(-1) = 0. (Until stop 64 every ring rank-micro-batch was priced at the
  // cheapest size: R_0 c_0.) `cost`: one ring call's per-layer host (or idle) time at size k.
  const auto tiered = [&](const auto& cost) {
    double out = 0, below = 0, tokens_at_or_above = 0;
    std::vector<double> at_or_above(ring_sizes.size(), 0.0);
    for (size_t j = ring_sizes.size(); j-- > 0;) at_or_above[j] = tokens_at_or_above += tier_tokens[j];
    for (size_t j = 0; j < ring_sizes.size(); ++j) {
      double c_j = std::numeric_limits<double>::infinity();
      for (size_t i = j; i < ring_sizes.size(); ++i) c_j = std::min(c_j, cost(cost::ring_host(cm, ring_sizes[i], format)));
      out += std::ceil(at_or_above[j] / gemm_tokens) * (c_j - below);
      below = c_j;
    }
    return out;
  };
  const double rec = cm.training.recompute_full ? 1.0 : 0.0;
  const double ring_all = tiered([&](const cost::RingHost& r) { return r.fwd_s + r.bwd_s + rec * r.fwd_s; });
  const double ring_fwd = tiered([](const cost::RingHost& r) { return r.fwd_s; });
  const double ring_bwd = tiered([&](const cost::RingHost& r) { return r.bwd_s + rec * r.fwd_s; });
  const double ring_idle = tiered([](const cost::RingHost& r) { return r.bwd_sync_s; });
  const double per_layer = cm.model.layers > 0 ? (total - head) / cm.model.layers : 0.0;
  // Host issue time of one micro-batch's fwd + bwd per layer at cp = 1 (no ring steps); full
  // recompute issues the forward again before the backward (cost::group_stage_times).
  const double host_fwd_layer = hw.host_layer_fwd_s;
  const double host_bwd_layer = hw.host_layer_bwd_s + rec * hw.host_layer_fwd_s;
  const double host_layer = host_fwd_layer + host_bwd_layer;
  // The longest sample runs in some micro-batch on a group of some valid size k. Each rank of that
  // group spends, in that micro-batch, at least max(its 1/k share of the sample's forward, its
  // forward host issue time incl. the ring per layer at k), the same for the backward (plus its
  // sync idle), and at least the host floor in each of its other m_min - 1 micro-batches: a
  // critical path no plan avoids, whichever k it picks (one long sample on few ranks is
  // imbalance; on many, ring steps). Per stage, the least over k.
  struct LongestAt {
    int k;
    cost::SequenceCompute pass;  // the sample's, summed over the k ranks
  };
  std::vector<LongestAt> longest_at;
  {
    std::vector<int> ks = valid_sizes(longest);
    if (ks.empty()) ks.push_back(1);  // no valid plan holds it
    for (int k : ks) longest_at.push_back({k, cost::sequence_compute_split(cm, longest, eff_tokens, k)});
  }
  double worst = total / static_cast<double>(c.pp) / n;  // even split (pp = 1: everything)
  // The param gathers the earlier stages' first forwards wait for (overlap, GradSyncTime): no op of
  // stage s starts before a first micro-batch's forward has passed stages 0 .. s-1, each of which
  // waited for its gather first, whatever the plan (the forwards themselves may be short).
  double waits_before = 0;
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
    // Overlapped it may hide entirely, except a reduce launched after the cool-down, the embedding
    // bucket's reduce after the last backward and the gather the first forward waits for (before
    // any op of the stage: its ranks idle then).
    const double sync =
        g.check_s + (!g.overlap ? g.reduce_s + g.gather_s
                                : (reduce_after_cooldown(c.pp, c.vpp, s) ? g.reduce_s : g.reduce_tail_s) + g.gather_waited_s);
    double critical = std::numeric_limits<double>::infinity();
    for (const LongestAt& a : longest_at) {
      // The ring per layer at k in the plan's layout (a padded plan's bshd ring reads its halves as
      // views, cost::QkvFormat): its host time (the call with its diagonal step and k - 1 later
      // steps) and the backward's device-sync idle, on the GPU side of a pass
      // (cost::group_stage_times: max(GPU + idle, host), forward and backward apart).
      const cost::RingHost r = cost::ring_host(cm, a.k, format);
      const double gpu_fwd = (layers * a.pass.layer_fwd_s + (last ? a.pass.head_fwd_s : 0.0)) / a.k;
      const double gpu_bwd =
          (layers * a.pass.layer_bwd_s + (last ? a.pass.head_bwd_s : 0.0)) / a.k + layers * r.bwd_sync_s + add_gpu;
      const double host_fwd = layers * (host_fwd_layer + r.fwd_s);
      const double host_bwd = layers * (host_bwd_layer + r.bwd_s + rec * r.fwd_s) + add_host;
      critical = std::min(critical, std::max(gpu_fwd, host_fwd) + std::max(gpu_bwd, host_bwd));
    }
    critical += (m_min - 1) * (layers * host_layer + add_host);
    // Host issue time, averaged over the stage's N ranks (the busiest issues at least the mean, and
    // a pass takes at least its host time): m_min micro-batches' floors on every rank, plus the
    // ring calls of the ring rank-micro-batches the long samples force (above).
    const double host_mean = m_min * (layers * host_layer + add_host) + layers * ring_all / n;
    // The same by pass (stop 64, 2026-12-07): a rank's forward passes take at least max(their GPU time,
    // their host time) summed, and so do its backward passes, and over the N ranks each sum is at
    // least the larger of the two totals (max is superadditive); the forward's and backward's
    // maxima add up to more than the max of the sums where one pass is host-bound and the other
    // not (Megatron's example at 4 GPUs: short ring forwards wait on the host, their backwards on
    // the GPU). GPU: the least forward and least backward of every sample, the main-gradient
    // adds, the flash THD backward's sync idle of the forced ring rank-micro-batches.
    const double split =
        std::max((layers * passes.layer_fwd_s + (last ? passes.head_fwd_s : 0.0)) / n,
                 m_min * layers * host_fwd_layer + layers * ring_fwd / n) +
        std::max((layers * passes.layer_bwd_s + (last ? passes.head_bwd_s : 0.0) + layers * ring_idle) / n + m_min * add_gpu,
                 m_min * (layers * host_bwd_layer + add_host) + layers * ring_bwd / n);
    worst = std::max(worst, waits_before + std::max({work, critical, host_mean, split}) + m_min * fixed + sync);
    waits_before += g.gather_waited_s;
  }
  const cost::IterationTime it = cost::iteration_time(cm, /*packed=*/false, 0.0);
  return worst + it.total_s();  // bshd's iteration cost: the sequence-packing data path is extra
}

StepResult simulate_step(const plan::Plan& plan, const plan::Batch& batch, const cost::CostModel& cm,
                         std::span<const int64_t> real_lengths, Bound bound, cost::AttnTermsMemo* attn) {
  DCP_NVTX_RANGE();
  if (real_lengths.empty()) real_lengths = batch.lengths;
  DCP_REQUIRE(static_cast<int64_t>(real_lengths.size()) == batch.size(), "real_lengths has ",
              real_lengths.size(), " entries, the batch ", batch.size());
  StepResult out;
  out.schedule = simulate_schedule(build_schedule_input(plan, batch, cm, attn));
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
    // of 2 * cp) is work the plan chose, not work the batch needs. real_lengths are the unpadded
    // ones (data/dataset.h), so the scenario's dataset padding (Megatron's multiple of 2 cp or
    // 2 dp cp, which some strategy always pays) is left out too: a looser bound, still a bound
    // (on the seed-7 batches megatron-example-64gpu drew until 2026-12-07, two steps whose real
    // lengths fit one micro-batch and padded ones did not: docs/history.md).
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
