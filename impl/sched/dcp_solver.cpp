// See dcp_solver.h for the algorithm; dcp_search.{h,cpp} hold the packing and the local search.
#include "sched/dcp_solver.h"

#include "core/error.h"
#include "core/nvtx.h"
#include "plan/cp_rule.h"
#include "plan/geometry.h"
#include "plan/validate.h"
#include "sched/dcp_search.h"
#include "sched/megatron_dev.h"
#include "sched/megatron_pr2000.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>

namespace dcp::sched {

double dcp_default_sample_time(int64_t length_tokens, int cp_size) {
  const double L = static_cast<double>(length_tokens);
  const double k = static_cast<double>(cp_size);
  const double comm = cp_size > 1 ? 0.02 * L / k * (k - 1) : 0.0;
  return (L + L * L / 62000.0) / k + comm;
}

int64_t dcp_budget_units(double time_budget_ms, bool simulated) {
  if (!(time_budget_ms > 0)) return simulated ? kDcpSimulatedDefaultBudgetUnits : kDcpDefaultBudgetUnits;
  const double u = time_budget_ms * kDcpUnitsPerMs;
  return u >= 1e15 ? int64_t{1000000000000000} : std::max<int64_t>(1, static_cast<int64_t>(u));
}

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A scored plan: fitting plans first, then the smaller step time.
struct Scored {
  plan::Plan plan;
  bool fits = false;
  double step = kInf;
  bool better_than(const Scored& o) const { return fits != o.fits ? fits : step < o.step; }
  // One number ordering like better_than: non-fitting plans after every fitting one.
  double rank() const { return fits ? step : 1e300 + step; }
};

class Solver {
 public:
  Solver(const plan::Batch& batch, const plan::PlanConfig& cfg, const plan::PlannerOptions& opt)
      : batch_(batch),
        cfg_(cfg),
        opt_(opt),
        n_(cfg.pool()),
        times_(batch, plan::group_sizes(cfg.pool(), cfg.min_cp),
               opt.sample_time_s ? opt.sample_time_s : std::function<double(int64_t, int)>(dcp_default_sample_time)) {}

  plan::Plan solve() {
    const int64_t g = batch_.size();
    if (g == 0) {
      plan::Plan p;
      p.planner = "dcp";
      p.config = cfg_;
      return p;
    }
    const int v = cfg_.vpp_group.value_or(1);
    DCP_REQUIRE(g >= v, "dcp: ", g, " samples cannot fill a multiple of vpp_group ", v,
                " micro-batches (each micro-batch needs at least one sample)");
    int64_t max_len = 0;
    for (int64_t L : batch_.lengths) max_len = std::max(max_len, L);
    const int64_t m_cap = cfg_.max_seqlen_per_rank;
    // Token caps per rank: M, then smaller ones only when the memory model rejects every plan at
    // M (memory per GPU grows with the tokens per rank of the micro-batches in flight). The
    // smallest cap still lets the longest sample fit the pool.
    const int64_t floor_cap = plan::ceil_div(max_len, static_cast<int64_t>(n_));
    Scored best;
    for (const double f : {1.0, 0.75, 0.5, 0.375, 0.25, 0.125}) {
      const int64_t cap = std::max(floor_cap, static_cast<int64_t>(static_cast<double>(m_cap) * f));
      if (f < 1.0 && cap >= last_cap_) continue;
      last_cap_ = cap;
      // Portfolio (at the full cap): Megatron's own plans, scored as they are (so under the
      // caller's scorer dcp is never worse than them) and as seeds of the local search.
      std::vector<plan::Plan> seeds;
      if (f == 1.0 && portfolio_affordable()) {
        for (auto* megatron : {&megatron_dev_plan, &megatron_pr2000_plan}) {
          try {
            plan::Plan p = megatron(batch_, cfg_);
            if (plan::find_violation(p, batch_, cfg_)) continue;
            p.planner = "dcp";
            seeds.push_back(p);
            Scored c = score(std::move(p));
            if (c.better_than(best)) best = std::move(c);
          } catch (const InputError&) {
          }
        }
      }
      Scored s = solve_cap(cap, v, seeds);
      if (s.better_than(best)) best = std::move(s);
      if (best.fits || !opt_.estimate) break;
    }
    // Without VPP, m = G (one sample per micro-batch) always packs; with it the count may have
    // to exceed G, which no plan can do (Megatron asserts, §7g).
    DCP_REQUIRE(std::isfinite(best.step), "dcp: no micro-batch count that is a multiple of vpp_group ", v,
                " and at most the ", g, " samples holds them within max_seqlen_per_rank ", m_cap);
    if (opt_.pp > 1 && (opt_.estimate || opt_.step_time_s)) {
      reorder(best);
      ramp(best);
    }
    plan::validate(best.plan, batch_, cfg_);  // the one validity check: a packing bug is an internal error
    return std::move(best.plan);
  }

