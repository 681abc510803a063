// See validate.h for the list of invariants, in the order they are checked.
#include "plan/validate.h"

#include "core/error.h"
#include "plan/cp_rule.h"
#include "plan/geometry.h"
#include "plan/planner.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace dcp::plan {

namespace {
using detail::concat;

std::optional<std::string> check_config_only(const PlanConfig& c) {
  if (c.dp < 1) return concat("dp=", c.dp, " must be >= 1");
  if (c.cp < 1) return concat("cp=", c.cp, " must be >= 1");
  if (c.max_seqlen_per_rank < 1) return concat("max_seqlen_per_rank=", c.max_seqlen_per_rank, " must be >= 1");
  // The bounds the entry points (check_config, plan JSON, the Python module) apply with their own
  // flag names: a C++ caller of find_violation past them would overflow M x k (signed, undefined).
  if (c.max_seqlen_per_rank > kMaxTokensPerRank)
    return concat("max_seqlen_per_rank=", c.max_seqlen_per_rank, " is larger than the supported ", kMaxTokensPerRank);
  if (int64_t{c.dp} * c.cp > kMaxPool)
    return concat("dp x cp = ", int64_t{c.dp} * c.cp, " is larger than the supported pool of ", kMaxPool);
  if (!is_pow2(c.min_cp) || c.min_cp > c.pool())
    return concat("min_cp=", c.min_cp, " must be a power of two <= pool ", c.pool());
  if (c.vpp_group && *c.vpp_group < 1) return concat("vpp_group=", *c.vpp_group, " must be >= 1");
  return std::nullopt;
}

std::string where(size_t m, size_t gi, const Group& g) {
  return concat("micro-batch ", m, " group ", gi, " (ranks ", g.first_rank, "..", g.last_rank(), ")");
}

// Rules 3-5 for one micro-batch; `dynamic` selects rule 4's dynamic or static sizes. Sample ids
// are range-checked, then passed to on_sample(id, group index), which returns the violation of a
// duplicate (the caller's rule 2) or nullopt.
template <typename OnSample>
std::optional<std::string> check_groups(const std::vector<Group>& groups, const PlanConfig& c, bool dynamic,
                                        const std::vector<int64_t>& lengths, size_t m, OnSample&& on_sample) {
  const int n = c.pool();
  const int64_t g_count = static_cast<int64_t>(lengths.size());
  int next_rank = 0;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const Group& g = groups[gi];
    if (g.cp_size < 1) return concat(where(m, gi, g), ": cp_size ", g.cp_size, " < 1");
    if (g.first_rank != next_rank)
      return concat(where(m, gi, g), ": starts at rank ", g.first_rank, " but rank ", next_rank,
                    next_rank < g.first_rank ? " is not covered" : " is already covered");
    if (g.first_rank % g.cp_size != 0)
      return concat(where(m, gi, g), ": block of size ", g.cp_size, " is not aligned (first rank ", g.first_rank,
                    " is not a multiple of ", g.cp_size, ")");
    if (g.cp_size > n - g.first_rank) return concat(where(m, gi, g), ": extends past the pool of ", n, " ranks");
    if (dynamic) {
      if (g.cp_size < c.min_cp) return concat(where(m, gi, g), ": cp_size ", g.cp_size, " < min_cp ", c.min_cp);
      if (!group_size_exists(n, g.cp_size, c.min_cp))
        return concat(where(m, gi, g), ": no CP group of size ", g.cp_size, " exists in a pool of ", n, " ranks");
    } else if (g.cp_size != c.cp) {
      return concat(where(m, gi, g), ": static-CP plan has group size ", g.cp_size, " != cp ", c.cp);
    }
    if (g.samples.empty()) return concat(where(m, gi, g), ": group has no samples (empty ranks)");
    int64_t tokens = 0;
    for (int s : g.samples) {
      if (s < 0 || s >= g_count) return concat(where(m, gi, g), ": sample id ", s, " outside [0, ", g_count, ")");
      if (auto v = on_sample(s, gi)) return v;
      // Real lengths are bounded by plan::check_config; a padded plan's pad_to only by its file.
      if (__builtin_add_overflow(tokens, lengths[s], &tokens))
        return concat(where(m, gi, g), ": the group's tokens overflow 64 bits");
    }
    if (tokens > c.max_seqlen_per_rank * g.cp_size)
      return concat(where(m, gi, g), ": ", tokens, " tokens over ", g.cp_size, " ranks = ",
                    static_cast<double>(tokens) / g.cp_size, " tokens per rank > max_seqlen_per_rank ",
                    c.max_seqlen_per_rank);
    next_rank = g.first_rank + g.cp_size;
  }
  if (next_rank != n) return concat("micro-batch ", m, ": ranks ", next_rank, "..", n - 1, " are empty");
  return std::nullopt;
}
}  // namespace

std::optional<std::string> find_microbatch_violation(const std::vector<Group>& groups, const PlanConfig& c,
                                                     const std::vector<int64_t>& lengths, size_t index) {
  const auto no_check = [](int, size_t) { return std::optional<std::string>(); };
  if (auto v = check_groups(groups, c, /*dynamic=*/true, lengths, index, no_check)) return v;
  // No sample twice in the micro-batch: (id, group) pairs sorted by id.
  std::vector<std::pair<int, size_t>> ids;
  for (size_t gi = 0; gi < groups.size(); ++gi)
    for (int s : groups[gi].samples) ids.emplace_back(s, gi);
  std::sort(ids.begin(), ids.end());
  for (size_t i = 1; i < ids.size(); ++i) {
    if (ids[i].first == ids[i - 1].first)
      return concat(where(index, ids[i].second, groups[ids[i].second]), ": sample ", ids[i].first,
                    " appears more than once (also in group ", ids[i - 1].second, " of this micro-batch)");
  }
  return std::nullopt;
}

