// See nvidia_prototype.h for what is ported and every deviation.
#include "sched/nvidia_prototype.h"

#include "core/error.h"
#include "core/nvtx.h"
#include "plan/cp_rule.h"
#include "plan/geometry.h"
#include "plan/validate.h"
#include "sched/megatron_dev.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <span>

namespace dcp::sched {

namespace {

std::atomic<int64_t> g_fallbacks{0};
std::atomic<int64_t> g_upstream_raises{0};

// 1488-1498: forward-only TFLOP of causal attention and of one GEMM.
double attention_tflops(double s, double h, double scale) { return 2.0 * 2.0 * s * s * h / 1e12 * scale; }
double linear_tflops(double s, double h1, double h2) { return 2.0 * s * h1 * h2 / 1e12; }

PrototypeModel model_of(const plan::PlannerOptions& o) {
  PrototypeModel m;  // Llama-13B as run_hybrid_cp.sh sets it (deviation 1)
  if (!o.model || o.model->hidden <= 0) return m;
  m.hidden = o.model->hidden;
  m.ffn = o.model->ffn;
  // __post_init__ sets num_query_groups = heads when --group-query-attention is not given.
  if (o.model->kv_heads > 0 || o.model->heads > 0) m.num_query_groups = o.model->kv_heads > 0 ? o.model->kv_heads : o.model->heads;
  m.gated = o.model->gated;
  m.recompute_full = o.model->recompute_full;
  return m;
}

}  // namespace

// Python's built-in sum() of floats from CPython 3.12 on (Neumaier's compensated summation,
// bltinmodule.c builtin_sum_impl; the compensation is added once at the end), the version in the
// NGC PyTorch containers the prototype ran in (Ubuntu 24.04). Before 3.12 sum() added left to
// right; both round differently from a plain left-to-right double sum in the last place, which
// decides near-ties of the bucket rules on batches with many equal lengths.
double python_sum(std::span<const double> xs) {
  double s = 0.0, c = 0.0;
  for (double x : xs) {
    const double t = s + x;
    c += std::fabs(s) >= std::fabs(x) ? (s - t) + x : (x - t) + s;
    s = t;
  }
  return c != 0.0 && std::isfinite(c) ? s + c : s;
}

namespace {

struct Bucket {
  std::vector<int> samples;  // sample ids; samples[0] is the except sample of an except bucket
  int cp = 1;                // slots (x min_cp ranks)
  int first_slot = -1;       // except buckets: their interval; normal: set when placed
  double fwd = 0;            // per slot (an except bucket's total is divided by cp)
  int64_t tokens = 0;        // all tokens of the bucket's samples
  double target_flops = 0;
  double target_length = 0;
};

class PrototypeSolver {
 public:
  PrototypeSolver(const plan::Batch& batch, const plan::PlanConfig& cfg, const plan::PlannerOptions& opt)
      : batch_(batch), cfg_(cfg), opt_(opt), pp_(std::max(1, opt.pp)) {
    min_cp_ = cfg.min_cp;
    slots_ = cfg.pool() / min_cp_;
    const PrototypeModel model = model_of(opt);
    for (int64_t L : batch.lengths) {
      const PrototypeFlops f = prototype_tflops(L, model);
      fwd_.push_back(f.fwd);
      bwd_.push_back(f.bwd);
    }
    // The prototype sums the forward FLOPs over the samples sorted by length, longest first
    // (stable: ties in batch order; sample_id_seqlens, 1809), with Python's sum() (solver,
    // 2202-2203): the except threshold's sum.
    by_length_.resize(fwd_.size());
    std::iota(by_length_.begin(), by_length_.end(), 0);
    std::stable_sort(by_length_.begin(), by_length_.end(),
                     [&](int a, int b) { return batch.lengths[a] > batch.lengths[b]; });
    sum_fwd_ = python_sum(gather(by_length_));
    // Slot counts c allowed as group sizes c * min_cp on this pool (deviation 4): powers of two,
    // and the whole pool, which the prototype's cap "buckets left" can reach on a pool that is not
    // a power of two (c = 3 on 3 slots) and plan/geometry allows.
    for (int size : plan::group_sizes(cfg.pool(), min_cp_))
      if (size % min_cp_ == 0 && (plan::is_pow2(size / min_cp_) || size == cfg.pool()) && size / min_cp_ <= slots_)
        slot_sizes_.push_back(size / min_cp_);
    std::sort(slot_sizes_.begin(), slot_sizes_.end());
  }