 private:
  Scored score(plan::Plan p) const {
    Scored s;
    if (opt_.estimate) {
      const auto e = opt_.estimate(p);
      s.fits = e.fits;
      s.step = e.step_s;
    } else {
      s.fits = true;
      s.step = opt_.step_time_s ? opt_.step_time_s(p) : builtin_estimate(p);
    }
    s.plan = std::move(p);
    return s;
  }

  // Whether the caller's simulator scores the plans (else the built-in 1F1B estimate).
  bool simulated() const { return static_cast<bool>(opt_.estimate) || static_cast<bool>(opt_.step_time_s); }

  // Whether the Megatron portfolio is affordable. Megatron's greedy runs one pass over the
  // remaining samples per micro-batch, O(G m): measured with bench_sched on the 2-core VM,
  // megatron-dev + megatron-pr2000 took 4.9 s at G = 262144, N = 64 (G x m_lo ~ 2.6e8, ~19 ns
  // each) and ~25 ms at G = 16384 (G x m_lo ~ 1e6). Up to G x m_lo = 2^25 (~0.6 s) it is run at
  // the default budget (of this mode: with or without a simulator); a larger --time-budget-ms
  // raises the limit in proportion, so an explicit budget equal to the default plans the same.
  bool portfolio_affordable() const {
    int64_t tokens = 0;
    for (int64_t L : batch_.lengths) tokens += L;
    const int64_t m_lo = plan::ceil_div(tokens, static_cast<int64_t>(n_) * cfg_.max_seqlen_per_rank);
    const double scale = std::max(1.0, static_cast<double>(dcp_budget_units(opt_.time_budget_ms, simulated())) /
                                           static_cast<double>(dcp_budget_units(0, simulated())));
    return static_cast<double>(batch_.size()) * static_cast<double>(std::max<int64_t>(1, m_lo)) <=
           static_cast<double>(int64_t{1} << 25) * scale;
  }

