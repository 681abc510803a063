// megatron-pr2000: see megatron_pr2000.h. Decisions reproduced from next_hdp_group (2d6e946bab;
// the stored dev source, where next_hdp_group and dcp_make_buckets_equal live as module-level
// functions, makes the same decisions; the reference doc's pseudo-code matches it):
//
//   buckets   : dcp_make_buckets_equal: k = #distinct cp_min; target = sum(L^2/cp_min) / k; a bucket
//               closes before sample i when cur_work + w > 1.1 * target, or when
//               len - i <= remaining_k - len(buckets) (both sides change on a close: counted twice,
//               kept as is).
//   candidate : first non-empty bucket (index order) whose head has a group of size cp_min
//               (capacity NOT checked) or at least cp_min free ranks; none -> the call ends.
//   placement : enough free ranks -> always a new group on the lowest free ranks (free ranks have
//               exec 0.0 < any group's load); else the group of that size with room
//               (pack + L/k <= M) and the smallest exec, first in creation order on ties; none ->
//               the call ends (the head stays in its bucket).
//   after     : pop the head; drop LEADING empty buckets only; prev_needed is set once (first
//               placement); check_balance once a placed cp_min < prev_needed; then break if
//               buckets remain and max(exec) - min(exec) <= 0.05 * max(exec) (min includes idle
//               ranks at 0.0).
//   fill      : while a rank is empty: the first group of the smallest size s doubles to
//               P = min(2s, N); the groups after it shift right by P - s.
//
// Fast-path facts used (all follow from the code above): groups only ever take the lowest free
// ranks, so occupied ranks are a prefix [0, next_free), groups lie in creation order along the
// ranks, and every member of a group has the same exec (identical float additions from 0.0).
// So a group is one record (first rank, size, exec, pack, ids) and a rank is never scanned.
//
// Leaving Megatron (documented deviations, reference §7); each replaces that call's micro-batch by
// fill_with_full_dpxcp_group on the call's input, leftovers in input order:
//   - fill would write past rank N-1 (IndexError, §7b; only non-power-of-two N);
//   - nothing was placed (the truncated-message assertion, §7d; only when a sample needs a
//     power of two > N, i.e. non-power-of-two N, since check_fits rejects L > N*M up front);
//   - the micro-batch has a block that does not exist or is not aligned in the pool (§7j).
#include "sched/megatron_pr2000.h"

#include "core/error.h"
#include "core/nvtx.h"
#include "plan/planner.h"

#include <algorithm>
#include <array>
#include <bit>
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
  const plan::PlanConfig* config = nullptr;
  const plan::Batch* batch = nullptr;
  std::vector<int64_t> need;  // [G] cp_min (float rule) by sample id
  std::vector<double> work;   // [G] L^2 / cp_min by sample id
};

Context make_context(const plan::Batch& batch, const plan::PlanConfig& config) {
  Context ctx;
  ctx.n = config.pool();
  ctx.m = config.max_seqlen_per_rank;
  ctx.min_cp = config.min_cp;
  ctx.lengths = &batch.lengths;
  ctx.config = &config;
  ctx.batch = &batch;
  ctx.need.resize(batch.lengths.size());
  ctx.work.resize(batch.lengths.size());
  for (size_t i = 0; i < batch.lengths.size(); ++i) {
    ctx.need[i] = megatron::cp_min_float(batch.lengths[i], ctx.m, ctx.min_cp);
    ctx.work[i] = megatron::workload(batch.lengths[i], ctx.need[i]);
  }
  return ctx;
}

std::vector<BucketRange> make_buckets(const std::vector<SeqItem>& input, const Context& ctx) {
  uint64_t sizes_seen = 0;  // cp_min values are powers of two: one bit per exponent
  std::vector<double> work(input.size());
  for (size_t i = 0; i < input.size(); ++i) {
    sizes_seen |= uint64_t{1} << std::countr_zero(static_cast<uint64_t>(ctx.need[input[i].id]));
    work[i] = ctx.work[input[i].id];
  }
  const long k = std::popcount(sizes_seen);
  const double target = megatron::python_sum(work) / static_cast<double>(k);
  std::vector<BucketRange> buckets;
  int cur_begin = 0;
  int cur_count = 0;
  double cur_work = 0.0;
  long remaining_k = k;
  const long len = static_cast<long>(input.size());
  for (long i = 0; i < len; ++i) {
    const double w = work[i];
    const double projected = cur_work + w;
    if (cur_count > 0 && (projected > target * 1.1 || len - i <= remaining_k - static_cast<long>(buckets.size()))) {
      buckets.push_back(BucketRange{cur_begin, static_cast<int>(i)});
      cur_begin = static_cast<int>(i);
      cur_count = 0;
      cur_work = 0.0;
      --remaining_k;
    }
    ++cur_count;
    cur_work += w;
  }
  if (cur_count > 0) buckets.push_back(BucketRange{cur_begin, static_cast<int>(len)});
  return buckets;
}

struct Grp {
  int first = 0;
  int size = 0;
  double exec = 0.0;
  double pack = 0.0;
  std::vector<int> ids;
};

