// See converge_runs.h.
#include "harness/converge_runs.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace dcp::harness::converge_detail {

plan::PlanConfig step_config(const ConvergeScenario& s, const StepSpec& spec) {
  plan::PlanConfig pc;
  pc.dp = s.dp;
  pc.cp = s.cp;
  pc.max_seqlen_per_rank = s.max_seqlen_per_rank;
  pc.max_seqlen = s.max_seqlen;
  pc.vpp_group = spec.vpp_group;
  return pc;
}

StepList step_list(const TextCorpus& corpus, const ConvergeScenario& s, int main_steps) {
  StepList l;
  for (int i = 0; i < main_steps; ++i) {
    l.batches.push_back(step_batch(corpus, s, i));
    l.specs.push_back({"main", std::nullopt});
  }
  for (size_t e = 0; e < s.edge_cases.size(); ++e) {
    l.batches.push_back(edge_batch(corpus, s.edge_cases[e].lengths, static_cast<int>(97 * (e + 1))));
    l.specs.push_back({"edge:" + s.edge_cases[e].name, s.edge_cases[e].vpp_group});
  }
  return l;
}

plan::Plan reference_plan(const exec::GlobalBatch& b) {
  plan::Plan p;
  p.planner = "reference";
  p.dynamic = false;
  p.config.dp = 1;
  p.config.cp = 1;
  int64_t tokens = 0;
  plan::Group g{0, 1, {}};
  for (size_t i = 0; i < b.samples.size(); ++i) {
    g.samples.push_back(static_cast<int>(i));
    tokens += static_cast<int64_t>(b.samples[i].size());
  }
  p.config.max_seqlen_per_rank = std::max<int64_t>(tokens, 1);
  p.microbatches.push_back({{g}});
  return p;
}

json trace_json(const Trace& t) {
  json j;
  j["losses"] = t.loss;
  j["mtp_losses"] = t.mtp_loss;
  j["grad_norms"] = t.grad_norm;
  j["microbatches"] = t.microbatches;
  json hashes = json::array();  // FNV-1a of each step's reduced gradient (bitwise comparisons)
  for (uint64_t h : t.grad_hash) {
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
    hashes.push_back(hex);
  }
  j["grad_hashes"] = hashes;
  // CP groups per size, summed over the steps (groups, not samples: a plan summary's
  // cp_size_histogram counts the samples on each size).
  json sizes = json::object();
  for (const auto& [k, n] : t.group_sizes) sizes[std::to_string(k)] = n;
  j["cp_sizes"] = sizes;
  return j;
}

int first_bitwise_difference(const Trace& a, const Trace& b, int n) {
  for (int i = 0; i < n; ++i) {
    if (std::memcmp(&a.loss[i], &b.loss[i], sizeof(double)) != 0 || a.grad_hash[i] != b.grad_hash[i] ||
        std::memcmp(&a.mtp_loss[i], &b.mtp_loss[i], sizeof(double)) != 0)
      return i;
  }
  return -1;
}

json planning_json(const Trace& t, plan::PlanningMode mode) {
  json j;
  j["mode"] = mode == plan::PlanningMode::async ? "async" : "sync";
  std::vector<double> plan_ms, wait_ms;
  double plan_total = 0, wait_total = 0, hidden_total = 0;
  for (size_t i = 0; i < t.plan_s.size(); ++i) {
    plan_ms.push_back(1e3 * t.plan_s[i]);
    wait_ms.push_back(1e3 * t.wait_s[i]);
    plan_total += 1e3 * t.plan_s[i];
    wait_total += 1e3 * t.wait_s[i];
    hidden_total += 1e3 * plan::PlanTiming{t.plan_s[i], t.wait_s[i]}.hidden_s();
  }
  j["plan_ms"] = plan_ms;
  j["wait_ms"] = wait_ms;
  j["plan_ms_total"] = plan_total;
  j["wait_ms_total"] = wait_total;
  j["hidden_ms_total"] = hidden_total;
  j["how"] = std::string("measured: wall clock (steady_clock) on this machine, rank 0; plan = the planner's call ") +
             "(plus plan::validate), wait = time the training loop blocked for the plan (exposed), " +
             "hidden = plan - wait per step (" +
             (mode == plan::PlanningMode::async ? "planned one step ahead on a background thread)"
                                                : "--sync-planning: planned inside the loop, nothing hidden)");
  return j;
}

}  // namespace dcp::harness::converge_detail
