// Aggregation and the fixed-width results table (see report.h).
#include "harness/report.h"

#include <cstdio>
#include <map>
#include <set>

namespace dcp::harness {
namespace {

using nlohmann::json;

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string pad(const std::string& s, size_t w, bool right = true) {
  if (s.size() >= w) return s;
  return right ? std::string(w - s.size(), ' ') + s : s + std::string(w - s.size(), ' ');
}

const json* scenario_facts(const ResultsFile& r, const std::string& name) {
  for (const auto& s : r.scenarios)
    if (s.is_object() && s.value("name", "") == name) return &s;
  return nullptr;
}

// Published number for one strategy as short text, e.g. "195.88 TF" or "1.285x" (+ ms).
std::string published_text(const json& pv) {
  std::vector<std::string> parts;
  if (pv.contains("tflops_per_gpu") && pv["tflops_per_gpu"].is_number())
    parts.push_back(fmt("%.2f TF", pv["tflops_per_gpu"].get<double>()));
  if (pv.contains("speedup_vs_packing") && pv["speedup_vs_packing"].is_number())
    parts.push_back(fmt("%.3fx", pv["speedup_vs_packing"].get<double>()));
  if (pv.contains("step_time_ms") && pv["step_time_ms"].is_number())
    parts.push_back(fmt("%.1f ms", pv["step_time_ms"].get<double>()));
  std::string t;
  for (const auto& p : parts) {
    if (!t.empty()) t.append(" ");
    t.append(p);
  }
  return t;
}

// One line per published value: ours (simulated) beside theirs, and our/their ratio of speedups.
void print_published_comparison(std::ostream& os, const ResultsFile& r, const std::vector<Aggregate>& aggs) {
  bool header = false;
  for (const auto& facts : r.scenarios) {
    if (!facts.is_object() || !facts.contains("published")) continue;
    const std::string sc = facts.value("name", "");
    for (const auto& pv : facts["published"].value("values", json::array())) {
     // A published dynamic-CP number is also set beside our own solver, dcp: NVIDIA's
     // "Dynamic CP" is a pipeline-aware prototype, closer to dcp than to megatron-dev.
     const std::string published_strategy = pv.value("strategy", "");
     std::vector<std::string> ours{published_strategy};
     if (published_strategy != "packing" && published_strategy != "dcp") ours.push_back("dcp");
     for (const std::string& st : ours) {
      const Aggregate* a = nullptr;
      for (const auto& x : aggs)
        if (x.scenario == sc && x.strategy == st) a = &x;
      if (!a) continue;
      if (!header) {
        os << "\n## Ours (simulated) beside published numbers (measured by others, on their unpublished setups)\n"
           << pad("scenario", 26, false) << pad("strategy", 16, false) << pad("TFLOPS/GPU", 13) << pad("published", 13)
           << pad("step time", 13) << pad("published", 13) << pad("speedup", 13) << pad("published", 13)
           << pad("ours/theirs", 13) << "\n"
           << pad("", 26, false) << pad("", 16, false) << pad("(ours)", 13) << pad("(TFLOPS)", 13)
           << pad("(ours, ms)", 13) << pad("(ms)", 13) << pad("(ours, x pk)", 13) << pad("(x packing)", 13) << pad("(speedup)", 13) << "\n";
        header = true;
      }
      std::string line = pad(sc, 26, false) + pad(st, 16, false);
      line += pad(a->valid() ? fmt("%.2f", a->tflops_per_gpu) : "invalid", 13);
      line += pad(pv.contains("tflops_per_gpu") ? fmt("%.2f", pv["tflops_per_gpu"].get<double>()) : "-", 13);
      line += pad(a->valid() ? fmt("%.1f", 1e3 * a->step_time_s) : "-", 13);
      line += pad(pv.contains("step_time_ms") ? fmt("%.1f", pv["step_time_ms"].get<double>()) : "-", 13);
      line += pad(a->speedup_vs_packing ? fmt("%.3f", *a->speedup_vs_packing) : "-", 13);
      const bool has_sp = pv.contains("speedup_vs_packing") && pv["speedup_vs_packing"].is_number();
      line += pad(has_sp ? fmt("%.3f", pv["speedup_vs_packing"].get<double>()) : "-", 13);
      line += pad(has_sp && a->speedup_vs_packing ? fmt("%.3f", *a->speedup_vs_packing / pv["speedup_vs_packing"].get<double>()) : "-", 13);
      os << line << "\n";
     }
    }
  }
}

}  // namespace

std::vector<Aggregate> aggregate(const ResultsFile& results) {
  std::vector<std::pair<std::string, std::string>> order;
  std::map<std::pair<std::string, std::string>, std::vector<const ResultRow*>> by_key;
  std::map<std::pair<std::string, int>, const ResultRow*> packing;  // (scenario, step)
  for (const auto& r : results.rows) {
    const auto key = std::make_pair(r.scenario, r.strategy);
    if (!by_key.count(key)) order.push_back(key);
    by_key[key].push_back(&r);
    if (r.strategy == "packing" && r.plan_valid) packing[{r.scenario, r.step}] = &r;
  }
  std::vector<Aggregate> out;
  for (const auto& key : order) {
    Aggregate a;
    a.scenario = key.first;
    a.strategy = key.second;
    double time_sum = 0, tflops_time = 0, tokens_time = 0, pack_sum = 0, this_sum = 0;
    int paired = 0;
    for (const ResultRow* r : by_key[key]) {
      ++a.steps;
      if (a.source.empty()) a.source = r->source;
      if (!r->plan_valid) {
        if (a.invalid_steps++ == 0) a.first_error = r->error;
        continue;
      }
      time_sum += r->step_time_s;
      tflops_time += r->tflops_per_gpu * r->step_time_s;
      tokens_time += r->tokens_per_s_per_gpu * r->step_time_s;
      a.microbatches += r->microbatches;
      a.balance += r->balance;
      a.bubble_frac += r->bubble_frac;
      a.comm_frac += r->comm_frac;
      a.plan_efficiency += r->plan_efficiency;
      a.solve_ms += r->solve_ms;
      auto p = packing.find({r->scenario, r->step});
      if (p != packing.end()) {
        pack_sum += p->second->step_time_s;
        this_sum += r->step_time_s;
        ++paired;
      }
    }
    const int valid = a.steps - a.invalid_steps;
    if (valid > 0) {
      a.step_time_s = time_sum / valid;
      a.tflops_per_gpu = time_sum > 0 ? tflops_time / time_sum : 0;
      a.tokens_per_s_per_gpu = time_sum > 0 ? tokens_time / time_sum : 0;
      a.microbatches /= valid;
      a.balance /= valid;
      a.bubble_frac /= valid;
      a.comm_frac /= valid;
      a.plan_efficiency /= valid;
      a.solve_ms /= valid;
    }
    if (paired > 0 && this_sum > 0) a.speedup_vs_packing = pack_sum / this_sum;
    out.push_back(a);
  }
  return out;
}

void print_table(std::ostream& os, const ResultsFile& results) {
  const auto aggs = aggregate(results);
  std::set<std::string> sources;
  for (const auto& a : aggs) sources.insert(a.source);
  const json& ctx = results.context;
  os << "# How obtained: ";
  bool first = true;
  for (const auto& s : sources) {
    os << (first ? "" : ", ") << s;
    first = false;
  }
  os << "\n#   simulated = discrete-event simulator (impl/sim) over the cost model \""
     << ctx.value("cost_model", "?") << "\" with calibration \"" << ctx.value("calibration", "?")
     << "\"; nothing here was measured on a GPU.\n"
     << "#   TFLOPS/GPU counts useful FLOPs only (Megatron formula on the real lengths, no recompute,"
     << " no padding), so ratios between strategies are speed ratios.\n"
     << "#   solve (ms, host) is the one measured column: the planner's wall-clock time on this host's CPU.\n"
     << "#   git " << ctx.value("git_sha", "unknown") << ", " << ctx.value("date", "") << "\n";

  // Column widths: strategy, then numeric columns.
  const std::vector<std::pair<std::string, std::string>> cols = {
      {"TFLOPS/GPU", "(useful)"}, {"speedup", "(x packing)"}, {"step time", "(s)"},
      {"micro-", "batches"},     {"balance", "(max/mean)"},  {"bubble", "(% step)"},
      {"comm", "(% step)"},      {"plan eff", "(bound/t)"},  {"solve", "(ms, host)"}};
  const size_t sw = 17, cw = 12;
  std::string scenario;
  for (size_t i = 0; i < aggs.size(); ++i) {
    const Aggregate& a = aggs[i];
    const json* facts = scenario_facts(results, a.scenario);
    if (a.scenario != scenario) {
      scenario = a.scenario;
      os << "\n## " << scenario;
      if (facts) {
        os << ": " << facts->value("gpus", 0) << " GPUs (TP" << facts->value("tp", 0) << " PP"
           << facts->value("pp", 0) << " CP" << facts->value("cp", 0) << " DP" << facts->value("dp", 0)
           << ", pool " << facts->value("pool", 0) << "), " << facts->value("model", std::string("?"))
           << ", global batch " << facts->value("global_batch", 0) << ", " << facts->value("dataset", std::string("?"))
           << ", " << a.steps << " step" << (a.steps == 1 ? "" : "s");
      }
      os << "\n";
      std::string h1 = pad("strategy", sw, false), h2 = pad("", sw, false);
      for (const auto& c : cols) {
        h1 += pad(c.first, cw);
        h2 += pad(c.second, cw);
      }
      const bool has_pub = facts && facts->contains("published");
      if (has_pub) {
        h1 += "   published (not ours)";
        h2 += "   (their setup, see below)";
      }
      os << h1 << "\n" << h2 << "\n";
    }
    std::string line = pad(a.strategy, sw, false);
    if (!a.valid()) {
      line += "   INVALID PLAN (" + std::to_string(a.invalid_steps) + "/" + std::to_string(a.steps) +
              " steps): " + a.first_error;
    } else {
      line += pad(fmt("%.2f", a.tflops_per_gpu), cw);
      line += pad(a.speedup_vs_packing ? fmt("%.3f", *a.speedup_vs_packing) : "-", cw);
      line += pad(fmt("%.4f", a.step_time_s), cw);
      line += pad(fmt("%.1f", a.microbatches), cw);
      line += pad(fmt("%.3f", a.balance), cw);
      line += pad(fmt("%.1f", 100.0 * a.bubble_frac), cw);
      line += pad(fmt("%.1f", 100.0 * a.comm_frac), cw);
      line += pad(fmt("%.3f", a.plan_efficiency), cw);
      line += pad(fmt("%.1f", a.solve_ms), cw);
    }
    if (facts && facts->contains("published")) {
      for (const auto& pv : (*facts)["published"].value("values", json::array()))
        if (pv.value("strategy", "") == a.strategy) line += "   " + published_text(pv);
    }
    os << line << "\n";
    const bool last_of_scenario = i + 1 == aggs.size() || aggs[i + 1].scenario != scenario;
    if (last_of_scenario && facts && facts->contains("published")) {
      const json& p = (*facts)["published"];
      os << "  published: " << p.value("source", "") << "\n";
      if (!p.value("note", "").empty()) os << "  note: " << p.value("note", "") << "\n";
    }
  }
  print_published_comparison(os, results, aggs);
  os.flush();
}

}  // namespace dcp::harness
