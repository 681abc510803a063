// Slow, literal per-rank translations of Megatron's next_hdp_group (PR2000) and
// next_hdp_group_packing_aware (DEV), statement by statement as in the Python (per-rank lists,
// free-rank lists, projected max over every rank, dict order by group id). They exist only to
// prove that the fast ports in impl/sched make identical decisions; they share the deviation
// rules of the ports (a call that would raise, or whose micro-batch is invalid, becomes
// fill_with_full_dpxcp_group on that call's input) so the two can be compared on every input.
// O(samples * groups * N) per call, so tests keep N and G small.
#pragma once

#include "core/error.h"
#include "plan/geometry.h"
#include "plan/plan.h"
#include "plan/validate.h"
#include "sched/megatron_common.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace dcp::sched::ref {

using megatron::SeqItem;
using Lists = std::vector<std::vector<int>>;

struct Call {
  Lists ids;  // [N] sample ids per rank
  std::vector<SeqItem> leftovers;
};

// Own translations of the Python helpers (not the ports' megatron_common, so that a defect in a
// shared helper cannot make both sides agree; helper-34 found a tie order changed in the ports'
// sorted_desc passed the 3000-case comparison).
// dcp_gpus_needed (d48bd6be0a data_schedule_utils.py:933-936): max(min_cp, max(1, 2 ** ceil(log2(L / M)))).
inline int64_t gpus_needed(int64_t len, int64_t m, int min_cp) {
  const double raw = std::max(1.0, std::pow(2.0, std::ceil(std::log2(static_cast<double>(len) / static_cast<double>(m)))));
  return std::max<int64_t>(min_cp, static_cast<int64_t>(raw));
}
// workload (data_schedule_utils.py:623-624): (seq_len * seq_len) / cp_size, int square, true division.
inline double workload(int64_t len, int64_t k) { return static_cast<double>(len * len) / static_cast<double>(k); }
// sum() of a list of floats, left to right from 0 (CPython <= 3.11).
inline double python_sum(const std::vector<double>& v) {
  double total = 0;
  for (size_t i = 0; i < v.size(); ++i) total = total + v[i];
  return total;
}
// sorted(..., key=lambda x: x[1], reverse=True) over (id, length) in id order: descending length,
// equal lengths in ascending id (Python's sort is stable and reverse=True keeps that order).
inline std::vector<SeqItem> sorted_desc(const plan::Batch& batch) {
  std::vector<SeqItem> items;
  for (size_t i = 0; i < batch.lengths.size(); ++i) items.push_back(SeqItem{static_cast<int>(i), batch.lengths[i]});
  std::sort(items.begin(), items.end(), [](const SeqItem& a, const SeqItem& b) {
    return a.len != b.len ? a.len > b.len : a.id < b.id;
  });
  return items;
}

// fill_with_full_dpxcp_group, literally: the selected ids on every rank.
inline Call fill_full_call(const std::vector<SeqItem>& in, int n, int64_t m) {
  Call c;
  std::vector<int> sel;
  double packed = 0.0;
  for (const auto& s : in) {
    const double per = static_cast<double>(s.len) / n;
    if (packed + per <= static_cast<double>(m)) {
      sel.push_back(s.id);
      packed += per;
    } else {
      c.leftovers.push_back(s);
    }
  }
  c.ids.assign(n, sel);
  return c;
}

// Groups from per-rank lists (consecutive identical lists), or nullopt if a rank is empty.
inline std::optional<std::vector<plan::Group>> groups_of(const Lists& ranks) {
  for (const auto& r : ranks)
    if (r.empty()) return std::nullopt;
  return plan::groups_of_rank_lists(ranks);
}

// The micro-batch given as per-rank lists is one that plan::validate accepts.
inline bool rank_lists_valid(const Lists& ranks, int n, int min_cp, int64_t m, const std::vector<int64_t>& lengths) {
  if (static_cast<int>(ranks.size()) != n || plan::rank_lists_violation({ranks}, n)) return false;
  plan::PlanConfig config;
  config.dp = n;
  config.max_seqlen_per_rank = m;
  config.min_cp = min_cp;
  return !plan::find_microbatch_violation(plan::groups_of_rank_lists(ranks), config, lengths).has_value();
}

