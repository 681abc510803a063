// plan_from_rank_lists / rank_lists_of: conversion between Megatron's per-rank lists and groups.
#include "plan/plan.h"

#include "core/error.h"

namespace dcp::plan {

Plan plan_from_rank_lists(const RankLists& lists, const std::string& planner, const PlanConfig& config) {
  Plan plan;
  plan.planner = planner;
  plan.config = config;
  const int n = config.pool();
  for (size_t m = 0; m < lists.size(); ++m) {
    const auto& ranks = lists[m];
    DCP_CHECK(static_cast<int>(ranks.size()) == n, "micro-batch ", m, " has ", ranks.size(),
              " rank lists, pool has ", n);
    MicroBatch mb;
    int r = 0;
    while (r < n) {
      DCP_CHECK(!ranks[r].empty(), "micro-batch ", m, ": rank ", r, " is empty");
      int e = r + 1;
      while (e < n && ranks[e] == ranks[r]) ++e;
      mb.groups.push_back(Group{r, e - r, ranks[r]});
      r = e;
    }
    plan.microbatches.push_back(std::move(mb));
  }
  return plan;
}

RankLists rank_lists_of(const Plan& plan) {
  const int n = plan.config.pool();
  RankLists out;
  out.reserve(plan.microbatches.size());
  for (const auto& mb : plan.microbatches) {
    std::vector<std::vector<int>> ranks(n);
    for (const auto& g : mb.groups) {
      for (int r = g.first_rank; r < g.first_rank + g.cp_size && r < n; ++r) ranks[r] = g.samples;
    }
    out.push_back(std::move(ranks));
  }
  return out;
}

}  // namespace dcp::plan
