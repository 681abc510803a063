// See dcp_solver.h for the algorithm.
#include "sched/dcp_solver.h"

#include "core/error.h"
#include "core/nvtx.h"
#include "plan/cp_rule.h"
#include "plan/geometry.h"
#include "plan/validate.h"
#include "sched/megatron_dev.h"
#include "sched/megatron_pr2000.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <map>
#include <optional>
#include <queue>
#include <set>

namespace dcp::sched {

double dcp_default_sample_time(int64_t length_tokens, int cp_size) {
  const double L = static_cast<double>(length_tokens);
  const double k = static_cast<double>(cp_size);
  const double comm = cp_size > 1 ? 0.02 * L / k * (k - 1) : 0.0;
  return (L + L * L / 62000.0) / k + comm;
}

namespace {

struct SolverGroup {
  int mb = 0;
  int first_rank = 0;
  int size = 1;
  int64_t tokens = 0;
  double load_s = 0;  // time per rank
  std::vector<int> samples;
};

struct Candidate {
  plan::Plan plan;
  double score = std::numeric_limits<double>::infinity();
};

class Solver {
 public:
  Solver(const plan::Batch& batch, const plan::PlanConfig& cfg, const plan::PlannerOptions& opt)
      : batch_(batch), cfg_(cfg), opt_(opt), n_(cfg.pool()), sizes_(plan::group_sizes(n_, cfg.min_cp)) {}

  plan::Plan solve() {
    const int64_t g = batch_.size();
    plan::Plan best;
    best.planner = "dcp";
    best.config = cfg_;
    if (g == 0) return best;
    kmin_.resize(g);
    time_cache_.assign(static_cast<size_t>(g) * sizes_.size(), std::numeric_limits<double>::quiet_NaN());
    double total_work = 0;
    int64_t total_tokens = 0;
    for (int64_t i = 0; i < g; ++i) {
      kmin_[i] = size_at_least(static_cast<int>(plan::cp_min(batch_.lengths[i], cfg_.max_seqlen_per_rank, cfg_.min_cp)));
      total_work += kmin_[i] * time(i, kmin_[i]);
      total_tokens += batch_.lengths[i];
    }
    const int v = cfg_.vpp_group.value_or(1);
    const int64_t m_lo = std::max<int64_t>(1, plan::ceil_div(total_tokens, static_cast<int64_t>(n_) * cfg_.max_seqlen_per_rank));
    std::vector<int64_t> ms;
    for (double f : {1.0, 1.1, 1.25, 1.5, 2.0, 3.0, 4.0}) ms.push_back(static_cast<int64_t>(std::ceil(m_lo * f)));
    for (int64_t f : {1, 2, 4}) ms.push_back(f * opt_.pp);
    // Every micro-batch needs a sample, so at most G of them, in multiples of the VPP group.
    DCP_REQUIRE(g >= v, "dcp: ", g, " samples cannot fill a multiple of vpp_group ", v,
                " micro-batches (each micro-batch needs at least one sample)");
    const int64_t m_hi = (g / v) * v;
    for (auto& m : ms) m = std::min(plan::ceil_div(std::max(m, m_lo), v) * v, m_hi);
    std::sort(ms.begin(), ms.end());
    ms.erase(std::unique(ms.begin(), ms.end()), ms.end());

    Candidate winner;
    // A count that fails to pack (memory) is skipped; counts grow until one packs. The loop is
    // bounded: with m = G micro-batches every sample gets a micro-batch of its own.
    int64_t extra = 0;
    for (size_t c = 0; c < ms.size() || (!std::isfinite(winner.score) && extra < 64); ++c) {
      int64_t m;
      if (c < ms.size()) {
        m = ms[c];
      } else {
        if (ms.back() >= m_hi) break;
        m = std::min(plan::ceil_div(ms.back() * (2 + extra), v) * v, m_hi);
        ++extra;
      }
      auto p = pack(static_cast<int>(m), total_work);
      if (!p) continue;
      const double score = opt_.step_time_s ? opt_.step_time_s(*p) : estimate(*p);
      if (score < winner.score) winner = Candidate{std::move(*p), score};
    }
    // Portfolio: Megatron's own plans are candidates too, scored the same way, so dcp is never
    // worse than them under the caller's cost model (they are cheap: ~1 ms for 2048 samples).
    for (auto* megatron : {&megatron_dev_plan, &megatron_pr2000_plan}) {
      try {
        plan::Plan p = megatron(batch_, cfg_);
        if (plan::find_violation(p, batch_)) continue;
        p.planner = "dcp";
        const double score = opt_.step_time_s ? opt_.step_time_s(p) : estimate(p);
        if (score < winner.score) winner = Candidate{std::move(p), score};
      } catch (const InputError&) {
      }
    }
    // Without VPP, m = G (one sample per micro-batch) always packs; with it the count may have
    // to exceed G, which no plan can do (Megatron asserts, §7g).
    DCP_REQUIRE(std::isfinite(winner.score), "dcp: no micro-batch count that is a multiple of vpp_group ", v,
                " and at most the ", g, " samples holds them within max_seqlen_per_rank ", cfg_.max_seqlen_per_rank);
    plan::validate(winner.plan, batch_, cfg_);  // the one validity check: a packing bug is an internal error
    return std::move(winner.plan);
  }