// Counts the calls where a reference left Megatron (a call that would raise, or whose micro-batch
// is invalid, replaced by fill_with_full_dpxcp_group; DEV: also a call where d48bd6be0a's rules
// failed and the later dev rules were used). Zero: the plan is Megatron's own.
struct Deviations {
  int calls = 0;      // calls that left Megatron
  int seen = 0;       // calls made
  std::string first;  // what Megatron does at the first of them
};

inline std::vector<plan::Group> finish(const std::optional<Call>& call, const std::vector<SeqItem>& input, int n,
                                       int64_t m, int min_cp, const std::vector<int64_t>& lengths,
                                       std::vector<SeqItem>* leftovers, Deviations* deviations = nullptr) {
  if (deviations) ++deviations->seen;
  if (call) {
    auto groups = groups_of(call->ids);
    if (groups && rank_lists_valid(call->ids, n, min_cp, m, lengths)) {
      *leftovers = call->leftovers;
      return *groups;
    }
  }
  if (deviations && deviations->calls++ == 0) {
    const std::string at = "call " + std::to_string(deviations->seen) + " (micro-batch " +
                           std::to_string(deviations->seen - 1) + ")";
    if (!call) {
      deviations->first = at + " raises (IndexError or AssertionError)";
    } else if (auto v = plan::rank_lists_violation({call->ids}, n)) {
      deviations->first = at + " returns per-rank lists that are no groups: " + *v;
    } else {
      plan::PlanConfig config;
      config.dp = n;
      config.max_seqlen_per_rank = m;
      config.min_cp = min_cp;
      const auto w = plan::find_microbatch_violation(plan::groups_of_rank_lists(call->ids), config, lengths,
                                                      static_cast<size_t>(deviations->seen - 1));
      deviations->first = at + " returns an invalid micro-batch: " + w.value_or("?");
    }
  }
  Call fb = fill_full_call(input, n, m);
  DCP_REQUIRE(!fb.ids.empty() && !fb.ids[0].empty(), "reference: the fallback places no sample");
  *leftovers = fb.leftovers;
  return {plan::Group{0, n, fb.ids[0]}};
}

