// See vpp_align.h. Megatron's align_sample_id_groups operates on Python lists of per-rank lists;
// fill_empty uses slice assignment, which may change the list's length, so the port implements
// Python's slice get/set (step 1, None and negative bounds) literally instead of reasoning about
// blocks. Like Python, a micro-batch is a list of references: each rank holds a handle into a pool
// of sample-id lists (consecutive equal lists share one handle, and distinct groups hold disjoint
// ids, so equal handles <=> equal lists); slicing moves handles, never copies lists.
// Every loop is bounded: fill_empty either changes the micro-batch or Megatron would spin
// forever (§7f), and the outer loop stops after at most len(groups) failed attempts.
#include "sched/vpp_align.h"

#include "core/error.h"
#include "plan/validate.h"

#include <algorithm>
#include <limits>

namespace dcp::sched {

namespace {

using Lists = std::vector<std::vector<int>>;
using Handles = std::vector<int>;  // one micro-batch: a handle per rank
using Index = long;                // Python slice bound; kNone is Python's None
constexpr Index kNone = std::numeric_limits<long>::min();

enum class Outcome { kOk, kCrash, kHang };

struct Pool {
  Lists lists{std::vector<int>{}};  // handle 0: an empty list
  int add(std::vector<int> ids) {
    if (ids.empty()) return 0;
    lists.push_back(std::move(ids));
    return static_cast<int>(lists.size()) - 1;
  }
  bool empty(int h) const { return lists[h].empty(); }
  bool contains(int h, int id) const {
    return std::find(lists[h].begin(), lists[h].end(), id) != lists[h].end();
  }
};

Handles intern(Pool& pool, const Lists& mb) {
  Handles out(mb.size());
  std::vector<int> made;  // handles created for this micro-batch
  for (size_t r = 0; r < mb.size(); ++r) {
    if (r > 0 && mb[r] == mb[r - 1]) {
      out[r] = out[r - 1];
      continue;
    }
    int h = -1;
    for (int c : made)
      if (pool.lists[c] == mb[r]) h = c;
    if (h < 0) {
      h = pool.add(mb[r]);
      if (h != 0) made.push_back(h);
    }
    out[r] = h;
  }
  return out;
}

Lists materialize(const Pool& pool, const Handles& hs) {
  Lists out(hs.size());
  for (size_t r = 0; r < hs.size(); ++r) out[r] = pool.lists[hs[r]];
  return out;
}

void normalize(long len, Index start, Index stop, long* a, long* b) {
  auto norm = [len](Index x, long dflt) {
    if (x == kNone) return dflt;
    long v = x;
    if (v < 0) v = std::max(0L, v + len);
    return std::min(v, len);
  };
  *a = norm(start, 0);
  *b = std::max(*a, norm(stop, len));
}

Handles py_get(const Handles& g, Index start, Index stop) {
  long a = 0, b = 0;
  normalize(static_cast<long>(g.size()), start, stop, &a, &b);
  return Handles(g.begin() + a, g.begin() + b);
}

void py_set(Handles& g, Index start, Index stop, const Handles& src) {
  long a = 0, b = 0;
  normalize(static_cast<long>(g.size()), start, stop, &a, &b);
  g.erase(g.begin() + a, g.begin() + b);
  g.insert(g.begin() + a, src.begin(), src.end());
}

// One fill_empty(sample_id_group) call. kHang: neither branch changed the list (Megatron's
// `while G[-1] == []` would then repeat the same call forever).
Outcome fill_empty(const Pool& pool, Handles& g) {
  const Handles before = g;
  const long e = static_cast<long>(std::count_if(g.begin(), g.end(), [&](int h) { return pool.empty(h); }));
  long i = static_cast<long>(g.size()) - 1 - e;
  long prev = 0;
  while (i >= 0) {
    if (pool.empty(g[i])) return Outcome::kCrash;  // sample_id_group[i][0] -> IndexError
    const int sid0 = pool.lists[g[i]][0];
    long c = 0;
    // §7a: bound test first (Megatron tests it second). A rank with the previous rank's handle
    // holds the same list, so it contains sid0 too.
    while (i >= 0 && ((c > 0 && g[i] == g[i + 1]) || pool.contains(g[i], sid0))) {
      ++c;
      --i;
    }
    if (c > prev && prev != 0) {
      const long start = i + 1 + c;  // first rank of the smaller run to the right
      const Index end = (-e + prev < 0) ? -e + prev : kNone;
      py_set(g, start + 2 * prev, end, py_get(g, start + prev, -e));
      py_set(g, start + prev, start + 2 * prev, py_get(g, start, start + prev));
      return g == before ? Outcome::kHang : Outcome::kOk;
    }
    if (c <= e && i == -1) {
      const Index end = (-e + c < 0) ? -e + c : kNone;
      py_set(g, 2 * c, end, py_get(g, c, -e));
      py_set(g, c, 2 * c, py_get(g, 0, c));
      return g == before ? Outcome::kHang : Outcome::kOk;
    }
    prev = c;
  }
  return Outcome::kHang;
}

Outcome fill_empty_by_expanding_cp(const Pool& pool, Handles& g, int n) {
  // Each successful fill_empty at least fills one empty rank in every case Megatron terminates on;
  // 4n + 8 rounds is far above the log2(n) rounds a power-of-two pool needs.
  for (int round = 0; round < 4 * n + 8; ++round) {
    if (g.empty()) return Outcome::kCrash;  // sample_id_group[-1] on an empty list
    if (!pool.empty(g.back())) return Outcome::kOk;
    const Outcome o = fill_empty(pool, g);
    if (o != Outcome::kOk) return o;
  }
  return Outcome::kHang;
}

// Groups of one micro-batch of handles: the one grouping rule (plan::rank_runs).
std::vector<plan::Group> groups_of_handles(const Pool& pool, const Handles& hs) {
  std::vector<plan::Group> groups;
  for (const plan::RankRun& run : plan::rank_runs(static_cast<int>(hs.size()), [&](int a, int b) { return hs[a] == hs[b]; }))
    groups.push_back(plan::Group{run.first_rank, run.size, pool.lists[hs[run.first_rank]]});
  return groups;
}

// The micro-batch is one that plan::validate accepts (plan::find_microbatch_violation).
bool handles_valid(const Pool& pool, const Handles& hs, const AlignContext& ctx) {
  if (static_cast<int>(hs.size()) != ctx.n) return false;
  plan::PlanConfig config;
  config.dp = ctx.n;
  config.max_seqlen_per_rank = ctx.max_seqlen_per_rank;
  config.min_cp = ctx.min_cp;
  return !plan::find_microbatch_violation(groups_of_handles(pool, hs), config, *ctx.lengths).has_value();
}

bool split_handles(Pool& pool, const Handles& mb, const AlignContext& ctx, Handles* new_mb, Handles* old_mb,
                   std::string* why) {
  auto fail = [why](const char* reason) {
    if (why) *why = reason;
    return false;
  };
  const long n = static_cast<long>(mb.size());
  std::vector<long> cu{0};
  long prev = 0;
  while (cu.back() != n) {
    const long start = cu.back();
    if (pool.empty(mb[start])) return fail("empty rank (Megatron: IndexError)");
    const int sid0 = pool.lists[mb[start]][0];
    long c = 0;
    for (long r = start; r < n && ((r > start && mb[r] == mb[r - 1]) || pool.contains(mb[r], sid0)); ++r) ++c;
    if (prev != 0 && c > prev) return fail("CP size is not decreasing (Megatron: AssertionError)");
    cu.push_back(start + c);
    prev = c;
  }
  if (cu.size() == 2) return fail("a single CP group cannot be split");
  size_t k = 0;
  while (cu[k] < n / 2) ++k;
  Handles old_half(mb.begin(), mb.begin() + cu[k]);
  old_half.resize(n, 0);
  Handles new_half(mb.begin() + cu[k], mb.end());
  new_half.resize(n, 0);
  for (Handles* half : {&old_half, &new_half}) {
    const Outcome o = fill_empty_by_expanding_cp(pool, *half, ctx.n);
    if (o == Outcome::kCrash) return fail("fill_empty raises (Megatron: IndexError)");
    if (o == Outcome::kHang) return fail("fill_empty makes no progress (Megatron: infinite loop, §7f)");
    if (!handles_valid(pool, *half, ctx)) return fail("expanded half has a CP block that does not exist in this pool (§7j)");
  }
  *new_mb = std::move(new_half);
  *old_mb = std::move(old_half);
  return true;
}

// Sample ids of one micro-batch in rank order, each once.
std::vector<int> microbatch_ids(const Pool& pool, const Handles& mb) {
  std::vector<int> ids;
  for (size_t r = 0; r < mb.size(); ++r) {
    if (r > 0 && mb[r] == mb[r - 1]) continue;
    for (int s : pool.lists[mb[r]]) {
      if (std::find(ids.begin(), ids.end(), s) == ids.end()) ids.push_back(s);
    }
  }
  return ids;
}

}  // namespace

bool megatron_split_group(const Lists& mb, const AlignContext& ctx, Lists* new_mb, Lists* old_mb, std::string* why) {
  Pool pool;
  const Handles hs = intern(pool, mb);
  Handles a, b;
  if (!split_handles(pool, hs, ctx, &a, &b, why)) return false;
  *new_mb = materialize(pool, a);
  *old_mb = materialize(pool, b);
  return true;
}

namespace {

// The alignment loop on interned micro-batches (shared by both public overloads).
void align_handles(Pool& pool, std::vector<Handles>& groups, int multiple, const AlignContext& ctx, AlignStats& st) {
  DCP_CHECK(multiple >= 1, "multiple ", multiple);
  DCP_CHECK(ctx.lengths != nullptr, "AlignContext without lengths");
  const long m = multiple;
  long remainder = ((-static_cast<long>(groups.size())) % m + m) % m;
  // Every micro-batch holds at least one sample, so more micro-batches than samples can never be
  // reached: say so at once instead of splitting until nothing is left (quadratic for large G).
  DCP_REQUIRE(static_cast<long>(groups.size()) + remainder <= static_cast<long>(ctx.lengths->size()),
              "cannot make the micro-batch count a multiple of vpp_group ", multiple, ": that needs ",
              groups.size() + remainder, " micro-batches but there are only ", ctx.lengths->size(), " samples");
  long i = static_cast<long>(groups.size()) - 1;
  long attempts = 0;
  bool megatron_gave_up = false;
  while (remainder > 0) {
    if (i < 0) {
      if (attempts >= static_cast<long>(groups.size())) {
        megatron_gave_up = true;  // Megatron: "no tail microbatch has enough ids to split"
        break;
      }
      i = static_cast<long>(groups.size()) - 1;
    }
    Handles new_mb, old_mb;
    if (split_handles(pool, groups[i], ctx, &new_mb, &old_mb, nullptr)) {
      groups[i] = std::move(new_mb);
      groups.push_back(std::move(old_mb));
      --remainder;
      attempts = 0;
      ++st.megatron_splits;
    } else {
      ++attempts;
      ++st.failed_splits;
    }
    --i;
  }
  if (!megatron_gave_up) return;
  while (remainder > 0) {
    long j = static_cast<long>(groups.size()) - 1;
    std::vector<int> ids;
    for (; j >= 0; --j) {
      ids = microbatch_ids(pool, groups[j]);
      if (ids.size() >= 2) break;
    }
    DCP_REQUIRE(j >= 0, "cannot make the micro-batch count a multiple of vpp_group ", multiple, ": ",
                groups.size(), " micro-batches each hold a single sample (need ", remainder,
                " more micro-batches than there are samples to split)");
    const size_t half = (ids.size() + 1) / 2;
    const int first = pool.add(std::vector<int>(ids.begin(), ids.begin() + half));
    const int second = pool.add(std::vector<int>(ids.begin() + half, ids.end()));
    groups[j] = Handles(ctx.n, first);
    groups.push_back(Handles(ctx.n, second));
    --remainder;
    ++st.fallback_splits;
  }
}

}  // namespace

plan::RankLists align_sample_id_groups(plan::RankLists lists, int multiple, const AlignContext& ctx,
                                       AlignStats* stats) {
  AlignStats local;
  Pool pool;
  std::vector<Handles> groups;
  groups.reserve(lists.size());
  for (const auto& mb : lists) groups.push_back(intern(pool, mb));
  align_handles(pool, groups, multiple, ctx, stats ? *stats : local);
  plan::RankLists out;
  out.reserve(groups.size());
  for (const auto& g : groups) out.push_back(materialize(pool, g));
  return out;
}

std::vector<std::vector<plan::Group>> align_microbatch_groups(std::vector<std::vector<plan::Group>> microbatches,
                                                              int multiple, const AlignContext& ctx,
                                                              AlignStats* stats) {
  AlignStats local;
  Pool pool;
  std::vector<Handles> groups;
  groups.reserve(microbatches.size());
  for (auto& mb : microbatches) {
    Handles hs(ctx.n, 0);
    for (auto& g : mb) {
      const int h = pool.add(std::move(g.samples));
      for (int r = g.first_rank; r < g.first_rank + g.cp_size && r < ctx.n; ++r) hs[r] = h;
    }
    groups.push_back(std::move(hs));
  }
  align_handles(pool, groups, multiple, ctx, stats ? *stats : local);
  std::vector<std::vector<plan::Group>> out;
  out.reserve(groups.size());
  for (const Handles& hs : groups) out.push_back(groups_of_handles(pool, hs));
  return out;
}

}  // namespace dcp::sched
