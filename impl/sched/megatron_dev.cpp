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
// the index) make identical decisions: sizes cp_min, 2 cp_min, ..., N, and fill to 2s. They
// differ for non-power-of-two N: d48bd6be0a walks powers of two up to N (e.g. 4 in N=6, a group
// that does not exist, §7j) and fills to min(2s, N); the later source (stored dev,
// get_valid_dynamic_context_parallel_group_sizes) walks only the sizes that exist, the powers of
// two dividing N plus N itself, e.g. [1, 2, 6] for N=6, rounds cp_min up to such a size, and also
// skips a fill that would push groups past rank N-1 (§7b-DEV, IndexError in d48bd6be0a). Those
// sizes are exactly plan/geometry.h's, so this port follows the later source: for power-of-two N
// it is d48bd6be0a exactly, and for other N it is Megatron's own fix of §7b/§7j.
// Any call whose micro-batch is still invalid (e.g. a misaligned block, §2.6) is replaced by
// fill_with_full_dpxcp_group on that call's input.
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

struct Context {
  int n = 1;
  int64_t m = 1;
  int min_cp = 1;
  const std::vector<int64_t>* lengths = nullptr;
  std::vector<int> sizes;     // enabled group sizes, ascending (plan::group_sizes)
  std::vector<int> need_idx;  // [G] index into sizes of cp_min(L) by sample id
};

Context make_context(const plan::Batch& batch, const plan::PlanConfig& config) {
  Context ctx;
  ctx.n = config.pool();
  ctx.m = config.max_seqlen_per_rank;
  ctx.min_cp = config.min_cp;
  ctx.lengths = &batch.lengths;
  ctx.sizes = plan::group_sizes(ctx.n, ctx.min_cp);
  ctx.need_idx.resize(batch.lengths.size());
  for (size_t i = 0; i < batch.lengths.size(); ++i) {
    const int64_t k = megatron::cp_min_float(batch.lengths[i], ctx.m, ctx.min_cp);
    // Smallest existing size >= k; the whole pool if none (L <= N*M is checked up front).
    const auto it = std::lower_bound(ctx.sizes.begin(), ctx.sizes.end(), k);
    ctx.need_idx[i] = it == ctx.sizes.end() ? static_cast<int>(ctx.sizes.size()) - 1
                                            : static_cast<int>(it - ctx.sizes.begin());
  }
  return ctx;
}

struct Grp {
  int first = 0;
  int size_idx = 0;
  double exec = 0.0;
  double pack = 0.0;
  std::vector<int> ids;
};

bool sorted_desc(const std::vector<SeqItem>& v) {
  return std::is_sorted(v.begin(), v.end(), [](const SeqItem& a, const SeqItem& b) { return a.len > b.len; });
}