  // The plan for m micro-batches per slot x pp, or nothing when this m cannot hold the batch.
  // `raises` (if given) is set when the prototype itself raises on this m (deviation 11): its
  // first pass gives an except sample no bucket, the except samples take every bucket while
  // normal samples remain, or a normal bucket stays empty. Only while the port has followed the
  // prototype's decisions so far (no cap of deviations 3 or 4 changed one, and no except sample
  // split wider than run_hybrid_cp.sh's MAX_CP, deviation 8): after such a change the prototype's
  // own path is not known.
  std::optional<plan::Plan> plan_for(int m, bool* raises = nullptr) const {
    bool same_path = true;  // no deviation has changed a decision yet
    const auto upstream_raises = [&] {
      if (raises && same_path) *raises = true;
      return std::nullopt;
    };
    const int64_t g = batch_.size();
    const int per_slot = m * pp_;
    const int64_t total_buckets = static_cast<int64_t>(per_slot) * slots_;
    if (total_buckets > g) return std::nullopt;  // next_hdp_group: "num_buckets_sum > len(all_lengths)"
    if (cfg_.vpp_group && per_slot % *cfg_.vpp_group != 0) return std::nullopt;  // deviation 6
    const int64_t M = cfg_.max_seqlen_per_rank;
    // solver: except = forward FLOPs > 1.3 x total / (m * DP * PP), DP = the pool (= slots * min_cp).
    const double threshold = 1.3 * sum_fwd_ / (static_cast<double>(m) * cfg_.pool() * pp_);
    std::vector<int> except, normal;  // in the prototype's order: longest first, ties in batch order
    for (int i : by_length_) (fwd_[i] > threshold ? except : normal).push_back(i);
    // Bucket target as split_sample recomputes it (1940-1948): sum(except) + sum(normal), over
    // total_num = slots x ratio(m), times ratio(m) / m / PP, in that order (the ratio cancels
    // algebraically, not in rounding).
    const double r = ratio(m);
    const double target = (python_sum(gather(except)) + python_sum(gather(normal))) /
                          (static_cast<double>(slots_) * r) * r / static_cast<double>(m) / static_cast<double>(pp_);

    // split_sample, first pass: bucket counts per except sample.
    int64_t buckets_left = total_buckets;
    std::vector<int> counts(except.size());
    for (size_t e = 0; e < except.size(); ++e) {
      const int i = except[e];
      const int64_t raw = static_cast<int64_t>(std::ceil(fwd_[i] / target));
      const int64_t remain_other = static_cast<int64_t>(except.size()) - 1 - static_cast<int64_t>(e);
      const int64_t pow2 = prototype_nearest_pow2(raw);
      int64_t c = std::min<int64_t>({pow2, slots_, buckets_left - remain_other});
      // c <= 0: the prototype divides by it (split_sample, 1998) or fails its assert (2020).
      if (c <= 0) return upstream_raises();
      // Deviation 8: our max split is the whole pool; run_hybrid_cp.sh:37 sets MAX_CP=8. Where
      // that cap would have given fewer buckets, the prototype as NVIDIA ran it takes another path.
      const int64_t script_split = std::max<int64_t>(1, 8 / min_cp_);
      if (std::min<int64_t>(pow2, slots_) > script_split) same_path = false;
      const int64_t upstream_c = c;
      const int64_t need = plan::cp_min(batch_.lengths[i], M, min_cp_) / min_cp_;  // deviation 3
      c = std::max(c, need);
      int ci = fit_slot_size(c);  // deviation 4
      // No allowed size in [need, c] (a pool that is not a power of two: 6 ranks allow 1, 2 and
      // 6): the smallest one above that holds the sample, as the whole pool can (helper-11's
      // review: rounding down made the m infeasible and handed the batch to megatron-dev).
      if (ci < need) ci = smallest_slot_size_at_least(need);
      if (ci < need || ci < 1) return std::nullopt;
      if (ci != upstream_c) same_path = false;
      counts[e] = ci;
      buckets_left -= ci;
      if (buckets_left < 0) return std::nullopt;
    }
    const bool assign_all = buckets_left == 0;
    // Buckets per slot position; -1 = free. Except buckets first (deviation 5 keeps them aligned).
    std::vector<Bucket> buckets;
    std::vector<std::vector<int>> at(static_cast<size_t>(slots_), std::vector<int>(static_cast<size_t>(per_slot), -1));
    std::vector<int> free_count(static_cast<size_t>(slots_), per_slot);
    std::vector<int> remaining = normal;  // in descending FLOPs order
    const double total_num = static_cast<double>(slots_);  // sum(combination * ratio) / ratio: see header
    for (size_t e = 0; e < except.size(); ++e) {
      const int i = except[e];
      const int c = counts[e];
      // The aligned interval whose smallest free count is largest (first such, strict >).
      int best_left = -1, best_value = -1;
      for (int left = 0; left + c <= slots_; left += c) {
        const int v = *std::min_element(free_count.begin() + left, free_count.begin() + left + c);
        if (v > best_value) best_value = v, best_left = left;
      }
      if (best_left < 0 || best_value <= 0) return std::nullopt;  // deviation 9
      // The first position free on every slot of the interval.
      int pos = -1;
      for (int k = 0; k < per_slot && pos < 0; ++k) {
        bool ok = true;
        for (int s = best_left; s < best_left + c && ok; ++s) ok = at[s][k] < 0;
        if (ok) pos = k;
      }
      if (pos < 0) return std::nullopt;
      // fill_bucket_with_samples: fillers of the except bucket.
      Bucket b;
      b.samples.push_back(i);
      b.cp = c;
      b.first_slot = best_left;
      double room = c * target - fwd_[i];
      int64_t tokens = batch_.lengths[i];
      std::vector<double> fill_fwd;  // summed as the prototype does (Python's sum, 2023)
      const int64_t cap = M * c * min_cp_;
      std::vector<int> kept;
      for (int s : remaining) {
        const bool extra = assign_all || (total_num * ratio(m) < static_cast<double>(remaining.size() - (b.samples.size() - 1)) &&
                                          tokens < M * static_cast<int64_t>(c));
        const bool joins = fwd_[s] < room * 1.05 && extra;
        if (joins && tokens + batch_.lengths[s] <= cap) {
          room -= fwd_[s];
          tokens += batch_.lengths[s];
          fill_fwd.push_back(fwd_[s]);
          b.samples.push_back(s);
        } else {
          if (joins) same_path = false;  // deviation 3's cap kept it out
          kept.push_back(s);
        }
      }
      remaining = std::move(kept);
      b.tokens = tokens;
      b.fwd = (fwd_[i] + python_sum(fill_fwd)) / c;
      const int id = static_cast<int>(buckets.size());
      buckets.push_back(std::move(b));
      for (int s = best_left; s < best_left + c; ++s) {
        at[s][pos] = id;
        --free_count[s];
      }
    }
    // Normal buckets (create_buckets + assign_samples_to_buckets).
    const int64_t n_normal = std::accumulate(free_count.begin(), free_count.end(), int64_t{0});
    DCP_CHECK(n_normal == buckets_left, "nvidia-prototype: ", n_normal, " free buckets, expected ", buckets_left);
    // The prototype asserts that no normal sample is left when no normal bucket is (2225-2232).
    if (n_normal == 0 && !remaining.empty()) return upstream_raises();
    int64_t normal_tokens = 0;
    for (int s : remaining) normal_tokens += batch_.lengths[s];
    const double target_length = n_normal > 0 ? static_cast<double>(normal_tokens) / static_cast<double>(n_normal) : 0.0;
    const int first_normal = static_cast<int>(buckets.size());
    for (int64_t k = 0; k < n_normal; ++k) {
      Bucket b;
      b.target_flops = target;
      b.target_length = target_length;
      buckets.push_back(std::move(b));
    }
    const int64_t cap1 = M * min_cp_;
    std::vector<int> left_over;
    for (int s : remaining) {  // FW_FLOPS rule: minimise new_fwd^2 / target within the length cap
      int best = -1;
      double best_score = std::numeric_limits<double>::infinity();
      for (int id = first_normal; id < static_cast<int>(buckets.size()); ++id) {
        const Bucket& b = buckets[id];
        if (static_cast<double>(b.tokens + batch_.lengths[s]) > b.target_length) continue;
        if (b.tokens + batch_.lengths[s] > cap1) {  // deviation 3
          same_path = false;
          continue;
        }
        const double nf = b.fwd + fwd_[s];
        const double score = nf * (nf / b.target_flops);
        if (score < best_score) best_score = score, best = id;
      }
      if (best < 0) {
        left_over.push_back(s);
        continue;
      }
      add_normal(buckets[best], s);
    }
    // Leftovers by the LENGTH rule: longest first, buckets in ascending tokens (as sorted once).
    std::stable_sort(left_over.begin(), left_over.end(), [&](int a, int b) { return batch_.lengths[a] > batch_.lengths[b]; });
    std::vector<int> order(static_cast<size_t>(n_normal));
    std::iota(order.begin(), order.end(), first_normal);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return buckets[a].tokens < buckets[b].tokens; });
    for (int s : left_over) {
      int best = -1;
      double best_score = std::numeric_limits<double>::infinity();
      for (int id : order) {
        const Bucket& b = buckets[id];
        if (b.tokens + batch_.lengths[s] > cap1) {  // deviation 3
          same_path = false;
          continue;
        }
        const double d = static_cast<double>(b.tokens + batch_.lengths[s]) - b.target_length;
        const double score = d * d / (b.target_length * b.target_length);
        if (score < best_score) best_score = score, best = id;
      }
      if (best < 0) return std::nullopt;
      add_normal(buckets[best], s);
    }
    for (int id = first_normal; id < static_cast<int>(buckets.size()); ++id)
      // "found empty bucket, skip": meant to skip the m, but it appends no time for it, so max()
      // of the empty list raises (2311-2313, 2383).
      if (buckets[id].samples.empty()) return upstream_raises();
    // greedy_assign_bucket_to_dp: normal buckets in ascending forward FLOPs, each to the slot with
    // the least forward FLOPs that has a free position (first such), at its first free position.
    std::vector<double> slot_fwd(static_cast<size_t>(slots_), 0.0);
    for (int id = 0; id < first_normal; ++id)
      for (int s = buckets[id].first_slot; s < buckets[id].first_slot + buckets[id].cp; ++s) slot_fwd[s] += buckets[id].fwd;
    std::vector<int> normal_order(static_cast<size_t>(n_normal));
    std::iota(normal_order.begin(), normal_order.end(), first_normal);
    std::stable_sort(normal_order.begin(), normal_order.end(), [&](int a, int b) { return buckets[a].fwd < buckets[b].fwd; });
    for (int id : normal_order) {
      int best = -1;
      for (int s = 0; s < slots_; ++s)
        if (free_count[s] > 0 && (best < 0 || slot_fwd[s] < slot_fwd[best])) best = s;
      DCP_CHECK(best >= 0, "nvidia-prototype: no slot with room for a normal bucket");
      const int pos = static_cast<int>(std::find(at[best].begin(), at[best].end(), -1) - at[best].begin());
      at[best][pos] = id;
      --free_count[best];
      slot_fwd[best] += buckets[id].fwd;
      buckets[id].first_slot = best;
    }
    // Micro-batch k = position k of every slot.
    plan::Plan p;
    p.planner = "nvidia-prototype";
    p.config = cfg_;
    p.dynamic = true;
    for (int k = 0; k < per_slot; ++k) {
      plan::MicroBatch mb;
      for (int s = 0; s < slots_;) {
        const Bucket& b = buckets[at[s][k]];
        mb.groups.push_back(plan::Group{s * min_cp_, b.cp * min_cp_, b.samples});
        s += b.cp;
      }
      p.microbatches.push_back(std::move(mb));
    }
    return p;
  }

