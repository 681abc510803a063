// The plan data model shared by every planner, the simulator and the harness.
//
//   Batch      : the global batch, sample i has length lengths[i] (tokens, > 0).
//   PlanConfig : pool N = dp*cp ranks (index j = dp_rank*cp + cp_rank), per-rank token budget M,
//                min_cp, optional VPP micro-batch group V, optional max sequence length.
//   Plan       : micro-batches; each micro-batch is a list of groups in ascending rank order;
//                a group is an aligned block of ranks [first_rank, first_rank + cp_size) that
//                all process the same samples, in pack order.
//
// Every rank of a group holds the same samples in the same order by construction of this type;
// planners that think per rank (Megatron's lists of lists) convert with plan_from_rank_lists(),
// which rejects inconsistent lists. validate() checks everything else (DESIGN.md "Plan validity").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dcp::plan {

struct Batch {
  std::vector<int64_t> lengths;  // [G] tokens per sample; sample id = index
  int64_t size() const { return static_cast<int64_t>(lengths.size()); }
};

struct PlanConfig {
  int dp = 1;
  int cp = 1;                         // static CP size (for dynamic planners only fixes N = dp*cp)
  int64_t max_seqlen_per_rank = 0;    // M, tokens per rank
  int min_cp = 1;                     // smallest dynamic CP group size
  std::optional<int> vpp_group;       // micro-batch count must be a multiple of this
  std::optional<int64_t> max_seqlen;  // padded length for bshd; upper bound on lengths otherwise
  int pool() const { return dp * cp; }
};

struct Group {
  int first_rank = 0;
  int cp_size = 1;
  std::vector<int> samples;  // sample ids in pack order
  int last_rank() const { return first_rank + cp_size - 1; }
};

struct MicroBatch {
  std::vector<Group> groups;  // ascending first_rank, disjoint, covering [0, N)
};

struct Plan {
  std::string planner;
  PlanConfig config;
  bool dynamic = true;  // false: static CP, every group has size config.cp
  // > 0: every sample runs padded to this length (bshd's [b, s, h, d] layout): compute, memory
  // and communication are charged on max(L, pad_to) and the executor packs each sample into
  // max(L, pad_to) rows; useful FLOPs stay on the real lengths. 0 = packed THD, each sample
  // padded only to a multiple of 2*cp.
  int64_t pad_to = 0;
  std::vector<MicroBatch> microbatches;
  // What a reader of this plan's numbers should know that the plan does not show (e.g. a port's
  // deviation from its upstream on this batch); empty for most plans. Not part of Megatron's
  // format (plan_json): `dcpbench run` carries it into the results row's "note".
  std::string note;
};

// Per-rank view used by Megatron's scheduler: rank_lists[mb][rank] = sample ids in pack order.
using RankLists = std::vector<std::vector<std::vector<int>>>;

// A block of consecutive ranks [first_rank, first_rank + size).
struct RankRun {
  int first_rank = 0;
  int size = 0;
};

// The one "consecutive equal rank lists -> groups" rule: splits ranks [0, n) into maximal runs
// in which same(r - 1, r) holds for every rank r after the first. Used wherever a per-rank view
// (Megatron's lists, VPP alignment's list handles, dcp's per-rank owners) becomes groups.
template <typename Same>
std::vector<RankRun> rank_runs(int n, Same&& same) {
  std::vector<RankRun> runs;
  for (int r = 0; r < n;) {
    int e = r + 1;
    while (e < n && same(e - 1, e)) ++e;
    runs.push_back(RankRun{r, e - r});
    r = e;
  }
  return runs;
}

// Groups of one micro-batch given as per-rank lists: one group per run of equal lists.
std::vector<Group> groups_of_rank_lists(const std::vector<std::vector<int>>& ranks);

// Why `lists` (one micro-batch per entry, n ranks each) cannot be read as groups, or nullopt:
// a micro-batch without n rank lists, an empty rank (Megatron's runtime would crash on it, §7k),
// or a sample id on two runs of ranks (different lists, or the same list on non-contiguous
// ranks) or twice in one list. One line naming the micro-batch, the sample and the ranks.
std::optional<std::string> rank_lists_violation(const RankLists& lists, int n);

// Builds a Plan from per-rank lists: consecutive ranks holding identical lists form one group.
// Throws dcp::Error with rank_lists_violation's message if the lists cannot be read as groups;
// validate() checks everything else (alignment, sizes, budget, every sample exactly once).
Plan plan_from_rank_lists(const RankLists& lists, const std::string& planner, const PlanConfig& config);

// A plan in Megatron's format, which does not say which planner made it: plan_from_rank_lists
// (planner "megatron-format"), read as a static-CP plan (rule 4's static sizes) when every group
// has config.cp ranks, no dynamic group of that size exists (cp is not a power of two and not the
// whole pool) and min_cp is 1 (as a static planner requires): `packing` or `bshd` at cp 3
// (helper-48's review; the CLI's `check` had read them as dynamic until helper-84's trial). Any
// other plan is read as dynamic, as Megatron's scheduler makes them. One reading for `dcpbench
// check` and the Python module's find_violation.
Plan plan_from_megatron_format(const RankLists& lists, const PlanConfig& config);

// Inverse of plan_from_rank_lists.
RankLists rank_lists_of(const Plan& plan);

}  // namespace dcp::plan