  // Micro-batch order matters to a pipeline (1F1B stalls on micro-batches of unequal length),
  // not to the surrogate. Orders by critical path (built-in per-group time): descending,
  // ascending, heavy/light alternating, pyramid (light ... heavy ... light: the heaviest in the
  // pipeline's steady state), valley (its reverse), and tail-light pyramids: of the light
  // micro-batches, r go to the back for each one to the front (r = 2, 3, 5, 8). Why: a 1F1B
  // pipeline fills with one micro-batch's forward on the stages before the last, and drains
  // with the first stage's cooldown, the backwards of the last pp - 1 micro-batches; a backward
  // costs 2x (3x with full recompute) a forward, so light micro-batches save more at the back.
  // The simulator picks among the orders (reorder); measured with `dcpbench run`,
  // published settings, 2026-11-25: a tail-light order won 61 of 90 reorders on six PP
  // scenarios and lowered dcp's mean step by 0.7-2.6% (README).
  std::vector<std::vector<size_t>> orders(const plan::Plan& plan) const {
    const size_t m = plan.microbatches.size();
    std::vector<double> crit(m, 0.0);
    for (size_t i = 0; i < m; ++i) crit[i] = crit_of(plan.microbatches[i]);
    std::vector<size_t> desc(m);
    for (size_t i = 0; i < m; ++i) desc[i] = i;
    std::stable_sort(desc.begin(), desc.end(), [&](size_t a, size_t b) { return crit[a] > crit[b]; });
    std::vector<size_t> asc(desc.rbegin(), desc.rend()), alt, pyramid(m), valley(m);
    for (size_t lo = 0, hi = m; lo < hi;) {
      alt.push_back(desc[lo++]);
      if (lo < hi) alt.push_back(desc[--hi]);
    }
    for (size_t i = 0, lo = 0, hi = m; i < m; ++i) (i % 2 == 0 ? pyramid[--hi] : pyramid[lo++]) = desc[m - 1 - i];
    for (size_t i = 0, lo = 0, hi = m; i < m; ++i) (i % 2 == 0 ? valley[--hi] : valley[lo++]) = desc[i];
    std::vector<std::vector<size_t>> out{pyramid, desc, asc, alt, valley};
    for (const size_t r : {2, 3, 5, 8}) {
      std::vector<size_t> tail(m);
      for (size_t i = 0, lo = 0, hi = m; i < m; ++i) (i % (r + 1) != r ? tail[--hi] : tail[lo++]) = desc[m - 1 - i];
      out.push_back(std::move(tail));
    }
    return out;
  }
  static plan::Plan permuted(const plan::Plan& plan, const std::vector<size_t>& order) {
    plan::Plan p = plan;
    for (size_t i = 0; i < order.size(); ++i) p.microbatches[i] = plan.microbatches[order[i]];
    return p;
  }
  // Pyramid order (the one that won most often on the Llama and code/prose scenarios).
  plan::Plan pipeline_ordered(plan::Plan plan) const {
    if (opt_.pp <= 1 || plan.microbatches.size() < 3) return plan;
    return permuted(plan, orders(plan).front());
  }
  // The best of the nine orders under the scorer.
  void reorder(Scored& best) const {
    if (best.plan.microbatches.size() < 2) return;
    const Scored original = best;
    for (const auto& order : orders(original.plan)) {
      Scored c = score(permuted(original.plan, order));
      if (c.better_than(best)) best = std::move(c);
    }
  }

  // Time per rank of a sample on a group of cp_size ranks (the memoised t(L, k)).
  double load(int sample, int cp_size) const {
    const auto& sizes = times_.sizes();
    return times_(sample, static_cast<int>(std::lower_bound(sizes.begin(), sizes.end(), cp_size) - sizes.begin()));
  }
  // Critical path of a micro-batch under the per-group time (the largest group load).
  double crit_of(const plan::MicroBatch& mb) const {
    return detail::critical_path(mb, [this](int s, int k) { return load(s, k); });
  }

  // Pipeline ramp (dcp_solver.h step 11; detail::pipeline_ramp): only without VPP.
  // Interleaved 1F1B runs micro-batches in groups of vpp_group; splitting vpp_group of them at
  // once was 5-13% slower on every step of mix-web-code-prose-llama3-8b at VPP 4 (measured with
  // `dcpbench run`, 2026-11-25).
  void ramp(Scored& best) const {
    if (cfg_.vpp_group.value_or(1) != 1 || best.plan.microbatches.size() < 2) return;
    // pipeline_ramp keeps a candidate iff it ranks below every one kept before, so the last
    // scored plan to do so is the result: kept here to avoid simulating it again.
    std::optional<Scored> kept;
    const auto per_rank = [this](int s, int k) { return load(s, k); };
    const detail::Ramped r = detail::pipeline_ramp(best.plan, per_rank, best.rank(), [&](const plan::Plan& p) {
      Scored c = score(p);
      const double rank = c.rank();
      if (rank < (kept ? kept->rank() : best.rank())) kept = std::move(c);
      return rank;
    });
    if (kept && r.rank < best.rank()) best = std::move(*kept);
  }