  // Deviation 2: the caller's simulator and memory model, or a 1F1B estimate per slot.
  double score(const plan::Plan& p, bool* fits) const {
    *fits = true;
    if (opt_.estimate) {
      const auto e = opt_.estimate(p);
      *fits = e.fits;
      return e.step_s;
    }
    if (opt_.step_time_s) return opt_.step_time_s(p);
    std::vector<double> sum(static_cast<size_t>(slots_), 0.0), mx(static_cast<size_t>(slots_), 0.0);
    for (const auto& mb : p.microbatches)
      for (const auto& g : mb.groups) {
        double f = 0, b = 0;
        for (int i : g.samples) f += fwd_[i], b += bwd_[i];
        const double t = (f + b) / (g.cp_size / min_cp_);
        for (int s = g.first_rank / min_cp_; s < (g.first_rank + g.cp_size) / min_cp_; ++s) {
          sum[s] += t;
          mx[s] = std::max(mx[s], t);
        }
      }
    double worst = 0;
    for (int s = 0; s < slots_; ++s) worst = std::max(worst, sum[s] + (pp_ - 1) * mx[s]);
    return worst;
  }

 private:
  // compute_ratios (1539-1546) with VPP = 1, for the fill rule's "total_num".
  double ratio(int m) const {
    const double mp = static_cast<double>(m) * pp_;
    return mp * (pp_ + pp_ - 1) / (mp + pp_ - 1);
  }
  int fit_slot_size(int64_t c) const {
    int best = 0;
    for (int s : slot_sizes_)
      if (s <= c) best = s;
    return best;
  }
  // 0 if no allowed size is that large.
  int smallest_slot_size_at_least(int64_t c) const {
    for (int s : slot_sizes_)
      if (s >= c) return s;
    return 0;
  }
  void add_normal(Bucket& b, int s) const {
    b.fwd += fwd_[s];
    b.tokens += batch_.lengths[s];
    b.samples.push_back(s);
  }

