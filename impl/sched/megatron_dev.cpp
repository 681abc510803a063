// megatron-dev: see megatron_dev.h. Decisions reproduced from next_hdp_group_packing_aware:
//
//   sort      : stable, descending length (re-sorted every call; the leftovers of a call are
//               already in that order, so the sort is skipped when the input is sorted).
//   cap       : float(tall) * float(M) * (1.0 + 0.05), tall = the call's longest sample.
//   first     : the tallest sample opens group 0 on ranks [0, cp_min).
//   per sample: for each group size k >= cp_min(L) ascending: every existing group of size k in
//               creation order with pack + L/k <= M, then a new group on the k lowest free ranks
//               if there are k free ranks; projected max pm = the max over all ranks after adding
//               L^2/k to the members; take a candidate if pm <= cap and pm < best (strict: ties keep
//               the earlier candidate: smaller k, existing before new, lower group id). No
//               candidate -> leftover.
//   fill      : while a rank is empty: grow the first group of the smallest size s to the next
//               size, shifting the later groups right, skipping a group that would not fit; none
//               fits -> fill_with_full_dpxcp_group on the call's sorted input.
//
// Fast path (identical decisions, proven by the slow literal port in tests/): every member of a
// group has the same exec (same float additions from 0.0) and free ranks have exec 0.0, so
// pm = max(global max, exec_g + L^2/k) exactly (the max of the others is either the global max or,
// when g holds it alone, below exec_g <= exec_g + c). Since pm >= global max for every candidate,
// the scan stops at the first candidate with pm == global max. Per size k the minimum pack and
// the minimum exec over its groups skip whole sizes that cannot take the sample (float addition is
// monotone, so min_pack + L/k > M implies every group fails, likewise for the cap). Groups take the
// lowest free ranks, so occupied ranks are a prefix and creation order is rank order.
//
// Versions and non-power-of-two pools. For power-of-two N the stored sources of
// next_hdp_group_packing_aware (d48bd6be0a per the reference doc, and the later dev sources in
// the search index) make identical decisions: sizes cp_min, 2 cp_min, ..., N, and fill to 2s. They
// differ for non-power-of-two N:
//   legacy (d48bd6be0a, the reference doc's DEV): sizes are the powers of two up to N (e.g. 4 in
//     N=6, a group that does not exist, §7j), cp_min may exceed N (AssertionError), fill grows to
//     min(2s, N) and may push groups past rank N-1 (IndexError, §7b-DEV);
//   later (stored dev source, get_valid_dynamic_context_parallel_group_sizes): sizes are those
//     that exist, the powers of two dividing N plus N itself (e.g. [1, 2, 6] for N=6), exactly
//     plan/geometry.h's; cp_min is rounded up to such a size; fill grows to the next such size and
//     skips a growth that would push groups past rank N-1.
// Each call runs the legacy rules; only when that call would raise or give an invalid
// micro-batch does it run the later rules (Megatron's own fix), and if that is invalid too (e.g. a
// misaligned block, §2.6) fill_with_full_dpxcp_group on the call's input. So wherever Megatron
// d48bd6be0a returns a valid plan the port returns the same plan, and for power-of-two N (where
// the two rule sets agree) every call runs once.
#include "sched/megatron_dev.h"

#include "core/error.h"
#include "core/nvtx.h"
#include "plan/geometry.h"
#include "plan/planner.h"

#include <algorithm>
#include <limits>

