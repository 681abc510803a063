// The fixed-width results table (see report.h).
#include "harness/report.h"

#include "core/text.h"
#include "harness/draws.h"
#include "harness/tune.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <tuple>
#include <set>

namespace dcp::harness {
namespace {

using nlohmann::json;

std::string pad(const std::string& s, size_t w, bool right = true) {
  if (s.size() >= w) return s;
  return right ? std::string(w - s.size(), ' ') + s : s + std::string(w - s.size(), ' ');
}

const json* scenario_facts(const ResultsFile& r, const std::string& name) {
  for (const auto& s : r.scenarios)
    if (s.is_object() && s.value("name", "") == name) return &s;
  return nullptr;
}

const Aggregate* find(const std::vector<Aggregate>& aggs, const std::string& sc, const std::string& st,
                      const std::string& setting) {
  for (const auto& a : aggs)
    if (a.scenario == sc && a.strategy == st && a.setting == setting) return &a;
  return nullptr;
}

std::string knobs_text(const json& k) {
  if (!k.is_object()) return "";
  std::string t;
  if (k.contains("max_seqlen_per_rank")) t += "M=" + std::to_string(k["max_seqlen_per_rank"].get<int64_t>());
  if (k.contains("cp")) t += std::string(t.empty() ? "" : " ") + "cp=" + std::to_string(k["cp"].get<int>());
  if (k.contains("vpp")) t += std::string(t.empty() ? "" : " ") + "vpp=" + std::to_string(k["vpp"].get<int>());
  return t;
}

std::string num_or_dash(const json& pv, const char* key, const char* f) {
  return pv.contains(key) && pv[key].is_number() ? fmt(f, pv[key].get<double>()) : "-";
}

// The draws section's spread (draws.h) of one scenario, setting and strategy: "speedup" or
// "trimmed_speedup"; null when the run had no --draws or no value for it.
const json* draw_spread(const ResultsFile& r, const std::string& sc, const std::string& setting, const std::string& st,
                        const char* which) {
  if (!r.draws.is_object() || !r.draws.contains("scenarios")) return nullptr;
  for (const auto& e : r.draws["scenarios"]) {
    if (e.value("scenario", std::string()) != sc) continue;
    const json* study = draw_study_at(e, setting);
    if (!study || !study->contains("strategies") || !(*study)["strategies"].contains(st)) return nullptr;
    const json& v = (*study)["strategies"][st];
    if (!v.contains(which) || !v[which].contains("p5") || !v[which].contains("p95")) return nullptr;
    return &v[which];
  }
  return nullptr;
}

// a's speedup over packing (same scenario and setting): its own speedup when packing is its
// reference, else packing's step time over a's (mean or 10%-trimmed mean, as aggregate.cpp forms
// speedups), when both have numbers on every step.
std::optional<double> speedup_over_packing(const std::vector<Aggregate>& aggs, const Aggregate& a, bool trimmed) {
  if (a.reference == "packing") return trimmed ? a.trimmed_speedup_vs_reference : a.speedup_vs_reference;
  const Aggregate* p = find(aggs, a.scenario, "packing", a.setting);
  if (!p || !p->valid() || !a.valid() || p->steps != a.steps) return std::nullopt;
  const double ours = trimmed ? a.trimmed_step_time_s : a.step_time_s;
  const double theirs = trimmed ? p->trimmed_step_time_s : p->step_time_s;
  if (!(ours > 0) || !(theirs > 0)) return std::nullopt;
  return theirs / ours;
}

// Ours (as published and tuned) beside the published numbers, absolute and relative; with --draws
// the 5th-95th percentile of our speedup over the draws.
void print_published_comparison(std::ostream& os, const ResultsFile& r, const std::vector<Aggregate>& aggs) {
  const bool with_draws = r.draws.is_object();
  bool header = false;
  for (const auto& facts : r.scenarios) {
    if (!facts.is_object() || !facts.contains("published")) continue;
    const std::string sc = facts.value("name", "");
    const bool trimmed = facts["published"].value("statistic", std::string("mean")) == "trimmed_mean_10";
    const json values = facts["published"].value("values", json::array());
    for (const auto& pv : values) {
      const std::string st = pv.value("strategy", "");
      for (const char* setting : {"published", "tuned"}) {
        const Aggregate* a = find(aggs, sc, st, setting);
        if (!a || a->measured()) continue;  // a rank's busy time is not a step time: no comparison
        if (!header) {
          os << "\n## Ours (simulated) beside published numbers (measured by others on their hardware)\n"
             << pad("scenario", 26, false) << pad("strategy (setting)", 26, false) << pad("TFLOPS/GPU", 12)
             << pad("published", 11) << pad("step time", 12) << pad("published", 11) << pad("speedup", 10)
             << pad("published", 11) << pad("ours/theirs", 12) << (with_draws ? pad("ours over", 14) : "") << "\n"
             << pad("", 26, false) << pad("", 26, false) << pad("(ours)", 12) << pad("(TFLOPS)", 11)
             << pad("(ours, ms)", 12) << pad("(ms)", 11) << pad("(ours)", 10) << pad("(speedup)", 11)
             << pad("(speedup)", 12) << (with_draws ? pad("draws p5-p95", 14) : "") << "\n";
          header = true;
        }
        std::string line = pad(sc, 26, false) + pad(a->label(), 26, false);
        line += pad(a->valid() ? fmt("%.1f", a->tflops_per_gpu) : (a->oom_steps ? "oom" : "invalid"), 12);
        line += pad(num_or_dash(pv, "tflops_per_gpu", "%.2f"), 11);
        // Reduced over steps the way theirs was (mean, or Megatron's 10%-trimmed mean: "t").
        const double ours_t = trimmed ? a->trimmed_step_time_s : a->step_time_s;
        // Theirs are over packing: ours on the same basis, from the packing rows of the same
        // scenario and setting when the file's reference is another strategy (a ratio over bshd
        // beside theirs over packing meant nothing, audit helper-48); "-" without them.
        const std::optional<double> ours_sp = speedup_over_packing(aggs, *a, trimmed);
        line += pad(a->valid() ? fmt(trimmed ? "%.1f t" : "%.1f", 1e3 * ours_t) : "-", 12);
        line += pad(num_or_dash(pv, "step_time_ms", trimmed ? "%.1f t" : "%.1f"), 11);
        line += pad(a->valid() && ours_sp ? fmt(trimmed ? "%.3f t" : "%.3f", *ours_sp) : "-", 10);
        const bool has_sp = pv.contains("speedup_vs_packing") && pv["speedup_vs_packing"].is_number();
        line += pad(has_sp ? fmt(trimmed ? "%.3f t" : "%.3f", pv["speedup_vs_packing"].get<double>()) : "-", 11);
        // Theirs were measured at the published setting: a tuned speedup over theirs is no model
        // error (it read 0.779 for megatron-dev (tuned) at 4 GPUs, helper-32).
        const bool same_setting = std::string(setting) == "published";
        line += pad(same_setting && has_sp && ours_sp ? fmt("%.3f", *ours_sp / pv["speedup_vs_packing"].get<double>()) : "-",
                    12);
        if (with_draws) {
          // The draws' speedups are over the file's reference: beside theirs only when that is packing.
          const json* sp = a->reference == "packing"
                               ? draw_spread(r, sc, setting, st, trimmed ? "trimmed_speedup" : "speedup")
                               : nullptr;
          line += pad(sp ? fmt("%.3f", (*sp)["p5"].get<double>()) + "-" + fmt("%.3f", (*sp)["p95"].get<double>()) : "-", 14);
        }
        os << line << "\n";
      }
    }
  }
  if (!header) return;
  std::set<std::string> hw;
  // Theirs: the published block's "hardware" where its source names it (a user's own measurements),
  // per scenario; the shipped sources do not (the scenarios' notes say so).
  std::vector<std::string> theirs;
  bool unpublished = false;
  for (const auto& facts : r.scenarios)
    if (facts.is_object() && facts.contains("published")) {
      hw.insert(facts.value("hardware", std::string("?")) + " (calibration " + facts.value("calibration", std::string("?")) +
                ")");
      const std::string h = facts["published"].value("hardware", std::string());
      if (h.empty()) unpublished = true;
      else theirs.push_back(facts.value("name", std::string("?")) + ": " + h);
    }
  os << "# t = 10%-trimmed mean over the steps, computed as Megatron's benchmark_dcp.sh does, where the published\n"
     << "#   number is one; speedups are over packing, as theirs (ours from the packing rows where the file's\n"
     << "#   reference is another strategy; - without them); ours/theirs = our speedup / their speedup, for the\n"
     << "#   published setting only (theirs were measured at it).\n";
  if (with_draws)
    os << "# ours over draws: 5th-95th percentile of our speedup (same statistic) over the draws with numbers of the\n"
       << "#   section below (" << r.draws.value("draws", 0) << " draws).\n";
  os
     << "# Hardware we assume for ours:";
  for (const auto& h : hw) os << " " << h;
  if (theirs.empty()) {
    os << "; theirs is in each scenario's published source (GPU type unpublished).\n";
  } else {
    os << "\n# Theirs, as published:";
    for (size_t i = 0; i < theirs.size(); ++i) os << (i ? "; " : " ") << theirs[i];
    if (unpublished) os << "; the other scenarios' GPU type is unpublished (see each one's published source)";
    os << ".\n";
  }
}

// The scenario's "data" facts (runner.cpp data_facts): what the dataset rules did to the batches.
void print_data_facts(std::ostream& os, const json& d) {
  const auto n = [&](const char* k) { return d.contains(k) && d[k].is_number_integer() ? d[k].get<int64_t>() : 0; };
  const int64_t samples = n("samples"), drawn = n("documents_drawn"), real = n("real_tokens");
  if (samples <= 0) return;
  os << "  data: " << samples << " samples from " << drawn << " documents over " << n("steps") << " steps";
  // samples_dropped counts whole documents, or, where documents are split, also their short last
  // chunks (data/dataset.h): a share of the documents drawn only without splits (helper-69).
  const int64_t dropped = n("samples_dropped"), split = n("documents_split");
  if (dropped > 0) {
    os << "; " << dropped << (split > 0 ? " documents or chunks" : " documents") << " dropped by the dataset rules";
    if (split == 0)
      os << " (" << fmt("%.1f%%", 100.0 * static_cast<double>(dropped) / static_cast<double>(std::max<int64_t>(drawn, 1)))
         << " of those drawn)";
  }
  if (split > 0) os << "; " << split << " documents split into chunks";
  if (n("chunks_discarded") > 0) os << "; " << n("chunks_discarded") << " chunks left over at the batch's end";
  os << "; mean sample " << fmt("%.0f", static_cast<double>(real) / static_cast<double>(samples))
     << " tokens, and padding (pad_multiple, min_seqlen) adds "
     << fmt("%.2f%%", 100.0 * static_cast<double>(n("padding_tokens")) / static_cast<double>(std::max<int64_t>(real, 1)))
     << "\n";
}

void print_study(std::ostream& os, const json& st, const std::string& title) {
  auto names = [&](const json& list, const char* sep) {
    std::string out;
    for (const auto& s : list) out += (out.empty() ? "" : sep) + s.get<std::string>();
    return out;
  };
  // The ranking of the strategies with numbers, then those without (it listed them after ">" too,
  // as if ranked).
  const json without = st.value("without_numbers", json::array());
  json ranked = json::array();
  for (const auto& s : st.value("ranking", json::array()))
    if (std::find(without.begin(), without.end(), s) == without.end()) ranked.push_back(s);
  os << "  " << title << ": ranking " << (st.value("ranking_changes", false) ? "CHANGES" : "unchanged")
     << " (nominal: " << names(ranked, " > ");
  if (!without.empty()) os << "; no numbers: " << names(without, ", ");
  if (st.contains("ranking_tolerance"))
    os << "; within " << fmt("%g", 100.0 * st["ranking_tolerance"].get<double>()) << "% of each other: tied";
  os << ")";
  if (st.value("ranking_changes", false)) os << "; changed by: " << names(st.value("ranking_changed_by", json::array()), " ");
  os << "\n";
  // Which pairs each variant reorders, with the speedups it gives them (from "variants").
  const json swaps = st.value("ranking_swaps", json::object());
  const json variants = st.value("variants", json::array());  // held: speedups points into it
  for (const auto& [variant, pairs] : swaps.items()) {
    const json* speedups = nullptr;
    for (const auto& v : variants)
      if (v.is_object() && v.contains("name") && v["name"] == variant && v.contains("speedups") &&
          v["speedups"].is_object())
        speedups = &v["speedups"];
    auto with = [&](const std::string& s) {
      if (speedups && speedups->contains(s) && (*speedups)[s].is_number())
        return s + " " + fmt("%.3f", (*speedups)[s].get<double>());
      return s;
    };
    os << "    " << variant << ":";
    std::string sep = " ";
    for (const auto& p : pairs) {
      os << sep << with(p["ahead"].get<std::string>()) << " ahead of " << with(p["behind"].get<std::string>());
      sep = "; ";
    }
    os << "\n";
  }
  if (st.value("reference_missing", false)) {
    os << "    no speedups: the reference strategy was not in this run (--strategies)\n";
    return;
  }
  auto num = [](const json& v, const char* k) {
    return v.contains(k) && v[k].is_number() ? fmt("%.3f", v[k].get<double>()) : std::string("-");
  };
  const json speedups = st.value("speedups", json::object());
  for (const auto& [strategy, v] : speedups.items()) {
    os << "    " << pad(strategy, 18, false) << " speedup " << num(v, "nominal") << "  range [" << num(v, "min") << ", "
       << num(v, "max") << "]";
    if (v.contains("trimmed_nominal"))
      os << "  trimmed " << num(v, "trimmed_nominal") << " [" << num(v, "trimmed_min") << ", " << num(v, "trimmed_max")
         << "]";
    os << "  widest: " << v.value("widest_parameter", std::string("-"));
    const json none = v.value("no_number_in", json::array());
    if (!none.empty()) os << "  no number (oom or no valid plan, its own or the reference's) in: " << names(none, ", ");
    os << "\n";
  }
}

void print_draw_study(std::ostream& os, const json& st, const std::string& title, int steps) {
  const int n = st.value("draws", 0);
  // Draw 0's ranking of the strategies with numbers, then those without (helper-65: they were
  // listed after ">" as if ranked); "held" counts draw 0 itself, so the others are one less.
  const json without = st.value("without_numbers", json::array());
  os << "  " << title << ": ranking of draw 0 (";
  bool first = true;
  for (const auto& s : st.value("ranking", json::array())) {
    if (std::find(without.begin(), without.end(), s) != without.end()) continue;
    os << (first ? "" : " > ") << s.get<std::string>();
    first = false;
  }
  if (!without.empty()) {
    os << "; no numbers:";
    for (size_t i = 0; i < without.size(); ++i) os << (i ? ", " : " ") << without[i].get<std::string>();
  }
  const int others = std::max(n - 1, 0);
  os << ") held in " << std::clamp(st.value("ranking_held", 0) - 1, 0, others) << " of the " << others
     << " other draws of " << steps << " steps, its fastest in " << std::clamp(st.value("first_held", 0) - 1, 0, others)
     << "\n";
  if (const int ref = st.value("reference_without_numbers_draws", 0); ref > 0)
    os << "    the reference strategy has no numbers (oom, no valid plan or not in the run) in " << ref << " of " << n
       << " draws, so no strategy has a speedup there\n";
  const json strategies = st.value("strategies", json::object());
  for (const auto& [strategy, v] : strategies.items()) {
    const int oom = v.value("oom_draws", 0), invalid = v.value("invalid_draws", 0);
    for (const char* which : {"speedup", "trimmed_speedup"}) {
      const json sp = v.value(which, json::object());
      int got = 0;
      for (const auto& x : sp.value("values", json::array())) got += x.is_number() ? 1 : 0;
      os << "    " << pad(strategy, 18, false) << pad(which[0] == 't' ? "trimmed" : "mean", 8, false) << " draw 0 "
         << (sp.contains("nominal") ? fmt("%.3f", sp.value("nominal", 0.0)) : std::string("-"));
      if (sp.contains("median"))
        os << "  median " << fmt("%.3f", sp.value("median", 0.0)) << "  p5-p95 " << fmt("%.3f", sp.value("p5", 0.0))
           << "-" << fmt("%.3f", sp.value("p95", 0.0)) << "  range " << fmt("%.3f", sp.value("min", 0.0)) << "-"
           << fmt("%.3f", sp.value("max", 0.0));
      if (got < n) os << "  (a speedup in " << got << " of " << n << " draws: its own or the reference's step oom or invalid in the rest)";
      if (which[0] == 's' && (oom || invalid))
        os << "  [oom in " << oom << " draws, invalid in " << invalid << "]";
      os << "\n";
    }
  }
}

void print_draws(std::ostream& os, const json& d) {
  if (!d.is_object() || !d.contains("scenarios")) return;
  os << "\n## Data draws: every speedup over " << d.value("draws", 0)
     << " independent draws of each scenario's global batches (mean = summed step times, trimmed = Megatron's\n"
     << "#  10%-trimmed mean; " << d.value("method", std::string()) << ")\n";
  for (const auto& sc : d["scenarios"]) {
    const std::string name = sc.value("scenario", std::string("?"));
    const int steps = sc.value("steps_per_draw", 0);
    print_draw_study(os, sc, name + " (published settings)", steps);
    if (sc.contains("tuned")) print_draw_study(os, sc["tuned"], name + " (tuned settings, held fixed)", steps);
  }
}

void print_sensitivity(std::ostream& os, const json& sens) {
  if (!sens.is_object() || !sens.contains("scenarios")) return;
  os << "\n## Sensitivity: every uncertain cost-model parameter at x" << fmt("%.2f", sens.value("low", 0.8)) << " and x"
     << fmt("%.2f", sens.value("high", 1.2)) << ", one at a time (parameters:";
  const json params = sens.value("parameters", json::array());
  for (const auto& p : params) os << " " << p.get<std::string>();
  os << ")\n";
  for (const auto& sc : sens["scenarios"]) {
    const std::string name = sc.value("scenario", std::string("?"));
    print_study(os, sc, name + " (published settings)");
    if (sc.contains("tuned")) print_study(os, sc["tuned"], name + " (tuned settings, held fixed)");
  }
}

// Under a measured aggregate: the same steps simulated, and the simulator's prediction of the
// replayed share against the measurement (measured.h), summed over the steps.
std::string measured_detail(const ResultsFile& results, const Aggregate& a) {
  double sim_step = 0, sim_tflops_time = 0, predicted = 0, measured = 0, copies = 0;
  int n = 0;
  std::set<std::string> where;
  for (const auto& r : results.rows) {
    if (r.scenario != a.scenario || r.strategy != a.strategy || r.setting != a.setting || !r.has_metrics() ||
        !r.measured.is_object())
      continue;
    const json& m = r.measured;
    const double s = m.value("simulated_step_s", 0.0);
    sim_step += s;
    sim_tflops_time += m.value("simulated_tflops_per_gpu", 0.0) * s;
    predicted += m.value("predicted_s", 0.0);
    measured += r.step_time_s;
    copies += m.value("ring_copy_s", 0.0);
    where.insert("rank " + std::to_string(m.value("pool_rank", -1)) + " stage " + std::to_string(m.value("pp_stage", -1)));
    ++n;
  }
  if (n == 0) return "";
  std::string w;
  for (const auto& x : where) w += (w.empty() ? "" : ", ") + x;
  return pad("", 26, false) + "   replayed: " + w + "; ring copies " + fmt("%.1f", 1e3 * copies / n) +
         " ms apart; simulated whole step: " + fmt("%.4f", sim_step / n) + " s, " +
         fmt("%.2f", sim_step > 0 ? sim_tflops_time / sim_step : 0.0) + " TFLOPS/GPU; predicted share " +
         fmt("%.4f", predicted / n) + " s (error " + fmt("%+.1f%%", measured > 0 ? 100 * (predicted / measured - 1) : 0.0) +
         ")";
}

// The tuned rows divide by the reference's tuned row, whose setting was picked on held-out
// batches: where it is slower than the reference as published on these batches, every tuned
// speedup reads that much higher than against the faster reference (new-user trial, helper-73).
// Said under the table, with the factor; the speedups themselves stay best setting against best
// setting as picked, since re-picking on these batches would select on the batches reported.
void print_tuned_reference_note(std::ostream& os, const std::vector<Aggregate>& aggs, const std::string& scenario) {
  const Aggregate *pub = nullptr, *tuned = nullptr;
  for (const Aggregate& a : aggs) {
    if (a.scenario != scenario || a.strategy != a.reference || !a.valid()) continue;
    if (a.setting == "published") pub = &a;
    if (a.setting == "tuned") tuned = &a;
  }
  if (!pub || !tuned || !(tuned->step_time_s > pub->step_time_s * (1 + 1e-9))) return;
  const double x = tuned->step_time_s / pub->step_time_s;
  os << "  tuned reference: " << tuned->label() << " takes " << fmt("%.4f", tuned->step_time_s) << " s, "
     << fmt("%.1f", 100 * (x - 1)) << "% more than " << pub->label()
     << " on these batches (its setting was picked on held-out ones); against " << pub->label()
     << " each tuned speedup would be " << fmt("%.3f", x) << "x smaller\n";
}

// The planners' notes on the scenario's plans (ResultRow::note), once per strategy, setting and
// note, with how many of the strategy's steps carry it.
void print_planner_notes(std::ostream& os, const ResultsFile& results, const std::string& scenario) {
  std::map<std::pair<std::string, std::string>, int> steps;  // (strategy, setting) -> rows
  std::map<std::tuple<std::string, std::string, std::string>, int> notes;
  for (const ResultRow& r : results.rows) {
    if (r.scenario != scenario) continue;
    ++steps[{r.strategy, r.setting}];
    if (!r.note.empty()) ++notes[{r.strategy, r.setting, r.note}];
  }
  for (const auto& [key, n] : notes) {
    const auto& [strategy, setting, note] = key;
    os << "  planner note: " << strategy << " (" << setting << "), " << n << " of " << steps[{strategy, setting}]
       << " steps: " << note << "\n";
  }
}

}  // namespace

void print_table(std::ostream& os, const ResultsFile& results) {
  const auto aggs = aggregate(results);
  std::set<std::string> sources;
  for (const auto& r : results.rows) sources.insert(r.source);
  const json& ctx = results.context;
  if (results.rows.empty()) {  // (it printed "# How obtained: " with nothing after and no table)
    os << "# This results file has no rows: nothing was run, simulated or measured.\n";
    return;
  }
  os << "# How obtained: ";
  bool first = true;
  for (const auto& s : sources) {
    os << (first ? "" : ", ") << s;
    first = false;
  }
  os << "\n";
  const std::string how = how_obtained(results);
  if (how == "simulated") {
    os << "#   simulated = discrete-event simulator (impl/sim) over the cost model \"" << ctx.value("cost_model", "?")
       << "\" with calibration \"" << ctx.value("calibration", "?") << "\"; nothing here was measured on a GPU.\n";
  } else if (how == "measured") {
    os << "#   every row was measured on the device named in its source: one pool rank's share of the plan on one\n"
       << "#   pipeline stage (the busiest unless chosen), replayed with the real kernels; step time = that GPU's busy\n"
       << "#   time (no bubble, no DP or CP transfer), TFLOPS/GPU = its share's useful FLOPs over it.\n";
  } else {
    os << "#   rows marked simulated: come from the simulator over the cost model \"" << ctx.value("cost_model", "?")
       << "\"; rows marked measured: were measured on the device named in their source.\n";
  }
  if (how == "simulated")
    os << "#   TFLOPS/GPU counts useful FLOPs only (Megatron formula on the real lengths, no recompute,"
       << " no padding), so ratios between strategies are speed ratios.\n";
  else  // a measured share's useful FLOPs differ between strategies: its rate is not a speed ratio
    os << "#   TFLOPS/GPU counts useful FLOPs only (Megatron formula on the real lengths, no recompute, no padding);"
       << " a measured row's are its share's, which differ between strategies: compare measured speed by the"
       << " speedup column.\n";
  os
     << "#   published = the strategy as the scenario sets it (the upstream script's values); tuned = its setting\n"
     << "#   under the memory model (`run --tune`), " << tune_pick_phrase(results) << ".\n"
     << "#   oom = does not fit the GPU's memory.\n"
     << (how == "simulated" ? "#   solve (ms, host) is the one measured column: the planner's wall-clock time on this host's CPU.\n"
                            : "#   solve (ms, host): the planner's wall-clock time on this host's CPU.\n")
     << "#   git " << ctx.value("git_sha", "unknown") << ", " << ctx.value("date", "") << "\n";

  const std::vector<std::pair<std::string, std::string>> cols = {
      {"TFLOPS/GPU", "(useful)"}, {"speedup", "(x ref)"},     {"step time", "(s)"},    {"micro-", "batches"},
      {"balance", "(max/mean)"},  {"bubble", "(% step)"},     {"comm", "(% step)"},    {"overhead", "(% step)"},
      {"plan eff", "(bound/t)"},  {"peak mem", "(GiB/GPU)"}, {"solve", "(ms, host)"}};
  const size_t sw = 26, cw = 11;
  std::string scenario;
  for (size_t i = 0; i < aggs.size(); ++i) {
    const Aggregate& a = aggs[i];
    const json* facts = scenario_facts(results, a.scenario);
    if (a.scenario != scenario) {
      scenario = a.scenario;
      os << "\n## " << scenario;
      if (facts) {
        os << ": " << facts->value("gpus", 0) << " GPUs (TP" << facts->value("tp", 0) << " PP" << facts->value("pp", 0)
           << " CP" << facts->value("cp", 0) << " DP" << facts->value("dp", 0) << ", pool " << facts->value("pool", 0)
           << "), " << facts->value("model", std::string("?")) << ", global batch " << facts->value("global_batch", 0)
           << ", " << facts->value("dataset", std::string("?")) << ", " << a.steps << " step" << (a.steps == 1 ? "" : "s")
           << "; speedups vs " << a.reference;
      }
      os << "\n";
      if (facts && facts->contains("data")) print_data_facts(os, (*facts)["data"]);
      std::string h1 = pad("strategy (setting)", sw, false), h2 = pad("", sw, false);
      for (const auto& c : cols) {
        h1 += pad(c.first, cw);
        h2 += pad(c.second, cw);
      }
      os << h1 << "   knobs\n" << h2 << "\n";
    }
    std::string line = pad(a.label(), sw, false);
    if (!a.valid()) {
      if (a.invalid_steps > 0) {
        line += "   INVALID PLAN (" + std::to_string(a.invalid_steps) + "/" + std::to_string(a.steps) +
                " steps): " + a.first_error;
      } else {
        // The capacity beside the peak (new-user trial, helper-73: the row named no limit).
        const double cap = facts ? facts->value("memory_gib", 0.0) : 0.0;
        line += "   OOM (" + std::to_string(a.oom_steps) + "/" + std::to_string(a.steps) + " steps): peak " +
                fmt("%.1f", a.peak_memory_gib) + " GiB/GPU does not fit" +
                (cap > 0 ? " the GPU's " + fmt("%.1f", cap) + " GiB (the peak counts the reserved bytes: impl/cost/memory.h)" : "");
      }
    } else {
      line += pad(fmt("%.2f", a.tflops_per_gpu), cw);
      line += pad(a.speedup_vs_reference ? fmt("%.3f", *a.speedup_vs_reference) : "-", cw);
      line += pad(fmt("%.4f", a.step_time_s), cw);
      line += pad(fmt("%.1f", a.microbatches), cw);
      const bool m = a.measured();  // one GPU's replay of a rank's share: no balance, bubble, comm, bound
      line += pad(m ? "-" : fmt("%.3f", a.balance), cw);
      line += pad(m ? "-" : fmt("%.1f", 100.0 * a.bubble_frac), cw);
      line += pad(m ? "-" : fmt("%.1f", 100.0 * a.comm_frac), cw);
      line += pad(m ? "-" : fmt("%.1f", a.step_time_s > 0 ? 100.0 * a.overhead_s / a.step_time_s : 0.0), cw);
      line += pad(m ? "-" : fmt("%.3f", a.plan_efficiency), cw);
      line += pad(fmt("%.1f", a.peak_memory_gib), cw);
      line += pad(fmt("%.1f", a.solve_ms), cw);
      line += "   " + knobs_text(a.knobs);
    }
    os << line << "\n";
    if (a.valid() && a.measured()) os << measured_detail(results, a) << "\n";
    const bool last_of_scenario = i + 1 == aggs.size() || aggs[i + 1].scenario != scenario;
    if (last_of_scenario && facts && facts->contains("published")) {
      const json& p = (*facts)["published"];
      os << "  published: " << p.value("source", "") << "\n";
      if (!p.value("note", "").empty()) os << "  note: " << p.value("note", "") << "\n";
    }
    if (last_of_scenario) {
      print_tuned_reference_note(os, aggs, scenario);
      print_planner_notes(os, results, scenario);
    }
  }
  print_published_comparison(os, results, aggs);
  print_planning_summary(os, results);
  print_sensitivity(os, results.sensitivity);
  print_draws(os, results.draws);
  os.flush();
}

}  // namespace dcp::harness