CallResult next_group(const std::vector<SeqItem>& input, const Context& ctx) {
  const int n = ctx.n;
  const double m = static_cast<double>(ctx.m);
  const int num_sizes = static_cast<int>(ctx.sizes.size());
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

  CallResult out;
  {
    const SeqItem& s = input[0];
    const int si = ctx.need_idx[s.id];
    const int k = ctx.sizes[si];
    groups.push_back(Grp{0, si, megatron::workload(s.len, k), static_cast<double>(s.len) / k, {s.id}});
    of_size[si].push_back(0);
    refresh(si);
  }
  int next_free = ctx.sizes[groups[0].size_idx];
  double gmax = groups[0].exec;

  for (size_t idx = 1; idx < input.size(); ++idx) {
    const SeqItem& s = input[idx];
    bool found = false;
    double best_pm = 0.0;
    int best_si = -1;
    int best_g = -1;  // -1: a new group
    for (int si = ctx.need_idx[s.id]; si < num_sizes; ++si) {
      const int k = ctx.sizes[si];
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
    const int k = ctx.sizes[best_si];
    const double c = megatron::workload(s.len, k);
    const double per_rank_len = static_cast<double>(s.len) / static_cast<double>(k);
    if (best_g >= 0) {
      Grp& grp = groups[best_g];
      grp.pack += per_rank_len;
      grp.exec += c;
      grp.ids.push_back(s.id);
      gmax = std::max(gmax, grp.exec);
    } else {
      groups.push_back(Grp{next_free, best_si, c, per_rank_len, {s.id}});
      of_size[best_si].push_back(static_cast<int>(groups.size()) - 1);
      next_free += k;
      gmax = std::max(gmax, c);
    }
    refresh(best_si);
  }

  // fill_empty_gpus_once until no rank is empty; fill_with_full_dpxcp_group when none applies.
  while (next_free < n) {
    int s_idx = num_sizes;
    for (const Grp& g : groups) s_idx = std::min(s_idx, g.size_idx);
    if (s_idx + 1 >= num_sizes) return megatron::fill_with_full_dpxcp_group(input, n, ctx.m);
    const int s = ctx.sizes[s_idx];
    const int need_more = ctx.sizes[s_idx + 1] - s;
    bool grown = false;
    for (size_t gi = 0; gi < groups.size() && !grown; ++gi) {
      if (groups[gi].size_idx != s_idx) continue;
      const int end = groups[gi].first + s - 1;
      const int first_empty = next_free;
      if (end + 1 > first_empty || end + need_more >= n) continue;
      const int pushed = first_empty - 1 - end;
      if (end + need_more + pushed >= n) continue;
      groups[gi].size_idx = s_idx + 1;
      for (Grp& other : groups) {
        if (other.first > end) other.first += need_more;
      }
      next_free += need_more;
      grown = true;
    }
    if (!grown) return megatron::fill_with_full_dpxcp_group(input, n, ctx.m);
  }
  for (Grp& g : groups) out.groups.push_back(plan::Group{g.first, ctx.sizes[g.size_idx], std::move(g.ids)});
  if (!megatron::microbatch_valid(out.groups, n, ctx.min_cp, ctx.m, *ctx.lengths))
    return megatron::fill_with_full_dpxcp_group(input, n, ctx.m);
  return out;
}

void check_inputs(const plan::Batch& batch, const plan::PlanConfig& config) {
  plan::check_config(batch, config);
  plan::check_fits(batch, config);
  DCP_REQUIRE(batch.size() < (int64_t{1} << 31), "batch of ", batch.size(), " samples is too large");
  for (int64_t i = 0; i < batch.size(); ++i)
    DCP_REQUIRE(batch.lengths[i] < (int64_t{1} << 31), "sample ", i, " has length ", batch.lengths[i],
                " (Megatron keeps lengths in int32)");
}

}  // namespace

CallResult megatron_dev_next_group(const std::vector<SeqItem>& input, const plan::PlanConfig& config,
                                   const plan::Batch& batch) {
  DCP_NVTX_RANGE();
  check_inputs(batch, config);
  if (input.empty()) return CallResult{};
  std::vector<SeqItem> sorted = input;
  std::stable_sort(sorted.begin(), sorted.end(), [](const SeqItem& a, const SeqItem& b) { return a.len > b.len; });
  return next_group(sorted, make_context(batch, config));
}

plan::Plan megatron_dev_plan(const plan::Batch& batch, const plan::PlanConfig& config) {
  DCP_NVTX_RANGE();
  check_inputs(batch, config);
  const Context ctx = make_context(batch, config);
  std::vector<SeqItem> remaining = megatron::sorted_desc(batch);
  std::vector<std::vector<plan::Group>> microbatches;
  // Every call places its first sample, so G calls bound the loop.
  for (int64_t call = 0; !remaining.empty(); ++call) {
    DCP_CHECK(call <= batch.size(), "scheduler made no progress");
    if (!sorted_desc(remaining)) {
      std::stable_sort(remaining.begin(), remaining.end(),
                       [](const SeqItem& a, const SeqItem& b) { return a.len > b.len; });
    }
    CallResult r = next_group(remaining, ctx);
    DCP_CHECK(r.leftovers.size() < remaining.size(), "call placed nothing");
    microbatches.push_back(std::move(r.groups));
    remaining = std::move(r.leftovers);
  }
  return megatron::assemble_plan(std::move(microbatches), "megatron-dev", batch, config);
}

}  // namespace dcp::sched