std::optional<std::string> find_violation(const Plan& plan, const Batch& batch) {
  const PlanConfig& c = plan.config;
  if (auto v = check_config_only(c)) return v;
  const int64_t g_count = batch.size();
  // A padded plan (bshd: pad_to > 0) runs every sample at pad_to tokens: pad_to is the requested
  // max_seqlen when there is one, no sample is longer, and rule 5 counts the padded tokens.
  const std::vector<int64_t>* lengths = &batch.lengths;
  std::vector<int64_t> padded;
  if (plan.pad_to < 0) return concat("pad_to ", plan.pad_to, " is negative");
  if (plan.pad_to > 0) {
    if (c.cp > 1 && plan.pad_to % (2 * int64_t{c.cp}) != 0)
      return concat("pad_to ", plan.pad_to, " is not a multiple of 2 x cp = ", 2 * int64_t{c.cp},
                    " (each padded sample is split into 2 x cp zigzag chunks)");
    if (c.max_seqlen && plan.pad_to != *c.max_seqlen)
      return concat("pad_to ", plan.pad_to, " != max_seqlen ", *c.max_seqlen,
                    " (a padded plan pads every sample to max_seqlen)");
    padded.reserve(batch.lengths.size());
    for (int64_t s = 0; s < g_count; ++s) {
      if (batch.lengths[s] > plan.pad_to)
        return concat("sample ", s, " (length ", batch.lengths[s], ") is longer than pad_to ", plan.pad_to);
      padded.push_back(plan.pad_to);
    }
    lengths = &padded;
  }
  std::vector<int> seen_mb(g_count, -1);
  for (size_t m = 0; m < plan.microbatches.size(); ++m) {
    const auto& groups = plan.microbatches[m].groups;
    const auto once = [&](int s, size_t gi) -> std::optional<std::string> {
      if (seen_mb[s] >= 0)
        return concat(where(m, gi, groups[gi]), ": sample ", s, " appears more than once (also in micro-batch ",
                      seen_mb[s], ")");
      seen_mb[s] = static_cast<int>(m);
      return std::nullopt;
    };
    if (auto v = check_groups(groups, c, plan.dynamic, *lengths, m, once)) return v;
  }
  for (int64_t s = 0; s < g_count; ++s) {
    if (seen_mb[s] < 0) return concat("sample ", s, " (length ", batch.lengths[s], ") is not scheduled");
  }
  if (c.vpp_group)
    if (auto v = vpp_group_violation(static_cast<int64_t>(plan.microbatches.size()), *c.vpp_group)) return v;
  return std::nullopt;
}

std::optional<std::string> vpp_group_violation(int64_t microbatches, int group, int pp) {
  if (pp > 0 && group < pp)
    return concat("VPP micro-batch group ", group, " is smaller than pp=", pp, " (Megatron requires group >= pp)");
  if (group < 1 || microbatches % group != 0)
    return concat(microbatches, " micro-batches is not a multiple of vpp_group ", group);
  return std::nullopt;
}

std::optional<std::string> find_violation(const Plan& plan, const Batch& batch, const PlanConfig& r) {
  const PlanConfig& c = plan.config;
  if (c.dp != r.dp || c.cp != r.cp || c.max_seqlen_per_rank != r.max_seqlen_per_rank || c.min_cp != r.min_cp ||
      c.vpp_group != r.vpp_group || c.max_seqlen != r.max_seqlen)
  {
    // An unset VPP group or max_seqlen reads "none", not a 0 that looks like a value.
    const auto opt = [](const std::optional<int64_t>& v) { return v ? std::to_string(*v) : std::string("none"); };
    const auto text = [&](const PlanConfig& x) {
      return concat("dp ", x.dp, ", cp ", x.cp, ", M ", x.max_seqlen_per_rank, ", min_cp ", x.min_cp, ", vpp_group ",
                    opt(x.vpp_group ? std::optional<int64_t>(*x.vpp_group) : std::nullopt), ", max_seqlen ",
                    opt(x.max_seqlen ? std::optional<int64_t>(*x.max_seqlen) : std::nullopt));
    };
    return concat("the plan's config (", text(c), ") is not the requested one (", text(r), ")");
  }
  return find_violation(plan, batch);
}

std::optional<std::string> longer_than_plan_max_seqlen(const Plan& plan, const Batch& batch) {
  if (!plan.config.max_seqlen) return std::nullopt;
  for (int64_t i = 0; i < batch.size(); ++i)
    if (batch.lengths[i] > *plan.config.max_seqlen)
      return concat("sample ", i, " (length ", batch.lengths[i], ") is longer than the plan's max_seqlen ",
                    *plan.config.max_seqlen);
  return std::nullopt;
}

void validate(const Plan& plan, const Batch& batch, const PlanConfig& requested) {
  if (auto v = find_violation(plan, batch, requested))
    throw Error(concat("invalid plan from ", plan.planner, ": ", *v));
}

void validate(const Plan& plan, const Batch& batch) {
  if (auto v = find_violation(plan, batch)) throw Error(concat("invalid plan from ", plan.planner, ": ", *v));
}

}  // namespace dcp::plan