// ---------------------------------------------------------------- PR2000 next_hdp_group
inline std::optional<Call> pr2000_call(const std::vector<SeqItem>& in, int n, int64_t m, int min_cp) {
  auto needed = [&](int64_t len) { return gpus_needed(len, m, min_cp); };
  auto est = [&](int64_t len) { return workload(len, needed(len)); };
  // dcp_make_buckets_equal
  std::vector<int64_t> distinct;
  std::vector<double> work;
  for (const auto& s : in) {
    if (std::find(distinct.begin(), distinct.end(), needed(s.len)) == distinct.end()) distinct.push_back(needed(s.len));
    work.push_back(est(s.len));
  }
  const long k = static_cast<long>(distinct.size());
  const double target = python_sum(work) / static_cast<double>(k);
  std::vector<std::deque<SeqItem>> buckets;
  std::deque<SeqItem> cur;
  double cur_work = 0.0;
  long remaining_k = k;
  for (long i = 0; i < static_cast<long>(in.size()); ++i) {
    const double w = est(in[i].len);
    if (!cur.empty() && (cur_work + w > target * 1.1 ||
                         static_cast<long>(in.size()) - i <= remaining_k - static_cast<long>(buckets.size()))) {
      buckets.push_back(cur);
      cur.clear();
      cur_work = 0.0;
      --remaining_k;
    }
    cur.push_back(in[i]);
    cur_work += w;
  }
  if (!cur.empty()) buckets.push_back(cur);

  std::vector<std::vector<int64_t>> mb(n);
  std::vector<double> exec(n, 0.0);
  Lists ids(n);
  std::vector<int> gpu_gid(n, -1);
  std::vector<std::vector<int>> members;  // by gid (dict insertion order == gid order)
  std::vector<int64_t> gsize;
  std::vector<double> pack;
  int64_t prev_needed = -1;
  bool check_balance = false;
  auto free_ranks = [&] {
    std::vector<int> f;
    for (int r = 0; r < n; ++r)
      if (gpu_gid[r] < 0) f.push_back(r);
    return f;
  };
  while (!buckets.empty()) {
    int bidx = -1;
    for (size_t b = 0; b < buckets.size(); ++b) {
      if (buckets[b].empty()) continue;
      const int64_t need = needed(buckets[b].front().len);
      const bool any = std::find(gsize.begin(), gsize.end(), need) != gsize.end();
      if (any || static_cast<int64_t>(free_ranks().size()) >= need) {
        bidx = static_cast<int>(b);
        break;
      }
    }
    if (bidx < 0) break;
    const SeqItem s = buckets[bidx].front();
    const int64_t need = needed(s.len);
    if (prev_needed < 0) prev_needed = need;
    int best = -1;
    double best_load = std::numeric_limits<double>::infinity();
    for (size_t g = 0; g < gsize.size(); ++g) {
      if (gsize[g] != need || !(pack[g] + static_cast<double>(s.len) / need <= static_cast<double>(m))) continue;
      double load = 0.0;
      for (int r : members[g]) load = std::max(load, exec[r]);
      if (load < best_load) {
        best_load = load;
        best = static_cast<int>(g);
      }
    }
    const auto fr = free_ranks();
    std::vector<int> chosen;
    if (static_cast<int64_t>(fr.size()) >= need) {
      std::vector<int> sorted = fr;
      std::stable_sort(sorted.begin(), sorted.end(), [&](int a, int b) { return exec[a] < exec[b]; });
      std::vector<int> nm(sorted.begin(), sorted.begin() + need);
      if (exec[nm.back()] < best_load) {
        best = -1;
        chosen = nm;
      } else {
        chosen = members[best];
      }
    } else {
      if (best < 0) break;
      chosen = members[best];
    }
    if (best < 0) {
      best = static_cast<int>(members.size());
      members.push_back(chosen);
      gsize.push_back(need);
      pack.push_back(0.0);
      for (int r : chosen) gpu_gid[r] = best;
    }
    pack[best] += static_cast<double>(s.len) / need;
    for (int r : chosen) {
      mb[r].push_back(s.len);
      exec[r] += est(s.len);
      ids[r].push_back(s.id);
    }
    buckets[bidx].pop_front();
    while (!buckets.empty() && buckets.front().empty()) buckets.erase(buckets.begin());
    if (need < prev_needed) check_balance = true;
    const double mx = *std::max_element(exec.begin(), exec.end());
    const double mn = *std::min_element(exec.begin(), exec.end());
    if (check_balance && !buckets.empty() && mx - mn <= 0.05 * mx) break;
  }
  Call out;
  for (const auto& b : buckets)
    for (const auto& s : b) out.leftovers.push_back(s);
  // fill_empty_gpus
  for (int round = 0; round < 4 * n + 8; ++round) {
    std::vector<int> empty;
    for (int r = 0; r < n; ++r)
      if (mb[r].empty()) empty.push_back(r);
    if (empty.empty()) break;
    if (gsize.empty()) return std::nullopt;  // AssertionError (§7d)
    const int64_t s = *std::min_element(gsize.begin(), gsize.end());
    const int64_t p = std::min<int64_t>(2 * s, n);
    const int need_more = static_cast<int>(p - s);
    const int g = static_cast<int>(std::find(gsize.begin(), gsize.end(), s) - gsize.begin());
    const int start = members[g].front(), end = members[g].back(), e = empty.front();
    std::vector<std::vector<int64_t>> nmb(n);
    Lists nids(n);
    auto put = [&](int at, int from) {
      if (at < 0 || at >= n) return false;  // IndexError
      nmb[at] = mb[from];
      nids[at] = ids[from];
      return true;
    };
    for (int r = 0; r < start; ++r) put(r, r);
    for (int r = start; r <= end + need_more; ++r)
      if (!put(r, end)) return std::nullopt;
    for (int i = 0; end + 1 + i < e; ++i)
      if (!put(end + need_more + 1 + i, end + 1 + i)) return std::nullopt;
    gsize[g] = p;
    std::vector<int> nm;
    for (int r = start; r <= end + need_more; ++r) nm.push_back(r);
    members[g] = nm;
    for (size_t o = g + 1; o < members.size(); ++o)
      for (int& r : members[o]) r += need_more;
    mb = nmb;
    ids = nids;
    if (round == 4 * n + 7) return std::nullopt;
  }
  out.ids = ids;
  return out;
}