 private:
  // t(L_i, k), memoised: the cost callback may run a whole time model.
  double time(int64_t i, int k) const {
    const size_t idx = std::lower_bound(sizes_.begin(), sizes_.end(), k) - sizes_.begin();
    DCP_CHECK(idx < sizes_.size() && sizes_[idx] == k, "group size ", k, " does not exist in a pool of ", n_);
    double& slot = time_cache_[static_cast<size_t>(i) * sizes_.size() + idx];
    if (std::isnan(slot)) {
      slot = opt_.sample_time_s ? opt_.sample_time_s(batch_.lengths[i], k) : dcp_default_sample_time(batch_.lengths[i], k);
    }
    return slot;
  }

  // Smallest existing group size >= k (N itself when no power of two fits a non-pow2 pool).
  int size_at_least(int k) const {
    for (int s : sizes_) {
      if (s >= k) return s;
    }
    return n_;
  }
  int prev_size(int k) const {
    int prev = 0;
    for (int s : sizes_) {
      if (s >= k) break;
      prev = s;
    }
    return prev;
  }
  int next_size(int k) const {
    for (int s : sizes_) {
      if (s > k) return s;
    }
    return 0;
  }

  // Per-rank load of the plan in micro-batch order; 1F1B estimate (see header).
  double estimate(const plan::Plan& p) const {
    double sum_max = 0;
    for (const auto& mb : p.microbatches) {
      double mx = 0;
      for (const auto& gr : mb.groups) {
        double l = 0;
        for (int s : gr.samples) l += time(s, gr.cp_size);
        mx = std::max(mx, l);
      }
      sum_max += mx;
    }
    const double m = static_cast<double>(p.microbatches.size());
    const double pp = static_cast<double>(std::max(1, opt_.pp));
    return (sum_max + (pp - 1) * sum_max / m) / pp;
  }

  std::optional<plan::Plan> pack(int m, double total_work) {
    const int64_t g = batch_.size();
    const double target = total_work / (static_cast<double>(n_) * m);
    // CP size per sample: double while the sample alone exceeds the balanced target and it helps.
    std::vector<int> k(g);
    for (int64_t i = 0; i < g; ++i) {
      int kk = kmin_[i];
      for (int guard = 0; guard < 64; ++guard) {
        const int nk = next_size(kk);
        if (nk == 0 || time(i, kk) <= target || time(i, nk) >= time(i, kk)) break;
        kk = nk;
      }
      k[i] = kk;
    }
    // Longest processing time first: by total work k * t(L, k), ties by id.
    std::vector<int> order(g);
    std::iota(order.begin(), order.end(), 0);
    std::vector<double> work(g);
    for (int64_t i = 0; i < g; ++i) work[i] = k[i] * time(i, k[i]);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return work[a] > work[b]; });