  const plan::Batch& batch_;
  const plan::PlanConfig& cfg_;
  const plan::PlannerOptions& opt_;
  int pp_ = 1, min_cp_ = 1, slots_ = 1;
  std::vector<double> gather(const std::vector<int>& ids) const {
    std::vector<double> v;
    v.reserve(ids.size());
    for (int i : ids) v.push_back(fwd_[i]);
    return v;
  }
  std::vector<double> fwd_, bwd_;
  std::vector<int> by_length_;  // samples by length, longest first (stable)
  double sum_fwd_ = 0;
  std::vector<int> slot_sizes_;
};

}  // namespace

PrototypeFlops prototype_tflops(int64_t length, const PrototypeModel& m) {
  const double s = static_cast<double>(length);
  const double gemm = linear_tflops(s, m.hidden, m.hidden);
  const double attn = attention_tflops(s, m.hidden, 0.5);
  DCP_REQUIRE(m.num_query_groups > 0, "nvidia-prototype: num_query_groups ", m.num_query_groups, " is not > 0");
  const double pre = gemm + 2.0 * gemm / m.num_query_groups;
  const double post = gemm;
  const double fc1 = linear_tflops(s, m.hidden, m.gated ? 2.0 * m.ffn : m.ffn);
  const double fc2 = linear_tflops(s, m.ffn, m.hidden);
  PrototypeFlops f;
  f.fwd = pre + attn + post + fc1 + fc2;
  f.bwd = 2.7 * pre + 2.77 * attn + 2.7 * post + 2.7 * (fc1 + fc2);
  if (m.recompute_full) f.bwd += f.fwd;
  f.total = f.fwd + f.bwd;
  return f;
}