// ---------------------------------------------------------------- DEV next_hdp_group_packing_aware
// legacy: d48bd6be0a (powers of two up to N, fill to min(2s, N), IndexError past N);
// otherwise the later dev source (sizes of plan::group_sizes, skip fills that overflow).
inline std::optional<Call> dev_call(std::vector<SeqItem> in, int n, int64_t m, int min_cp, bool legacy) {
  std::vector<int> sizes;
  if (legacy) {
    for (int k = min_cp; k <= n; k *= 2) sizes.push_back(k);
  } else {
    sizes = plan::group_sizes(n, min_cp);
  }
  auto cp_min = [&](int64_t len) {
    const int64_t k = gpus_needed(len, m, min_cp);
    if (legacy) return k;
    for (int s : sizes)
      if (s >= k) return static_cast<int64_t>(s);
    return static_cast<int64_t>(n);
  };
  std::stable_sort(in.begin(), in.end(), [](const SeqItem& a, const SeqItem& b) { return a.len > b.len; });
  const double cap = static_cast<double>(in[0].len) * static_cast<double>(m) * (1.0 + 0.05);
  std::vector<double> exec(n, 0.0);
  Lists ids(n);
  std::vector<int> gpu_gid(n, -1);
  std::vector<std::vector<int>> members;
  std::vector<int64_t> gsize;
  std::vector<double> pack;
  auto place = [&](int g, const SeqItem& s, int64_t k) {
    for (int r : members[g]) {
      exec[r] += workload(s.len, k);
      ids[r].push_back(s.id);
    }
  };
  {
    const int64_t k = cp_min(in[0].len);
    if (k > n) return std::nullopt;  // AssertionError: requires CP size k, but only n ranks
    members.push_back({});
    for (int r = 0; r < k; ++r) {
      members[0].push_back(r);
      gpu_gid[r] = 0;
    }
    gsize.push_back(k);
    pack.push_back(static_cast<double>(in[0].len) / k);
    place(0, in[0], k);
  }
  Call out;
  for (size_t i = 1; i < in.size(); ++i) {
    const SeqItem s = in[i];
    const int64_t need = cp_min(s.len);
    bool found = false;
    double best_pm = 0;
    int64_t best_k = 0;
    int best_g = -1;
    std::vector<int> best_members;
    auto projected = [&](const std::vector<int>& mem, double c) {
      double pm = -1.0;
      for (int r = 0; r < n; ++r) {
        const bool in_g = std::find(mem.begin(), mem.end(), r) != mem.end();
        pm = std::max(pm, in_g ? exec[r] + c : exec[r]);
      }
      return pm;
    };
    for (int k : sizes) {
      if (k < need) continue;
      const double c = workload(s.len, k);
      for (size_t g = 0; g < gsize.size(); ++g) {
        if (gsize[g] != k) continue;
        if (pack[g] + static_cast<double>(s.len) / k > static_cast<double>(m)) continue;
        const double pm = projected(members[g], c);
        if (pm <= cap && (!found || pm < best_pm)) {
          found = true;
          best_pm = pm;
          best_k = k;
          best_g = static_cast<int>(g);
        }
      }
      std::vector<int> fr;
      for (int r = 0; r < n; ++r)
        if (gpu_gid[r] < 0) fr.push_back(r);
      if (static_cast<int>(fr.size()) >= k) {
        std::stable_sort(fr.begin(), fr.end(), [&](int a, int b) { return exec[a] < exec[b]; });
        std::vector<int> mem(fr.begin(), fr.begin() + k);
        const double pm = projected(mem, c);
        if (pm <= cap && (!found || pm < best_pm)) {
          found = true;
          best_pm = pm;
          best_k = k;
          best_g = -1;
          best_members = mem;
        }
      }
    }
    if (!found) {
      out.leftovers.push_back(s);
      continue;
    }
    if (best_g < 0) {
      best_g = static_cast<int>(members.size());
      members.push_back(best_members);
      gsize.push_back(best_k);
      pack.push_back(0.0);
      for (int r : best_members) gpu_gid[r] = best_g;
    }
    pack[best_g] += static_cast<double>(s.len) / best_k;
    place(best_g, s, best_k);
  }
  // fill_empty_gpus_once until full
  for (int round = 0;; ++round) {
    if (round > 4 * n + 8) return std::nullopt;
    std::vector<int> empty;
    for (int r = 0; r < n; ++r)
      if (ids[r].empty()) empty.push_back(r);
    if (empty.empty()) break;
    const int64_t s = *std::min_element(gsize.begin(), gsize.end());
    int64_t next_size = legacy ? std::min<int64_t>(2 * s, n) : 0;
    if (!legacy) {
      const size_t si = std::find(sizes.begin(), sizes.end(), s) - sizes.begin();
      if (si + 1 >= sizes.size()) return fill_full_call(in, n, m);
      next_size = sizes[si + 1];
    }
    const int need_more = static_cast<int>(next_size - s);
    bool grown = false;
    for (size_t g = 0; g < gsize.size() && !grown; ++g) {
      if (gsize[g] != s) continue;
      const int start = members[g].front(), end = members[g].back(), e = empty.front();
      if (end + 1 > e || end + need_more >= n) continue;
      const int pushed = e - end - 1;
      if (end + need_more + pushed >= n) {
        if (legacy) return std::nullopt;  // IndexError
        continue;
      }
      Lists nids(n);
      for (int r = 0; r < start; ++r) nids[r] = ids[r];
      for (int r = start; r <= end + need_more; ++r) nids[r] = ids[end];
      for (int i = 0; i < pushed; ++i) nids[end + need_more + 1 + i] = ids[end + 1 + i];
      gsize[g] = next_size;
      members[g].clear();
      for (int r = start; r <= end + need_more; ++r) members[g].push_back(r);
      for (size_t o = 0; o < members.size(); ++o) {
        if (o == g) continue;
        if (*std::min_element(members[o].begin(), members[o].end()) > end)
          for (int& r : members[o]) r += need_more;
      }
      ids = nids;
      grown = true;
    }
    if (!grown) return fill_full_call(in, n, m);  // fill_with_full_dpxcp_group
  }
  out.ids = ids;
  return out;
}

