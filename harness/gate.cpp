// Regression gate (see gate.h).
#include "harness/gate.h"

#include "core/error.h"
#include "core/json_io.h"
#include "harness/aggregate.h"

#include <cmath>
#include <cstdio>
#include <map>

namespace dcp::harness {
namespace {

std::string fmt2(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

// The scenario facts (results "scenarios", runner.cpp scenario_facts) that set the simulated
// numbers: a baseline run with another global batch or layout is not the same measurement, and a
// "97% regression" (or a gain) against it says nothing. Notes, sources and file names may change.
constexpr const char* kConfigFacts[] = {
    "model", "dataset", "gpus", "tp", "pp", "cp", "vpp", "gpus_per_node", "nics_per_node", "hardware",
    "memory_gib", "global_batch", "max_seqlen", "max_seqlen_per_rank", "min_cp", "recompute", "precision",
    "seed", "attention_backend", "distributed_optimizer", "grad_reduce", "overlap_grad_reduce",
    "gradient_accumulation_fusion", "data_path"};

std::map<std::string, const nlohmann::json*> facts_by_name(const ResultsFile& f) {
  std::map<std::string, const nlohmann::json*> out;
  if (f.scenarios.is_array())
    for (const auto& s : f.scenarios)
      if (s.is_object() && s.contains("name") && s["name"].is_string()) out[s["name"].get<std::string>()] = &s;
  return out;
}

// "" when the two runs of `scenario` share every config fact both files record, else what differs.
std::string config_change(const std::map<std::string, const nlohmann::json*>& base,
                          const std::map<std::string, const nlohmann::json*>& cur, const std::string& scenario) {
  const auto b = base.find(scenario), c = cur.find(scenario);
  if (b == base.end() || c == cur.end()) return "";
  for (const char* k : kConfigFacts) {
    if (!b->second->contains(k) || !c->second->contains(k)) continue;
    const nlohmann::json &x = (*b->second)[k], &y = (*c->second)[k];
    if (x != y) return std::string(k) + " " + json_excerpt(x, 40) + " -> " + json_excerpt(y, 40);
  }
  return "";
}

}  // namespace

GateReport run_gate(const ResultsFile& baseline, const ResultsFile& current, double tolerance) {
  DCP_REQUIRE(tolerance >= 0 && tolerance < 1, "--tolerance=", tolerance, " is not in [0, 1)");
  const auto base = aggregate(baseline);
  const auto cur = aggregate(current);
  std::map<std::pair<std::string, std::string>, const Aggregate*> cur_by_key;
  for (const auto& a : cur) cur_by_key[{a.scenario, a.label()}] = &a;
  GateReport report;
  const auto base_facts = facts_by_name(baseline), cur_facts = facts_by_name(current);
  // The largest plan efficiency of each current pair's steps (the aggregate is their mean: one
  // step at 1.03 beside one at 0.90 would average under 1). Simulated steps with numbers only.
  std::map<std::pair<std::string, std::string>, double> max_eff;
  for (const auto& r : current.rows) {
    if (!r.has_metrics() || r.source.rfind("measured:", 0) == 0) continue;
    double& m = max_eff[{r.scenario, strategy_label(r.strategy, r.setting)}];
    m = std::isnan(r.plan_efficiency) || std::isnan(m) ? std::nan("") : std::max(m, r.plan_efficiency);
  }
  const auto efficiency_above_one = [&](const std::string& scenario, const std::string& label) -> std::string {
    const auto it = max_eff.find({scenario, label});
    if (it == max_eff.end() || it->second <= kGateMaxPlanEfficiency) return "";
    return "plan efficiency " + json_excerpt(nlohmann::json(it->second), 24) +
           " in a step is above 1: the simulator's lower bound is broken";
  };
  std::map<std::pair<std::string, std::string>, bool> seen;
  for (const auto& b : base) {
    seen[{b.scenario, b.label()}] = true;
    GateFinding f{b.scenario, b.label(), false, ""};
    auto it = cur_by_key.find({b.scenario, b.label()});
    if (it == cur_by_key.end()) {
      f.failed = true;
      f.message = "missing from the current results";
    } else {
      const Aggregate& c = *it->second;
      const std::string changed = config_change(base_facts, cur_facts, b.scenario);
      if (!changed.empty()) {
        f.failed = true;
        f.message = "not comparable: the scenario changed (" + changed + "); regenerate the baseline";
      } else if (c.measured() != b.measured()) {
        // A measured rank share's rate and a simulated step's are different quantities.
        f.failed = true;
        f.message = "not comparable: " + b.source + " in the baseline, " + c.source + " now";
      } else if (c.steps != b.steps) {
        // Different step counts average TFLOPS/GPU over different batches: not comparable.
        f.failed = true;
        f.message = "ran " + std::to_string(c.steps) + " steps, the baseline " + std::to_string(b.steps) +
                    " (run the same suite as the baseline)";
      } else if (c.invalid_steps > 0) {
        f.failed = true;
        f.message = "plan invalid in " + std::to_string(c.invalid_steps) + "/" + std::to_string(c.steps) +
                    " steps: " + c.first_error;
      } else if (const std::string e = efficiency_above_one(c.scenario, c.label()); !e.empty()) {
        // The lower bound is a bound on every valid plan (sim/simulator.h): above 1 it is broken.
        f.failed = true;
        f.message = e;
      } else if (c.oom_steps > 0 && b.valid()) {
        f.failed = true;
        f.message = "out of memory in " + std::to_string(c.oom_steps) + "/" + std::to_string(c.steps) + " steps (peak " +
                    fmt2(c.peak_memory_gib) + " GiB/GPU)";
      } else if (!c.valid()) {
        f.message = b.invalid_steps > 0 ? "out of memory (the baseline's plan was invalid)"
                                        : "still out of memory (as in the baseline)";
      } else if (!b.valid()) {
        f.message = std::string(b.invalid_steps > 0 ? "valid now (baseline plan was invalid), "
                                                    : "fits now (baseline was out of memory), ") +
                    fmt2(c.tflops_per_gpu) + " TFLOPS/GPU";
      } else {
        const double rel = b.tflops_per_gpu > 0 ? c.tflops_per_gpu / b.tflops_per_gpu - 1.0 : 0.0;
        const bool dropped = !(c.tflops_per_gpu >= b.tflops_per_gpu * (1.0 - tolerance));  // NaN fails
        const bool rose = c.tflops_per_gpu > b.tflops_per_gpu * (1.0 + tolerance);
        f.failed = dropped || rose;
        f.message = std::string(dropped ? "TFLOPS/GPU dropped " : rose ? "TFLOPS/GPU rose " : "TFLOPS/GPU ") +
                    fmt2(b.tflops_per_gpu) + " -> " + fmt2(c.tflops_per_gpu) + " (" + (rel >= 0 ? "+" : "") +
                    fmt2(100.0 * rel) + "%, tolerance " + (dropped ? "-" : rose ? "+" : "+-") + fmt2(100.0 * tolerance) + "%)";
        if (rose)
          f.message += ": a simulator that lost a cost term looks like this; if the gain is meant, regenerate the "
                       "baseline (ci/gate.sh --update) and say why in the commit";
        if (c.source != b.source) f.message += " [source changed: " + b.source + " -> " + c.source + "]";
      }
    }
    report.findings.push_back(f);
  }
  for (const auto& c : cur) {
    if (seen.count({c.scenario, c.label()})) continue;
    report.findings.push_back({c.scenario, c.label(), true,
                               "not in the baseline (a partial or stale baseline gates nothing here): regenerate "
                               "it with ci/gate.sh --update and commit it"});
  }
  return report;
}

}  // namespace dcp::harness