  // 1F1B estimate of any plan with the built-in per-group critical path.
  double builtin_estimate(const plan::Plan& p) const {
    double sum = 0;
    for (const auto& mb : p.microbatches) sum += crit_of(mb);
    return detail::pipeline_estimate(sum, static_cast<int>(p.microbatches.size()), opt_.pp);
  }

  // Packs the candidate micro-batch counts at token cap `cap`, improves the finalists by local
  // search and returns the best of them under the scorer.
  Scored solve_cap(int64_t cap, int v, const std::vector<plan::Plan>& seeds) {
    const int64_t g = batch_.size();
    const int levels = times_.levels();
    const auto& sizes = times_.sizes();
    std::vector<int> kmin(g);
    double total_work = 0;
    int64_t total_tokens = 0;
    for (int64_t i = 0; i < g; ++i) {
      const int64_t k = plan::cp_min(batch_.lengths[i], cap, cfg_.min_cp);
      int lv = 0;
      while (lv + 1 < levels && sizes[lv] < k) ++lv;
      kmin[i] = lv;
      total_work += sizes[lv] * times_(static_cast<int>(i), lv);
      total_tokens += batch_.lengths[i];
    }
    const int64_t m_lo = std::max<int64_t>(1, plan::ceil_div(total_tokens, static_cast<int64_t>(n_) * cap));
    const int64_t m_hi = (g / v) * v;
    std::vector<int64_t> ms;
    for (double f : {1.0, 1.1, 1.25, 1.5, 2.0, 3.0, 4.0}) ms.push_back(static_cast<int64_t>(std::ceil(m_lo * f)));
    for (int64_t f : {1, 2, 4, 8, 16}) ms.push_back(f * opt_.pp);
    for (auto& m : ms) m = std::min(plan::ceil_div(std::max(m, m_lo), v) * v, m_hi);
    std::sort(ms.begin(), ms.end());
    ms.erase(std::unique(ms.begin(), ms.end()), ms.end());

    struct Packed {
      std::unique_ptr<detail::Packing> p;
      double est = kInf;            // ranking: simulated score when simulated, else the 1F1B estimate
      std::optional<Scored> pre;    // the simulated plan before the local search
    };
    std::vector<Packed> packed;
    std::vector<int> level(g);
    // With a simulator every packed count is simulated and the finalists are the best by it.
    const bool simulated = this->simulated();
    // Counts that fail to pack are skipped; beyond the list counts grow until one packs (bounded:
    // with m = G every sample gets a micro-batch of its own).
    int64_t extra = 0;
    for (size_t c = 0; c < ms.size() || (packed.empty() && extra < 64); ++c) {
      int64_t m;
      if (c < ms.size()) {
        m = ms[c];
      } else {
        if (ms.back() >= m_hi) break;
        m = std::min(plan::ceil_div(ms.back() * (2 + extra), v) * v, m_hi);
        ms.push_back(m);
        ++extra;
      }
      // With the caller's simulator, CP sizes for 1x, 2x and 4x the balanced target and both
      // placements are candidates (the simulations dominate the cost then). Measured with
      // `dcpbench run` (published settings): 2x and 4x lowered the simulated step of dcp by 0.5%
      // (llama13b-github), 1-2% (llama13b-commoncrawl) and 3-5% (code-go-llama3-8b): the
      // marginal sample time is additive and misses the GEMM efficiency of small chunks. With the
      // built-in estimate only 1x and the first-fit placement (faster, and better under that
      // estimate: see dcp_search.cpp).
      for (const double target_x : {1.0, 2.0, 4.0}) {
      if (target_x > 1.0 && !simulated) break;
      choose_levels(kmin, total_work * target_x, static_cast<int>(m), level);
      for (const bool spread : {false, true}) {
        if (spread && !simulated) break;
        auto p = std::make_unique<detail::Packing>(batch_, times_, n_, static_cast<int>(m), cap, kmin);
        if (!p->build(level, spread)) continue;
        const double est = detail::pipeline_estimate(p->surrogate(), static_cast<int>(m), opt_.pp);
        Packed c{std::move(p), est, {}};
        if (simulated) {
          c.pre = score(pipeline_ordered(c.p->to_plan(cfg_)));
          c.est = c.pre->rank();
        }
        packed.push_back(std::move(c));
      }
      }
    }
    // Finalists: the best counts by the pipeline estimate, and the seeds (each as its own
    // micro-batch count); the budget is shared among them.
    std::stable_sort(packed.begin(), packed.end(), [](const Packed& a, const Packed& b) { return a.est < b.est; });
    const size_t finalists = simulated ? kFinalistsSimulated : kFinalists;
    if (packed.size() > finalists) packed.resize(finalists);
    for (const plan::Plan& seed : seeds) {
      auto p = std::make_unique<detail::Packing>(batch_, times_, n_, static_cast<int>(seed.microbatches.size()), cap, kmin);
      if (p->load(seed)) packed.push_back(Packed{std::move(p), kInf, std::nullopt});
    }
    Scored best;
    const int64_t budget = dcp_budget_units(opt_.time_budget_ms, simulated);
    for (auto& fin : packed) {
      auto& p = *fin.p;
      // The local search lowers the surrogate, not necessarily the simulated step: the plan
      // before it stays a candidate.
      if (fin.pre && fin.pre->better_than(best)) best = std::move(*fin.pre);
      p.improve(budget / static_cast<int64_t>(packed.size()));
      Scored s = score(pipeline_ordered(p.to_plan(cfg_)));
      if (simulated && opt_.pp > 1) reorder(s);
      if (s.better_than(best)) best = std::move(s);
    }
    return best;
  }

