// plan_from_rank_lists / rank_lists_of: conversion between Megatron's per-rank lists and groups.
#include "plan/plan.h"

#include "core/error.h"
#include "plan/geometry.h"

#include <algorithm>
#include <utility>

namespace dcp::plan {

using detail::concat;

std::vector<Group> groups_of_rank_lists(const std::vector<std::vector<int>>& ranks) {
  std::vector<Group> out;
  for (const RankRun& run : rank_runs(static_cast<int>(ranks.size()), [&](int a, int b) { return ranks[a] == ranks[b]; }))
    out.push_back(Group{run.first_rank, run.size, ranks[run.first_rank]});
  return out;
}

std::optional<std::string> rank_lists_violation(const RankLists& lists, int n) {
  for (size_t m = 0; m < lists.size(); ++m) {
    const auto& ranks = lists[m];
    if (static_cast<int>(ranks.size()) != n)
      return concat("micro-batch ", m, " has ", ranks.size(), " rank lists, the pool has ", n, " ranks");
    for (int r = 0; r < n; ++r) {
      if (ranks[r].empty()) return concat("micro-batch ", m, ": rank ", r, " is empty");
    }
    const auto runs = rank_runs(n, [&](int a, int b) { return ranks[a] == ranks[b]; });
    std::vector<std::pair<int, size_t>> ids;  // (sample id, run index), each run's list once
    for (size_t i = 0; i < runs.size(); ++i)
      for (int s : ranks[runs[i].first_rank]) ids.emplace_back(s, i);
    std::stable_sort(ids.begin(), ids.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t i = 1; i < ids.size(); ++i) {
      if (ids[i].first != ids[i - 1].first) continue;
      const RankRun& a = runs[ids[i - 1].second];
      const RankRun& b = runs[ids[i].second];
      if (ids[i].second == ids[i - 1].second)
        return concat("micro-batch ", m, ": sample ", ids[i].first, " appears twice in the list of ranks ",
                      a.first_rank, "..", a.first_rank + a.size - 1);
      return concat("micro-batch ", m, ": sample ", ids[i].first, " is on ranks ", a.first_rank, "..",
                    a.first_rank + a.size - 1, " and on ranks ", b.first_rank, "..", b.first_rank + b.size - 1,
                    " with ", ranks[a.first_rank] == ranks[b.first_rank] ? "the same list on non-contiguous ranks"
                                                                          : "different lists",
                    " (a sample must sit on one block of consecutive ranks that hold the same list)");
    }
  }
  return std::nullopt;
}

Plan plan_from_rank_lists(const RankLists& lists, const std::string& planner, const PlanConfig& config) {
  if (auto v = rank_lists_violation(lists, config.pool())) throw Error(*v);
  Plan plan;
  plan.planner = planner;
  plan.config = config;
  plan.microbatches.reserve(lists.size());
  for (const auto& ranks : lists) plan.microbatches.push_back(MicroBatch{groups_of_rank_lists(ranks)});
  return plan;
}

Plan plan_from_megatron_format(const RankLists& lists, const PlanConfig& config) {
  Plan p = plan_from_rank_lists(lists, "megatron-format", config);
  const bool all_cp = std::all_of(p.microbatches.begin(), p.microbatches.end(), [&](const MicroBatch& mb) {
    return std::all_of(mb.groups.begin(), mb.groups.end(), [&](const Group& g) { return g.cp_size == config.cp; });
  });
  if (all_cp && !p.microbatches.empty() && config.min_cp == 1 && !group_size_exists(config.pool(), config.cp))
    p.dynamic = false;
  return p;
}

RankLists rank_lists_of(const Plan& plan) {
  const int n = plan.config.pool();
  RankLists out;
  out.reserve(plan.microbatches.size());
  for (const auto& mb : plan.microbatches) {
    std::vector<std::vector<int>> ranks(n);
    for (const auto& g : mb.groups) {
      for (int r = std::max(0, g.first_rank); r < g.first_rank + g.cp_size && r < n; ++r) ranks[r] = g.samples;
    }
    out.push_back(std::move(ranks));
  }
  return out;
}

}  // namespace dcp::plan
