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
#include "plan/validate.h"

#include <algorithm>
#include <cmath>
#include <numeric>

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
// saved from forward to backward, the logits' peak never on top of the layer transient; with
// tp > 1 the output layer's gathered input, resident from its first forward at the largest
// micro-batch's size, and its whole input gradient in the backward); after a
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
      double live = 0, peak = 0, gather_buffer = 0;
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
          if (loss && tok * in.head_gather_bytes_per_token > gather_buffer) {  // grows, never freed
            live += tok * in.head_gather_bytes_per_token - gather_buffer;
            gather_buffer = tok * in.head_gather_bytes_per_token;
          }
          const double head_and_logits = loss ? head + tok * in.logits_peak_bytes_per_token : 0.0;
          peak = std::max(peak, live + std::max(layer_t, head_and_logits));
          live += head + saved;
        } else {
          // The tied output gradient (pp 1: v is 0 and the loss stage) from the output layer's
          // weight-gradient GEMM on, beside the logits' gradient it reads.
          const double tied = loss && v == 0 ? in.tied_output_grad_bytes : 0.0;
          if (loss)
            peak = std::max(peak, live + tok * (in.logits_peak_bytes_per_token + in.head_gather_bytes_per_token) - saved);
          // (The output layer's whole input gradient, tp > 1, is live through its wgrad GEMM too.)
          if (tied > 0)
            peak = std::max(peak, live - saved + tok * (in.logits_grad_bytes_per_token + in.head_gather_bytes_per_token) + tied);
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
  // Per stage: when its grads are reduced, and its exposed param gather (after the optimizer).
  std::vector<double> reduced_at(static_cast<size_t>(pp), 0.0), gather_exposed(static_cast<size_t>(pp), 0.0);
  for (int s = 0; s < pp; ++s) {
    const double rs = per_stage(in.grad_reduce_s, s), ag = per_stage(in.grad_gather_s, s);
    int slow = 0;
    for (int j = 1; j < n; ++j)
      if (free_at[static_cast<size_t>(s) * n + j] > free_at[static_cast<size_t>(s) * n + slow]) slow = j;
    const size_t si = static_cast<size_t>(s) * n + slow;
    const double check = per_stage(in.grad_check_s, s);
    double reduced = rs, gathered = ag;  // the exposed parts of the reduce and of the param gather
    if (in.overlap_grad_reduce) {
      // The embedding bucket's reduce follows the last backward unhidden; the gather waited at
      // the first forward was charged there (run_op).
      const double tail = per_stage(in.grad_reduce_tail_s, s), waited = per_stage(in.grad_gather_waited_s, s);
      const double behind = reduce_after_cooldown(pp, vpp, s) ? 0.0 : last_bwd_s[si];
      reduced = tail + std::max(0.0, rs - tail - behind);
      gathered = std::max(0.0, ag - waited - std::max(0.0, first_fwd_s[si]));
    }
    const double exposed = reduced + gathered + check;  // the check: on the compute stream before the reduce, never hidden
    reduced_at[static_cast<size_t>(s)] = free_at[si] + reduced + check;
    gather_exposed[static_cast<size_t>(s)] = gathered;
    const double finish = free_at[si] + exposed;
    for (int j = 0; j < n; ++j) {
      GpuTime& t = r.gpu[static_cast<size_t>(s) * n + j];
      t.comm_s += exposed;
      t.sync_s += exposed;
      t.finish_s = finish;
    }
    finish_all = std::max(finish_all, finish);
  }
  const bool tied_join = in.grad_embedding_s > 0 && pp > 1;
  if (tied_join) {
    // The first and the last stage all-reduce the tied embedding's gradient once both have reduced
    // their grads (finalize_model_grads, cost::GradSyncTime::embedding_s); the earlier one's wait
    // is idle.
    const double both = std::max(reduced_at.front(), reduced_at.back()) + in.grad_embedding_s;
    for (const int s : {0, pp - 1}) {
      reduced_at[static_cast<size_t>(s)] = both;
      for (int j = 0; j < n; ++j) {
        GpuTime& t = r.gpu[static_cast<size_t>(s) * n + j];
        t.comm_s += in.grad_embedding_s;
        t.sync_s += in.grad_embedding_s;
        t.finish_s = both;
      }
      finish_all = std::max(finish_all, both);
    }
  }
  if (pp > 1 && *std::max_element(gather_exposed.begin(), gather_exposed.end()) > 0) {
    // A stage's exposed param gather (the distributed optimizer's, started in optimizer.step)
    // follows the grad-norm all-reduce of --clip-grad (Megatron's default 1.0, and every upstream
    // script's), over the model-parallel group: every stage's reduce, and the end stages'
    // embedding all-reduce, come first [Megatron-LM 3b309c627e training/arguments.py:2049,
    // core/optimizer/optimizer.py:605-606, distrib_optimizer.py:2578-2599; helper-83's review].
    // The wait is idle; a stage without a gather is done at its own reduce.
    const double all_reduced = *std::max_element(reduced_at.begin(), reduced_at.end());
    for (int s = 0; s < pp; ++s) {
      const double gathered = gather_exposed[static_cast<size_t>(s)];
      if (gathered <= 0) continue;
      for (int j = 0; j < n; ++j) r.gpu[static_cast<size_t>(s) * n + j].finish_s = all_reduced + gathered;
      finish_all = std::max(finish_all, all_reduced + gathered);
    }
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
    in.grad_embedding_s = std::max(in.grad_embedding_s, g.embedding_s);
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
  in.head_gather_bytes_per_token = cost::head_gather_bytes_per_token(cm);
  for (int v = 0; v < stages; ++v) in.layers.push_back(cost::layers_of_virtual_stage(cm.model, c, v));
  in.capacity_bytes = cost::capacity_bytes(cm);
  return in;
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