  // CP size per sample by marginal step time: its share of the balanced per-micro-batch time
  // (k t(L, k) / (N m)) plus how far it alone would exceed that target (it lower-bounds its
  // micro-batch's critical path). Levels are tried upwards from kmin until one is under target.
  void choose_levels(const std::vector<int>& kmin, double total_work, int m, std::vector<int>& level) const {
    const int levels = times_.levels();
    const auto& sizes = times_.sizes();
    const double slots = static_cast<double>(n_) * m;
    const double target = total_work / slots;
    for (size_t i = 0; i < kmin.size(); ++i) {
      const int s = static_cast<int>(i);
      int best = kmin[i];
      double best_cost = kInf;
      for (int lv = kmin[i]; lv < levels; ++lv) {
        const double t = times_(s, lv);
        const double cost = sizes[lv] * t / slots + std::max(0.0, t - target);
        if (cost < best_cost) {
          best_cost = cost;
          best = lv;
        }
        if (t <= target) break;
      }
      level[i] = best;
    }
  }

  // Packed counts that go on to the local search (and, with a simulator, the nine orders).
  // With a simulator 4 rather than 2 since 2026-11-27: measured with `dcpbench run` (published
  // settings, 25 ms budget), email-spamassassin-llama3-8b 2.101 -> 2.079 s and
  // prose-pydoc-llama3-8b 6.448 -> 6.412 s mean step, the other scenarios within 0.03%; each
  // finalist costs 10 simulations (its plan and the nine orders). Without one (the scale targets
  // of bench_sched) 2.
  static constexpr size_t kFinalists = 2;
  static constexpr size_t kFinalistsSimulated = 4;
  const plan::Batch& batch_;
  const plan::PlanConfig& cfg_;
  const plan::PlannerOptions& opt_;
  const int n_;
  detail::SampleTimes times_;
  int64_t last_cap_ = std::numeric_limits<int64_t>::max();
};

}  // namespace

plan::Plan DcpPlanner::plan(const plan::Batch& batch, const plan::PlanConfig& config) const {
  DCP_NVTX_RANGE();
  plan::check_config(batch, config);
  plan::check_fits(batch, config);
  return Solver(batch, config, options_).solve();
}

}  // namespace dcp::sched

