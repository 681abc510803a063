// See plan_json.h.
#include "plan/plan_json.h"

#include "core/error.h"
#include "plan/summary.h"

#include <nlohmann/json.hpp>

namespace dcp::plan {

nlohmann::json plan_to_json(const Plan& plan, const Batch& batch, const nlohmann::json& summary_extra) {
  using nlohmann::json;
  const PlanConfig& c = plan.config;
  json j;
  j["schema"] = "dcpbench.plan.v1";
  j["planner"] = plan.planner;
  j["dp"] = c.dp;
  j["cp"] = c.cp;
  j["pool"] = c.pool();
  j["max_seqlen_per_rank"] = c.max_seqlen_per_rank;
  j["min_cp"] = c.min_cp;
  j["vpp_group"] = c.vpp_group ? json(*c.vpp_group) : json(nullptr);
  json mbs = json::array();
  for (const auto& mb : plan.microbatches) {
    json groups = json::array();
    for (const auto& g : mb.groups) {
      json ranks = json::array();
      for (int r = g.first_rank; r <= g.last_rank(); ++r) ranks.push_back(r);
      groups.push_back({{"ranks", ranks}, {"cp_size", g.cp_size}, {"samples", g.samples}});
    }
    mbs.push_back({{"groups", groups}});
  }
  j["microbatches"] = mbs;

  const PlanStats st = plan_stats(plan, batch);
  json summary = summary_extra.is_object() ? summary_extra : json::object();
  summary["samples"] = batch.size();
  int64_t tokens = 0;
  for (auto L : batch.lengths) tokens += L;
  summary["tokens"] = tokens;
  summary["microbatch_count"] = plan.microbatches.size();
  summary["dynamic"] = plan.dynamic;  // false: static CP, every group has size cp
  if (plan.pad_to > 0) summary["pad_to"] = plan.pad_to;  // every sample padded to this length
  json per_mb = json::array();
  double max_w = 0;
  for (const auto& ms : st.microbatches) {
    per_mb.push_back({{"max_rank_workload", ms.max_rank_workload},
                      {"mean_rank_workload", ms.mean_rank_workload},
                      {"max_rank_tokens", ms.max_rank_tokens},
                      {"mean_rank_tokens", ms.mean_rank_tokens},
                      {"groups", ms.groups}});
    max_w = std::max(max_w, ms.max_rank_workload);
  }
  summary["per_microbatch"] = per_mb;
  // Critical path in Megatron's cost unit (sum L^2/k): the sum over micro-batches of the
  // busiest rank, against the perfectly balanced sum L^2 / N.
  double crit = 0;
  for (const auto& ms : st.microbatches) crit += ms.max_rank_workload;
  summary["workload_critical_path"] = crit;
  summary["workload_balanced_bound"] = c.pool() > 0 ? st.total_workload / c.pool() : 0.0;
  json hist = json::object();
  for (const auto& [k, count] : st.cp_size_histogram) hist[std::to_string(k)] = count;
  summary["cp_size_histogram"] = hist;
  j["summary"] = summary;
  return j;
}

Plan plan_from_json(const nlohmann::json& j) {
  try {
    Plan p;
    p.planner = j.at("planner").get<std::string>();
    p.config.dp = j.at("dp").get<int>();
    p.config.cp = j.at("cp").get<int>();
    p.config.max_seqlen_per_rank = j.at("max_seqlen_per_rank").get<int64_t>();
    p.config.min_cp = j.value("min_cp", 1);
    if (j.contains("vpp_group") && !j["vpp_group"].is_null()) p.config.vpp_group = j["vpp_group"].get<int>();
    p.dynamic = j.contains("summary") ? j["summary"].value("dynamic", true) : true;
    p.pad_to = j.contains("summary") ? j["summary"].value("pad_to", int64_t{0}) : 0;
    for (const auto& mb : j.at("microbatches")) {
      MicroBatch m;
      for (const auto& g : mb.at("groups")) {
        Group gr;
        const auto& ranks = g.at("ranks");
        DCP_REQUIRE(!ranks.empty(), "plan group with no ranks");
        gr.first_rank = ranks.front().get<int>();
        gr.cp_size = g.at("cp_size").get<int>();
        gr.samples = g.at("samples").get<std::vector<int>>();
        m.groups.push_back(std::move(gr));
      }
      p.microbatches.push_back(std::move(m));
    }
    return p;
  } catch (const nlohmann::json::exception& e) {
    throw InputError(detail::concat("plan JSON: ", e.what()));
  }
}

}  // namespace dcp::plan
