// The lower bound of a step over every valid plan (formula and why each term holds:
// simulator.h, "Lower bound"), and Martello and Toth's L2 bin-packing bound it counts micro-batches
// with. Reported as plan efficiency (bound / step) by simulate_step; no planner reads it.
#include "sim/simulator.h"

#include "sim/pipeline_calls.h"

#include "core/error.h"
#include "plan/geometry.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>
#include <vector>

namespace dcp::sim {

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
  // Per tier j: R_j, and the ring's host calls (and idle) at ring_sizes[j], each computed once.
  std::vector<double> tier_rank_mbs(ring_sizes.size(), 0.0);
  std::vector<cost::RingHost> tier_host;
  tier_host.reserve(ring_sizes.size());
  double tokens_at_or_above = 0;
  for (size_t j = ring_sizes.size(); j-- > 0;)
    tier_rank_mbs[j] = std::ceil((tokens_at_or_above += tier_tokens[j]) / gemm_tokens);
  for (int k : ring_sizes) tier_host.push_back(cost::ring_host(cm, k, format));
  const auto tiered = [&](const auto& cost) {
    std::vector<double> c(ring_sizes.size());  // c_j: the least over the sizes >= ring_sizes[j]
    for (size_t j = ring_sizes.size(); j-- > 0;)
      c[j] = j + 1 < ring_sizes.size() ? std::min(cost(tier_host[j]), c[j + 1]) : cost(tier_host[j]);
    double out = 0, below = 0;
    for (size_t j = 0; j < ring_sizes.size(); ++j) {
      out += tier_rank_mbs[j] * (c[j] - below);
      below = c[j];
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
  // With tp > 1 each layer also issues TP's collectives: 4 calls forward, 10 backward
  // (cost::group_stage_times; the embedding's and output layer's, once per micro-batch, are left out).
  const double tp_fwd = c.tp > 1 ? cost::kTpHostCallsFwd * hw.tp_collective_host_s : 0.0;
  const double tp_bwd = c.tp > 1 ? cost::kTpHostCallsBwd * hw.tp_collective_host_s : 0.0;
  const double host_fwd_layer = hw.host_layer_fwd_s + tp_fwd;
  const double host_bwd_layer = hw.host_layer_bwd_s + tp_bwd + rec * host_fwd_layer;
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
    cost::RingHost ring;         // the ring per layer at k (stage-independent)
  };
  std::vector<LongestAt> longest_at;
  {
    std::vector<int> ks = valid_sizes(longest);
    if (ks.empty()) ks.push_back(1);  // no valid plan holds it
    for (int k : ks)
      longest_at.push_back({k, cost::sequence_compute_split(cm, longest, eff_tokens, k), cost::ring_host(cm, k, format)});
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
    // The tied embedding's all-reduce (first and last stage) follows the stage's own sync.
    const double sync =
        g.check_s + g.embedding_s + (!g.overlap ? g.reduce_s + g.gather_s
                                : (detail::reduce_after_cooldown(c.pp, c.vpp, s) ? g.reduce_s : g.reduce_tail_s) + g.gather_waited_s);
    double critical = std::numeric_limits<double>::infinity();
    for (const LongestAt& a : longest_at) {
      // The ring per layer at k in the plan's layout (a padded plan's bshd ring reads its halves as
      // views, cost::QkvFormat): its host time (the call with its diagonal step and k - 1 later
      // steps) and the backward's device-sync idle, on the GPU side of a pass
      // (cost::group_stage_times: max(GPU + idle, host), forward and backward apart).
      const cost::RingHost& r = a.ring;
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

}  // namespace dcp::sim