CallResult next_group(const std::vector<SeqItem>& input, const Context& ctx) {
  const int n = ctx.n;
  const double m = static_cast<double>(ctx.m);
  std::vector<BucketRange> buckets = make_buckets(input, ctx);  // .begin advances as the head pops
  const int nb = static_cast<int>(buckets.size());
  int first_bucket = 0;
  std::vector<Grp> groups;
  std::array<std::vector<int>, 64> by_size;  // group indices (creation order) by log2(size)
  int next_free = 0;
  double gmax = 0.0;
  int64_t prev_needed = -1;
  bool check_balance = false;

  while (first_bucket < nb) {
    int chosen = -1;
    for (int b = first_bucket; b < nb; ++b) {
      if (buckets[b].begin == buckets[b].end) continue;
      const int64_t need = ctx.need[input[buckets[b].begin].id];
      const bool size_exists = !by_size[std::countr_zero(static_cast<uint64_t>(need))].empty();
      if (size_exists || n - next_free >= need) {
        chosen = b;
        break;
      }
    }
    if (chosen < 0) break;
    const SeqItem item = input[buckets[chosen].begin];
    const int64_t need = ctx.need[item.id];
    const int log_need = std::countr_zero(static_cast<uint64_t>(need));
    if (prev_needed < 0) prev_needed = need;
    const double per_rank_len = static_cast<double>(item.len) / static_cast<double>(need);
    int gi = -1;
    if (n - next_free >= need) {
      groups.push_back(Grp{next_free, static_cast<int>(need), 0.0, 0.0, {}});
      gi = static_cast<int>(groups.size()) - 1;
      by_size[log_need].push_back(gi);
      next_free += static_cast<int>(need);
    } else {
      double best_load = std::numeric_limits<double>::infinity();
      for (int g : by_size[log_need]) {
        if (groups[g].pack + per_rank_len <= m && groups[g].exec < best_load) {
          best_load = groups[g].exec;
          gi = g;
        }
      }
      if (gi < 0) break;  // the head stays in its bucket
    }
    Grp& grp = groups[gi];
    grp.pack += per_rank_len;
    grp.exec += ctx.work[item.id];
    grp.ids.push_back(item.id);
    gmax = std::max(gmax, grp.exec);
    ++buckets[chosen].begin;
    while (first_bucket < nb && buckets[first_bucket].begin == buckets[first_bucket].end) ++first_bucket;
    if (need < prev_needed) check_balance = true;
    if (check_balance && first_bucket < nb) {
      double gmin = 0.0;  // idle ranks count with exec 0.0
      if (next_free == n) {
        gmin = std::numeric_limits<double>::infinity();
        for (const Grp& g : groups) gmin = std::min(gmin, g.exec);
      }
      if (gmax - gmin <= 0.05 * gmax) break;
    }
  }

  CallResult out;
  for (int b = first_bucket; b < nb; ++b) {
    for (int i = buckets[b].begin; i < buckets[b].end; ++i) out.leftovers.push_back(input[i]);
  }
  if (groups.empty()) {
    // Megatron: AssertionError "There should be at least one group existing, cannot redistribute, "
    // (§7d). Only reachable when every head needs more ranks than N (non-power-of-two N).
    return megatron::fill_with_full_dpxcp_group(input, n, ctx.m);
  }
  // fill_empty_gpus until no rank is empty. Each round fills >= 1 rank or leaves Megatron.
  while (next_free < n) {
    int s = std::numeric_limits<int>::max();
    for (const Grp& g : groups) s = std::min(s, g.size);
    const int p = std::min(2 * s, n);
    const int need_more = p - s;
    size_t gi = 0;
    while (groups[gi].size != s) ++gi;
    const int end = groups[gi].first + s - 1;
    const int first_empty = next_free;
    // Megatron writes ranks start..end+need_more and moves ranks end+1..first_empty-1 by need_more:
    // an index >= N raises IndexError (§7b); need_more == 0 would loop forever.
    if (need_more == 0 || end + need_more >= n || first_empty - 1 + need_more >= n)
      return megatron::fill_with_full_dpxcp_group(input, n, ctx.m);
    groups[gi].size = p;
    for (size_t g = gi + 1; g < groups.size(); ++g) groups[g].first += need_more;
    next_free += need_more;
  }
  for (Grp& g : groups) out.groups.push_back(plan::Group{g.first, g.size, std::move(g.ids)});
  if (!megatron::microbatch_valid(out.groups, *ctx.config, *ctx.batch))
    return megatron::fill_with_full_dpxcp_group(input, n, ctx.m);  // §7j
  return out;
}

CallResult next_group_erased(const std::vector<SeqItem>& input, const void* ctx) {
  return next_group(input, *static_cast<const Context*>(ctx));
}

}  // namespace

std::vector<BucketRange> megatron_pr2000_buckets(const std::vector<SeqItem>& input, int64_t max_seqlen_per_rank,
                                                 int min_cp) {
  DCP_NVTX_RANGE();
  plan::Batch batch;
  std::vector<SeqItem> local(input.size());
  for (size_t i = 0; i < input.size(); ++i) {
    batch.lengths.push_back(input[i].len);
    local[i] = SeqItem{static_cast<int>(i), input[i].len};
  }
  plan::PlanConfig config;
  config.max_seqlen_per_rank = max_seqlen_per_rank;
  config.min_cp = min_cp;
  return make_buckets(local, make_context(batch, config));
}

CallResult megatron_pr2000_next_group(const std::vector<SeqItem>& input, const plan::PlanConfig& config,
                                      const plan::Batch& batch) {
  DCP_NVTX_RANGE();
  megatron::check_inputs(batch, config);
  if (input.empty()) return CallResult{};
  return next_group(input, make_context(batch, config));
}

plan::Plan megatron_pr2000_plan(const plan::Batch& batch, const plan::PlanConfig& config) {
  DCP_NVTX_RANGE();
  megatron::check_inputs(batch, config);
  const Context ctx = make_context(batch, config);
  // PR2000 sorts once: the leftovers come back in descending order.
  return megatron::run_scheduler(batch, config, "megatron-pr2000", &next_group_erased, &ctx, /*resort=*/false);
}

}  // namespace dcp::sched