    std::vector<std::vector<int>> owner(m, std::vector<int>(n_, -1));  // group id per rank
    std::vector<int> free_ranks(m, n_);
    std::vector<double> mb_load(m, 0.0);  // total work placed, for choosing a micro-batch
    std::set<std::pair<double, int>> open_mbs;  // (mb_load, mb) of micro-batches with free ranks
    for (int mb = 0; mb < m; ++mb) open_mbs.insert({0.0, mb});
    std::set<int> no_free_block;  // sizes with no free aligned block left in any micro-batch
    std::vector<SolverGroup> groups;
    using Entry = std::pair<double, int>;  // (load, group id), min-heap per size
    std::map<int, std::priority_queue<Entry, std::vector<Entry>, std::greater<>>> heaps;

    // The least-loaded group of size `size` with room for `tokens` more (heap top, stale
    // entries dropped, full groups skipped and kept), or -1.
    // A full group is kept for later samples only while the shortest sample still to come fits
    // it (min_future), so full groups are not scanned again and again.
    int64_t min_future = 0;
    auto lightest_with_room = [&](int size, int64_t tokens) {
      auto& heap = heaps[size];
      std::vector<Entry> skipped;
      int found = -1;
      while (!heap.empty()) {
        const auto [load, id] = heap.top();
        if (load != groups[id].load_s) {  // stale entry
          heap.pop();
          continue;
        }
        const int64_t room = cfg_.max_seqlen_per_rank * size - groups[id].tokens;
        if (tokens <= room) {
          found = id;
          break;
        }
        heap.pop();
        if (room >= min_future) skipped.push_back({load, id});
      }
      for (const auto& e : skipped) heap.push(e);
      return found;
    };
    // Places sample i: a new group of size kk, or an existing group of size >= kmin with room,
    // whichever leaves the smaller load per rank (ties: the new group); false if neither exists.
    auto place = [&](int i, int kk) {
      const int64_t L = batch_.lengths[i];
      // A new group in the least-loaded micro-batch with a free aligned block of size kk.
      // Micro-batches with free ranks, in (load, index) order: the first with a free block wins.
      int best_mb = -1, best_first = -1;
      if (!no_free_block.count(kk)) {
        for (const auto& [load, mb] : open_mbs) {
          if (free_ranks[mb] < kk) continue;
          const int first = free_block(owner[mb], kk);
          if (first >= 0) {
            best_mb = mb;
            best_first = first;
            break;
          }
        }
        // Free blocks are only ever consumed: once none of a size is left, none will come back.
        if (best_mb < 0) no_free_block.insert(kk);
      }
      double best_load = best_mb >= 0 ? time(i, kk) : std::numeric_limits<double>::infinity();
      int gid = -1;
      for (int size : sizes_) {
        if (size < kmin_[i]) continue;
        const int id = lightest_with_room(size, L);
        if (id >= 0 && groups[id].load_s + time(i, size) < best_load) {
          best_load = groups[id].load_s + time(i, size);
          gid = id;
        }
      }
      if (gid < 0) {
        if (best_mb < 0) return false;
        gid = static_cast<int>(groups.size());
        groups.push_back(SolverGroup{best_mb, best_first, kk, 0, 0.0, {}});
        for (int r = best_first; r < best_first + kk; ++r) owner[best_mb][r] = gid;
        free_ranks[best_mb] -= kk;
      }
      SolverGroup& gr = groups[gid];
      const double t = time(i, gr.size);
      gr.samples.push_back(i);
      gr.tokens += L;
      gr.load_s += t;
      open_mbs.erase({mb_load[gr.mb], gr.mb});
      mb_load[gr.mb] += t * gr.size;
      if (free_ranks[gr.mb] > 0) open_mbs.insert({mb_load[gr.mb], gr.mb});
      heaps[gr.size].push({gr.load_s, gid});
      return true;
    };
    std::vector<int64_t> suffix_min(order.size() + 1, std::numeric_limits<int64_t>::max());
    for (size_t q = order.size(); q-- > 0;)
      suffix_min[q] = std::min(suffix_min[q + 1], batch_.lengths[order[q]]);
    for (size_t q = 0; q < order.size(); ++q) {
      const int i = order[q];
      min_future = suffix_min[q];
      // The chosen size first; if nothing has room, the smaller sizes down to the minimum.
      bool placed = false;
      for (int kk = k[i]; kk >= kmin_[i] && !placed; kk = prev_size(kk)) {
        placed = place(i, kk);
        if (kk == kmin_[i]) break;
      }
      if (!placed) return std::nullopt;  // this micro-batch count cannot hold the batch
    }
    return assemble(m, groups, owner);
  }