namespace dcp::sched {

using megatron::CallResult;
using megatron::SeqItem;

namespace {

// The group sizes one rule set walks and where each sample starts in them.
struct SizeTable {
  std::vector<int> sizes;     // candidate group sizes, ascending
  std::vector<int> need_idx;  // [G] index into sizes of cp_min(L) by sample id; -1: none fits
  bool legacy = false;        // legacy fill: grow to min(2s, N), push past N raises
};

struct Context {
  int n = 1;
  int64_t m = 1;
  int min_cp = 1;
  const std::vector<int64_t>* lengths = nullptr;
  const plan::PlanConfig* config = nullptr;
  const plan::Batch* batch = nullptr;
  SizeTable legacy;  // d48bd6be0a: powers of two min_cp..N, cp_min unrounded
  SizeTable later;   // later dev source: plan::group_sizes, cp_min rounded up to one of them
  bool same_rules = true;  // power-of-two N: the two tables are identical
};

Context make_context(const plan::Batch& batch, const plan::PlanConfig& config) {
  Context ctx;
  ctx.n = config.pool();
  ctx.m = config.max_seqlen_per_rank;
  ctx.min_cp = config.min_cp;
  ctx.lengths = &batch.lengths;
  ctx.config = &config;
  ctx.batch = &batch;
  ctx.later.sizes = plan::group_sizes(ctx.n, ctx.min_cp);
  for (int64_t k = ctx.min_cp; k <= ctx.n; k *= 2) ctx.legacy.sizes.push_back(static_cast<int>(k));
  ctx.legacy.legacy = true;
  ctx.same_rules = ctx.legacy.sizes == ctx.later.sizes;
  ctx.later.need_idx.resize(batch.lengths.size());
  ctx.legacy.need_idx.resize(batch.lengths.size());
  for (size_t i = 0; i < batch.lengths.size(); ++i) {
    const int64_t k = megatron::cp_min_float(batch.lengths[i], ctx.m, ctx.min_cp);
    // Later rules: smallest existing size >= k; the whole pool if none (L <= N*M is checked).
    const auto it = std::lower_bound(ctx.later.sizes.begin(), ctx.later.sizes.end(), k);
    ctx.later.need_idx[i] = it == ctx.later.sizes.end() ? static_cast<int>(ctx.later.sizes.size()) - 1
                                                        : static_cast<int>(it - ctx.later.sizes.begin());
    // Legacy rules: k itself, a power of two >= min_cp, or nothing when k > N.
    const auto jt = std::lower_bound(ctx.legacy.sizes.begin(), ctx.legacy.sizes.end(), k);
    ctx.legacy.need_idx[i] = jt == ctx.legacy.sizes.end() ? -1 : static_cast<int>(jt - ctx.legacy.sizes.begin());
  }
  return ctx;
}

struct Grp {
  int first = 0;
  int size = 0;
  int size_idx = 0;  // index into the table's sizes when created (candidate lists)
  double exec = 0.0;
  double pack = 0.0;
  std::vector<int> ids;
};

// One call under one rule set. Returns false where Megatron under those rules would raise; the
// micro-batch may still be invalid in the pool (checked by the caller).
bool run_call(const std::vector<SeqItem>& input, const Context& ctx, const SizeTable& table, CallResult* result) {
  const int n = ctx.n;
  const double m = static_cast<double>(ctx.m);
  const int num_sizes = static_cast<int>(table.sizes.size());
  const double cap = static_cast<double>(input[0].len) * static_cast<double>(ctx.m) * (1.0 + 0.05);

  std::vector<Grp> groups;
  std::vector<std::vector<int>> of_size(num_sizes);  // group ids by size index, creation order
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> min_pack(num_sizes, inf), min_exec(num_sizes, inf);
  auto refresh = [&](int si) {
    min_pack[si] = inf;
    min_exec[si] = inf;
    for (int g : of_size[si]) {
      min_pack[si] = std::min(min_pack[si], groups[g].pack);
      min_exec[si] = std::min(min_exec[si], groups[g].exec);
    }
  };

  CallResult& out = *result;
  out = CallResult{};
  {
    const SeqItem& s = input[0];
    const int si = table.need_idx[s.id];
    if (si < 0) return false;  // "Sequence length .. requires CP size .., but only N ranks" (legacy)
    const int k = table.sizes[si];
    groups.push_back(Grp{0, k, si, megatron::workload(s.len, k), static_cast<double>(s.len) / k, {s.id}});
    of_size[si].push_back(0);
    refresh(si);
  }
  int next_free = groups[0].size;
  double gmax = groups[0].exec;

  for (size_t idx = 1; idx < input.size(); ++idx) {
    const SeqItem& s = input[idx];
    bool found = false;
    double best_pm = 0.0;
    int best_si = -1;
    int best_g = -1;  // -1: a new group
    const int first_si = table.need_idx[s.id];
    for (int si = first_si < 0 ? num_sizes : first_si; si < num_sizes; ++si) {
      const int k = table.sizes[si];
      const double c = megatron::workload(s.len, k);
      if (c > cap) continue;  // every candidate of this size has pm >= c > cap
      const double per_rank_len = static_cast<double>(s.len) / static_cast<double>(k);
      if (min_pack[si] + per_rank_len <= m && min_exec[si] + c <= cap) {
        for (int g : of_size[si]) {
          const Grp& grp = groups[g];
          if (grp.pack + per_rank_len > m) continue;
          const double pm = std::max(gmax, grp.exec + c);
          if (pm <= cap && (!found || pm < best_pm)) {
            found = true;
            best_pm = pm;
            best_si = si;
            best_g = g;
            if (pm == gmax) break;
          }
        }
      }
      if (found && best_pm == gmax) break;
      if (n - next_free >= k) {
        const double pm = std::max(gmax, c);
        if (pm <= cap && (!found || pm < best_pm)) {
          found = true;
          best_pm = pm;
          best_si = si;
          best_g = -1;
        }
      }
      if (found && best_pm == gmax) break;
    }
    if (!found) {
      out.leftovers.push_back(s);
      continue;
    }
    const int k = table.sizes[best_si];
    const double c = megatron::workload(s.len, k);
    const double per_rank_len = static_cast<double>(s.len) / static_cast<double>(k);
    if (best_g >= 0) {
      Grp& grp = groups[best_g];
      grp.pack += per_rank_len;
      grp.exec += c;
      grp.ids.push_back(s.id);
      gmax = std::max(gmax, grp.exec);
    } else {
      groups.push_back(Grp{next_free, k, best_si, c, per_rank_len, {s.id}});
      of_size[best_si].push_back(static_cast<int>(groups.size()) - 1);
      next_free += k;
      gmax = std::max(gmax, c);
    }
    refresh(best_si);
  }

  // fill_empty_gpus_once until no rank is empty; fill_with_full_dpxcp_group when none applies.
  while (next_free < n) {
    int s = n;
    for (const Grp& g : groups) s = std::min(s, g.size);
    int grown_to = 0;
    if (table.legacy) {
      grown_to = std::min(2 * s, n);
    } else {
      const auto it = std::upper_bound(table.sizes.begin(), table.sizes.end(), s);
      if (it != table.sizes.end()) grown_to = *it;
    }
    bool grown = false;
    if (grown_to > s) {
      const int need_more = grown_to - s;
      for (size_t gi = 0; gi < groups.size() && !grown; ++gi) {
        if (groups[gi].size != s) continue;
        const int end = groups[gi].first + s - 1;
        const int first_empty = next_free;
        if (end + 1 > first_empty || end + need_more >= n) continue;
        const int pushed = first_empty - 1 - end;
        if (end + need_more + pushed >= n) {
          if (table.legacy) return false;  // d48bd6be0a moves them past rank N-1: IndexError (§7b)
          continue;                        // later source: skip this group
        }
        groups[gi].size = grown_to;
        for (Grp& other : groups) {
          if (other.first > end) other.first += need_more;
        }
        next_free += need_more;
        grown = true;
      }
    }
    if (!grown) {
      out = megatron::fill_with_full_dpxcp_group(input, n, ctx.m);
      return true;
    }
  }
  for (Grp& g : groups) out.groups.push_back(plan::Group{g.first, g.size, std::move(g.ids)});
  return true;
}

CallResult next_group(const std::vector<SeqItem>& input, const Context& ctx) {
  CallResult r;
  const auto valid = [&](const CallResult& c) {
    return megatron::microbatch_valid(c.groups, *ctx.config, *ctx.batch);
  };
  if (run_call(input, ctx, ctx.legacy, &r) && valid(r)) return r;
  if (!ctx.same_rules && run_call(input, ctx, ctx.later, &r) && valid(r)) return r;
  return megatron::fill_with_full_dpxcp_group(input, ctx.n, ctx.m);
}

CallResult next_group_erased(const std::vector<SeqItem>& input, const void* ctx) {
  return next_group(input, *static_cast<const Context*>(ctx));
}

}  // namespace

CallResult megatron_dev_next_group(const std::vector<SeqItem>& input, const plan::PlanConfig& config,
                                   const plan::Batch& batch) {
  DCP_NVTX_RANGE();
  megatron::check_inputs(batch, config);
  if (input.empty()) return CallResult{};
  std::vector<SeqItem> sorted = input;
  std::stable_sort(sorted.begin(), sorted.end(), [](const SeqItem& a, const SeqItem& b) { return a.len > b.len; });
  return next_group(sorted, make_context(batch, config));
}

plan::Plan megatron_dev_plan(const plan::Batch& batch, const plan::PlanConfig& config) {
  DCP_NVTX_RANGE();
  megatron::check_inputs(batch, config);
  const Context ctx = make_context(batch, config);
  return megatron::run_scheduler(batch, config, "megatron-dev", &next_group_erased, &ctx, /*resort=*/true);
}

}  // namespace dcp::sched
