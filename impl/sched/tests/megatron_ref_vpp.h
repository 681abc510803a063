// Slow, literal translation of Megatron's align_sample_id_groups (VPP micro-batch alignment;
// NVIDIA/Megatron-LM megatron/core/datasets/data_schedule_utils.py, identical in PR2000 2d6e946bab
// and DEV d48bd6be0a; reference §2.4), statement by statement on per-rank lists with Python's
// list semantics: negative indices (G[-1] is the last rank, including the §7a read of
// sample_id_group[-1] before the i >= 0 test), slice get/set that may change a list's length,
// and `x in list`. Written independently of impl/sched/vpp_align.cpp (which reasons about list
// handles) so the conformance generator can state Megatron's aligned plan from a second source.
// Where Megatron raises or never returns, the outcome says so instead of a plan.
#pragma once

#include "plan/plan.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

namespace dcp::sched::ref {

struct AlignOutcome {
  enum Kind { kOk, kRaise, kHang } kind = kOk;
  std::string what;       // the exception (kRaise) or the loop that never ends (kHang)
  plan::RankLists groups;  // kOk: the aligned micro-batches
};

namespace vpp_detail {

using List = std::vector<int>;
using Group = std::vector<List>;  // one micro-batch: a list per rank

struct Raise {
  std::string what;
};
struct Hang {
  std::string what;
};

// Python's index normalisation for one subscript (IndexError when out of range).
inline long py_index(long i, long len) {
  if (i < 0) i += len;
  if (i < 0 || i >= len) throw Raise{"IndexError: list index out of range"};
  return i;
}

// Python's slice bounds (step 1): None -> default, negatives count from the end, then clamped.
struct Bound {
  bool none = true;
  long v = 0;
};
inline Bound B(long v) { return Bound{false, v}; }
inline const Bound None{};

inline void slice_bounds(long len, Bound start, Bound stop, long* a, long* b) {
  auto norm = [len](Bound x, long dflt) {
    if (x.none) return dflt;
    long v = x.v < 0 ? x.v + len : x.v;
    return std::clamp(v, 0L, len);
  };
  *a = norm(start, 0);
  *b = std::max(*a, norm(stop, len));
}

inline Group get(const Group& g, Bound start, Bound stop) {
  long a = 0, b = 0;
  slice_bounds(static_cast<long>(g.size()), start, stop, &a, &b);
  return Group(g.begin() + a, g.begin() + b);
}

inline void set(Group& g, Bound start, Bound stop, const Group& value) {
  long a = 0, b = 0;
  slice_bounds(static_cast<long>(g.size()), start, stop, &a, &b);
  g.erase(g.begin() + a, g.begin() + b);
  g.insert(g.begin() + a, value.begin(), value.end());
}

inline bool in(int x, const List& l) { return std::find(l.begin(), l.end(), x) != l.end(); }

inline Group fill_empty(Group g) {
  const long len = static_cast<long>(g.size());
  long empty_size = 0;
  for (const auto& x : g) empty_size += x.empty() ? 1 : 0;
  long i = len - 1 - empty_size;
  long prev_cp_size = 0;
  while (i >= 0) {
    const List& at = g[py_index(i, len)];
    if (at.empty()) throw Raise{"IndexError: list index out of range (sample_id_group[i][0] on an empty rank)"};
    const int sid0 = at[0];
    long cp_size = 0;
    // `while sid0 in sample_id_group[i] and i >= 0`: the subscript is evaluated first (§7a).
    while (in(sid0, g[py_index(i, len)]) && i >= 0) {
      ++cp_size;
      --i;
    }
    if (cp_size > prev_cp_size && prev_cp_size != 0) {
      const long start_idx = i + 1 + cp_size;
      const Bound end_idx = (-empty_size + prev_cp_size < 0) ? B(-empty_size + prev_cp_size) : None;
      set(g, B(start_idx + 2 * prev_cp_size), end_idx, get(g, B(start_idx + prev_cp_size), B(-empty_size)));
      set(g, B(start_idx + prev_cp_size), B(start_idx + 2 * prev_cp_size),
          get(g, B(start_idx), B(start_idx + prev_cp_size)));
      break;
    } else if (cp_size <= empty_size && i == -1) {
      const Bound end_idx = (-empty_size + cp_size < 0) ? B(-empty_size + cp_size) : None;
      set(g, B(2 * cp_size), end_idx, get(g, B(cp_size), B(-empty_size)));
      set(g, B(cp_size), B(2 * cp_size), get(g, B(0), B(cp_size)));
      break;
    }
    prev_cp_size = cp_size;
  }
  return g;
}

inline Group fill_empty_by_expanding_cp(Group g) {
  // `while len(sample_id_group[-1]) == 0`: a call that changes nothing repeats forever.
  for (size_t round = 0; g[py_index(-1, static_cast<long>(g.size()))].empty(); ++round) {
    Group next = fill_empty(g);
    if (next == g) throw Hang{"fill_empty_by_expanding_cp never returns (fill_empty changes nothing, §7f)"};
    if (round > 64 * g.size() + 64) throw Hang{"fill_empty_by_expanding_cp does not finish"};
    g = std::move(next);
  }
  return g;
}

// split_group: (new_mb, old_mb), or nullopt for Megatron's (None, None).
inline std::optional<std::pair<Group, Group>> split_group(const Group& g) {
  const long total = static_cast<long>(g.size());
  std::vector<long> cu_ranks{0};
  long prev_cp_size = 0;
  while (cu_ranks.back() != total) {
    const long start_rank = cu_ranks.back();
    const List& first = g[py_index(start_rank, total)];
    if (first.empty()) throw Raise{"IndexError: list index out of range (split_group on an empty rank)"};
    const int sid0 = first[0];
    long cp_size = 0;
    for (long r = start_rank; r < total; ++r) {
      if (in(sid0, g[r])) {
        ++cp_size;
      } else {
        break;
      }
    }
    if (!(prev_cp_size == 0 || cp_size <= prev_cp_size))
      throw Raise{"AssertionError: split_group: CP size is not decreasing"};
    cu_ranks.push_back(start_rank + cp_size);
    prev_cp_size = cp_size;
  }
  if (cu_ranks.size() == 2) return std::nullopt;
  size_t k = 0;
  while (cu_ranks[k] < total / 2) ++k;
  Group old_mb = get(g, None, B(cu_ranks[k]));
  old_mb.resize(static_cast<size_t>(total));  // + [[] for _ in range(total - cu_ranks[k])]
  Group new_mb = get(g, B(cu_ranks[k]), None);
  new_mb.resize(static_cast<size_t>(total));  // + [[] for _ in range(cu_ranks[k])]
  old_mb = fill_empty_by_expanding_cp(old_mb);
  new_mb = fill_empty_by_expanding_cp(new_mb);
  return std::make_pair(new_mb, old_mb);
}

}  // namespace vpp_detail

// align_sample_id_groups(sample_id_groups, multiple), literally.
inline AlignOutcome align_sample_id_groups(plan::RankLists groups, int multiple) {
  using namespace vpp_detail;
  AlignOutcome out;
  try {
    const long m = multiple;
    long remainder = ((-static_cast<long>(groups.size())) % m + m) % m;
    long i = static_cast<long>(groups.size()) - 1;
    long attempts_since_split = 0;
    while (remainder > 0) {
      if (i < 0) {
        if (attempts_since_split >= static_cast<long>(groups.size()))
          throw Raise{"AssertionError: align_sample_id_groups: no tail microbatch has enough ids to split"};
        i = static_cast<long>(groups.size()) - 1;
      }
      auto halves = split_group(groups[py_index(i, static_cast<long>(groups.size()))]);
      if (halves) {
        groups[py_index(i, static_cast<long>(groups.size()))] = halves->first;
        groups.push_back(halves->second);
        --remainder;
        attempts_since_split = 0;
      } else {
        ++attempts_since_split;
      }
      --i;
    }
    out.groups = std::move(groups);
  } catch (const Raise& r) {
    out.kind = AlignOutcome::kRaise;
    out.what = r.what;
  } catch (const Hang& h) {
    out.kind = AlignOutcome::kHang;
    out.what = h.what;
  }
  return out;
}

}  // namespace dcp::sched::ref