  // Lowest aligned block of `size` whose ranks are all free, or -1.
  int free_block(const std::vector<int>& owner, int size) const {
    for (int a = 0; a + size <= n_; a += size) {
      bool ok = true;
      for (int r = a; r < a + size && ok; ++r) ok = owner[r] < 0;
      if (ok) return a;
    }
    return -1;
  }

  std::optional<plan::Plan> assemble(int m, const std::vector<SolverGroup>& groups,
                                     const std::vector<std::vector<int>>& owner) const {
    plan::Plan p;
    p.planner = "dcp";
    p.config = cfg_;
    for (int mb = 0; mb < m; ++mb) {
      // Cover empty ranks: the smallest enclosing block of an existing size that holds work
      // becomes one group (every group meeting it lies inside it, since blocks are nested).
      std::vector<int> rep = owner[mb];  // representative group per rank
      for (int guard = 0; guard <= n_; ++guard) {
        const auto it = std::find(rep.begin(), rep.end(), -1);
        if (it == rep.end()) break;
        const int empty = static_cast<int>(it - rep.begin());
        int first = -1, size = 0;
        for (int s : sizes_) {
          const int f = (empty / s) * s;
          if (std::any_of(rep.begin() + f, rep.begin() + f + s, [](int x) { return x >= 0; })) {
            first = f;
            size = s;
            break;
          }
        }
        if (first < 0) return std::nullopt;  // a micro-batch with no work: count infeasible
        const int keep = *std::find_if(rep.begin() + first, rep.begin() + first + size, [](int x) { return x >= 0; });
        std::fill(rep.begin() + first, rep.begin() + first + size, keep);
      }
      plan::MicroBatch out;
      for (const plan::RankRun& run : plan::rank_runs(n_, [&](int a, int b) { return rep[a] == rep[b]; })) {
        const int r = run.first_rank, e = run.first_rank + run.size;
        plan::Group gr{r, run.size, {}};
        std::vector<int> merged;  // original groups in rank order, each once
        for (int q = r; q < e; ++q) {
          if (std::find(merged.begin(), merged.end(), owner[mb][q]) == merged.end() && owner[mb][q] >= 0)
            merged.push_back(owner[mb][q]);
        }
        for (int id : merged) gr.samples.insert(gr.samples.end(), groups[id].samples.begin(), groups[id].samples.end());
        out.groups.push_back(std::move(gr));
      }
      p.microbatches.push_back(std::move(out));
    }
    return p;
  }

  const plan::Batch& batch_;
  const plan::PlanConfig& cfg_;
  const plan::PlannerOptions& opt_;
  const int n_;
  const std::vector<int> sizes_;
  std::vector<int> kmin_;
  mutable std::vector<double> time_cache_;  // [G x sizes_], NaN = not computed
};

}  // namespace

plan::Plan DcpPlanner::plan(const plan::Batch& batch, const plan::PlanConfig& config) const {
  DCP_NVTX_RANGE();
  plan::check_config(batch, config);
  plan::check_fits(batch, config);
  return Solver(batch, config, options_).solve();
}

}  // namespace dcp::sched