int64_t prototype_nearest_pow2(int64_t n) {
  if (n < 1) return 1;
  const int64_t lower = plan::prev_pow2(n);
  const int64_t upper = lower * 2;
  return (n - lower) < (upper - n) ? lower : upper;
}

int64_t nvidia_prototype_fallbacks() { return g_fallbacks.load(); }
int64_t nvidia_prototype_upstream_raises() { return g_upstream_raises.load(); }

plan::Plan nvidia_prototype_plan(const plan::Batch& batch, const plan::PlanConfig& config,
                                 const plan::PlannerOptions& options, int search_space) {
  DCP_NVTX_RANGE();
  plan::check_config(batch, config);
  plan::check_fits(batch, config);
  DCP_REQUIRE(search_space >= 1, "nvidia-prototype: search space ", search_space, " is not >= 1");
  PrototypeSolver solver(batch, config, options);
  std::optional<plan::Plan> best;
  double best_score = std::numeric_limits<double>::infinity();
  bool best_fits = false;
  bool raises = false;  // the prototype raises on some m of its search (deviation 11)
  for (int m = 1; m <= search_space; ++m) {
    std::optional<plan::Plan> p = solver.plan_for(m, &raises);
    if (!p) continue;
    if (plan::find_violation(*p, batch)) continue;  // a cap the port missed: never return it
    bool fits = true;
    const double sc = solver.score(*p, &fits);
    // Fitting plans first (the prototype skips an m above its memory cap), then the smallest time.
    if (!best || (fits && !best_fits) || (fits == best_fits && sc < best_score)) {
      best = std::move(p);
      best_score = sc;
      best_fits = fits;
    }
  }
  if (raises) ++g_upstream_raises;
  const std::string raised =
      raises ? "NVIDIA's prototype raises on this batch (an m of its search runs out of buckets or leaves one empty; "
               "nvidia_prototype.h deviation 11)"
             : "";
  if (!best) {  // deviation 7
    ++g_fallbacks;
    plan::Plan p = megatron_dev_plan(batch, config);
    p.planner = "nvidia-prototype";
    p.note = (raised.empty() ? std::string("no m of the prototype's search holds this batch") : raised) +
             "; megatron-dev's plan used (deviation 7)";
    return p;
  }
  plan::validate(*best, batch, config);
  if (!raised.empty()) best->note = raised + "; planned with the other m";
  return std::move(*best);
}

}  // namespace dcp::sched