// The whole get_groups_and_subsamples loop (before VPP alignment) for either call.
template <typename CallFn>
std::vector<std::vector<plan::Group>> run(const plan::Batch& batch, int n, int64_t m, int min_cp, CallFn call,
                                          Deviations* deviations) {
  std::vector<SeqItem> remaining = sorted_desc(batch);
  std::vector<std::vector<plan::Group>> out;
  while (!remaining.empty()) {
    DCP_CHECK(out.size() <= batch.lengths.size(), "reference made no progress");
    std::vector<SeqItem> left;
    out.push_back(finish(call(remaining), remaining, n, m, min_cp, batch.lengths, &left, deviations));
    remaining = left;
  }
  return out;
}

inline std::vector<std::vector<plan::Group>> pr2000(const plan::Batch& b, int n, int64_t m, int min_cp,
                                                    Deviations* deviations = nullptr) {
  return run(
      b, n, m, min_cp, [&](const std::vector<SeqItem>& in) { return pr2000_call(in, n, m, min_cp); }, deviations);
}

// Legacy rules first; the later rules when the legacy call raises or is invalid.
inline std::vector<std::vector<plan::Group>> dev(const plan::Batch& b, int n, int64_t m, int min_cp,
                                                 Deviations* deviations = nullptr) {
  return run(
      b, n, m, min_cp,
      [&](const std::vector<SeqItem>& in) -> std::optional<Call> {
        auto legacy = dev_call(in, n, m, min_cp, true);
        if (legacy && rank_lists_valid(legacy->ids, n, min_cp, m, b.lengths)) return legacy;
        if (deviations && deviations->calls++ == 0)  // d48bd6be0a raises or is invalid here
          deviations->first = "call " + std::to_string(deviations->seen + 1) +
                              " raises or returns an invalid micro-batch under d48bd6be0a's rules";
        return dev_call(in, n, m, min_cp, false);
      },
      deviations);
}

}  // namespace dcp::sched::ref
