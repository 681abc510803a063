// The agreement table and the schema check of dcpbench.converge.v1 reports (converge.h).
#include <cmath>
#include <cstdio>
#include <sstream>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "harness/converge.h"

namespace dcp::harness {

namespace {
using nlohmann::json;

std::string sizes_str(const json& sizes) {
  std::string s;
  for (auto it = sizes.begin(); it != sizes.end(); ++it) s += (s.empty() ? "" : ",") + it.key();
  return s.empty() ? "-" : s;
}

double mean_of(const json& a) {
  double s = 0;
  for (const auto& v : a) s += v.get<double>();
  return a.empty() ? 0 : s / static_cast<double>(a.size());
}
}  // namespace

void validate_converge_report(const json& j, const std::string& what) {
  auto bad = [&](const std::string& why) { throw InputError(what + ": not a dcpbench.converge.v1 report: " + why); };
  if (!j.is_object()) bad("not a JSON object");
  if (!(j.contains("schema") && j["schema"] == "dcpbench.converge.v1")) bad("\"schema\" is not \"dcpbench.converge.v1\"");
  if (!j.contains("context") || !j["context"].is_object()) bad("no \"context\" object");
  if (!j.contains("dtype") || !j["dtype"].is_string()) bad("no \"dtype\"");
  if (!j.contains("steps") || !j["steps"].is_number_integer() || j["steps"].get<int64_t>() < 1) bad("no positive \"steps\"");
  if (!j.contains("strategies") || !j["strategies"].is_object()) bad("no \"strategies\" object");
  if (!j["strategies"].contains("reference")) bad("no \"reference\" strategy");
  const int64_t steps = j["steps"].get<int64_t>();
  // What `plot` draws besides the losses (plot_converge.py), checked here so that a report it
  // cannot draw is refused with its field named instead of failing inside the script or drawing
  // a wrong chart (helper-20, 2026-12-06).
  const auto per_step = [&](const json& a) {  // one number (or null: not finite) per step
    if (!a.is_array() || static_cast<int64_t>(a.size()) != steps) return false;
    for (const auto& v : a)
      if (!v.is_number() && !v.is_null()) return false;
    return true;
  };
  const std::string numbers = std::to_string(steps) + " numbers (null: not finite)";
  const std::string per_step_text = "an array of " + numbers;
  for (const char* k : {"context", "pool"})
    if (j.contains(k) && !j[k].is_object()) bad("\"" + std::string(k) + "\" is not an object");
  if (j.contains("step_kinds")) {
    const json& kinds = j["step_kinds"];
    bool ok = kinds.is_array() && static_cast<int64_t>(kinds.size()) == steps;
    for (const auto& k : ok ? kinds : json::array()) ok = ok && k.is_string();
    if (!ok) bad("\"step_kinds\" is not an array of " + std::to_string(steps) + " strings");
  }
  // Absent in reports written before 2026-12-06, whose edge cases trained on after the main steps.
  if (j.contains("edge_case_start") && j["edge_case_start"] != "initial_model")
    bad("\"edge_case_start\" is " + j["edge_case_start"].dump() + ", not \"initial_model\"");
  if (j.contains("strategy_order")) {
    const json& order = j["strategy_order"];
    if (!order.is_array()) bad("\"strategy_order\" is not an array");
    for (const auto& n : order)
      if (!n.is_string() || !j["strategies"].contains(n.get<std::string>()))
        bad("\"strategy_order\" names " + n.dump() + ", which is not a strategy of the report");
  }
  if (!j.contains("bounds") || !j["bounds"].is_object()) bad("no \"bounds\" object");
  // The scalars this project writes (converge.cpp) must be numbers (null: not finite); a key it
  // does not write is ignored, as DESIGN.md asks of every reader (it had been refused unless a
  // number: helper-60's review).
  static const std::set<std::string> kScalars = {"loss_rel",
                                                 "grad_rel",
                                                 "mtp_loss_rel",
                                                 "f32_drift_loss_rel",
                                                 "f32_drift_grad_rel",
                                                 "floor",
                                                 "same_params_loss_rel",
                                                 "same_params_grad_rel",
                                                 "same_params_mtp_loss_rel",
                                                 "f32_same_params_drift_grad_rel"};
  for (auto it = j["bounds"].begin(); it != j["bounds"].end(); ++it) {
    const std::string& k = it.key();
    if (k.ends_with("_per_step")) {
      if (!per_step(it.value())) bad("\"bounds." + k + "\" is not " + per_step_text);
    } else if (kScalars.count(k) && !it.value().is_number() && !it.value().is_null()) {
      bad("\"bounds." + k + "\" is not a number");
    }
  }
  for (auto it = j["strategies"].begin(); it != j["strategies"].end(); ++it) {
    const json& s = it.value();
    if (!s.is_object()) bad("strategy \"" + it.key() + "\" is not an object");
    if (s.contains("error")) continue;
    // null: a loss that was not finite (a diverged run; JSON has no NaN or inf, nlohmann writes null)
    if (!s.contains("losses") || !per_step(s["losses"]))
      bad("strategy \"" + it.key() + "\" has no \"losses\" array of " + numbers);
    if (it.key() != "reference" && it.key() != "reference_f64") {
      for (const char* k : {"max_abs_dloss", "max_rel_grad_diff", "bitwise_repeat", "bound", "pass"})
        if (!s.contains(k)) bad("strategy \"" + it.key() + "\" has no \"" + std::string(k) + "\"");
      for (const char* k : {"dloss_rel", "grad_rel_diff"})  // the two difference charts
        if (!s.contains(k) || !per_step(s[k]))
          bad("strategy \"" + it.key() + "\" has no \"" + std::string(k) + "\" that is " + per_step_text);
    }
    if (s.contains("dmtp_loss_rel") && !per_step(s["dmtp_loss_rel"]))
      bad("strategy \"" + it.key() + "\" has a \"dmtp_loss_rel\" that is not " + per_step_text);
    if (s.contains("same_params")) {  // float32 (since 2026-12-07): the run at the reference's parameters
      const json& sp = s["same_params"];
      const bool strategy = it.key() != "reference" && it.key() != "reference_f64";
      bool ok = sp.is_object() && sp.contains("losses") && per_step(sp["losses"]);
      for (const char* k : {"dloss_rel", "grad_rel_diff"})
        ok = ok && (!strategy || (sp.contains(k) && per_step(sp[k])));
      ok = ok && (!sp.contains("dmtp_loss_rel") || per_step(sp["dmtp_loss_rel"]));
      ok = ok && (!strategy || (sp.contains("max_rel_grad_diff") &&
                                (sp["max_rel_grad_diff"].is_number() || sp["max_rel_grad_diff"].is_null())));
      // What the table and the chart read (written since 643ab48): checked when present.
      ok = ok && (!sp.contains("grad_bound_use") || per_step(sp["grad_bound_use"]));
      ok = ok && (!sp.contains("max_grad_bound_use") || sp["max_grad_bound_use"].is_number() ||
                  sp["max_grad_bound_use"].is_null());
      ok = ok && (!sp.contains("pass") || sp["pass"].is_boolean());
      if (!ok)
        bad("strategy \"" + it.key() + "\" has a \"same_params\" that is not an object of per-step \"losses\"" +
            (strategy ? ", \"dloss_rel\" and \"grad_rel_diff\" (and, if present, \"grad_bound_use\": " +
                            per_step_text + "), \"max_rel_grad_diff\" (and \"max_grad_bound_use\") numbers or " +
                            "null, and a boolean \"pass\" if present"
                      : std::string(" (") + per_step_text + ")"));
    }
    if (s.contains("planner_notes")) {  // optional: [{note, steps}], steps increasing in [0, steps)
      bool ok = s["planner_notes"].is_array();
      for (const auto& n : ok ? s["planner_notes"] : json::array()) {
        ok = ok && n.is_object() && n.contains("note") && n["note"].is_string() && n.contains("steps") &&
             n["steps"].is_array() && !n["steps"].empty();
        int64_t last = -1;
        for (const auto& i : ok ? n["steps"] : json::array()) {
          ok = ok && i.is_number_integer() && i.get<int64_t>() > last && i.get<int64_t>() < steps;
          if (ok) last = i.get<int64_t>();
        }
      }
      if (!ok)
        bad("strategy \"" + it.key() + "\" has a \"planner_notes\" that is not an array of {note, steps: " +
            "increasing step indices below " + std::to_string(steps) + "}");
    }
    if (s.contains("planning")) {  // optional (README "Async planning"): what converge_table prints
      const json& p = s["planning"];
      bool ok = p.is_object() && p.value("mode", json()).is_string();
      for (const char* k : {"plan_ms", "wait_ms"}) {
        ok = ok && p.contains(k) && p[k].is_array() && p[k].size() == s["losses"].size();
        if (ok)
          for (const auto& v : p[k]) ok = ok && v.is_number();
      }
      for (const char* k : {"plan_ms_total", "wait_ms_total", "hidden_ms_total"})
        ok = ok && p.contains(k) && p[k].is_number();
      if (!ok)
        bad("strategy \"" + it.key() + "\" has a \"planning\" that is not {mode, plan_ms and wait_ms per step, " +
            "plan_ms_total, wait_ms_total, hidden_ms_total}");
    }
  }
}

namespace {
// A number of the report, NaN where a diverged run wrote null (JSON has no NaN or inf).
double num(const json& obj, const char* key) {
  return obj.contains(key) && obj[key].is_number() ? obj[key].get<double>() : std::nan("");
}
}  // namespace

std::string converge_table(const json& r) {
  std::ostringstream os;
  const json& st = r["strategies"];
  os << "dcpbench converge: " << r.value("scenario", "?") << ", " << r["steps"].get<int>() << " steps ("
     << r.value("main_steps", 0) << " main + " << r.value("steps", 0) - r.value("main_steps", 0)
     << " edge-case"
     << (r.value("edge_case_start", "") == "initial_model" && r.value("steps", 0) > r.value("main_steps", 0)
             ? ", each from the initial model"
             : "")
     << "), " << (r["dtype"] == "f32" ? "float32" : "float64") << ", pool "
     << r["pool"].value("ranks", 0) << " ranks (" << r["pool"].value("backend", "?") << "), model "
     << r["model"].value("parameters", 0) << " parameters\n";
  const json& b = r["bounds"];
  os << (b.contains("f32_drift_loss_rel") ? "bound (the largest of the per-step bounds): " : "bound: ")
     << "relative loss difference <= " << num(b, "loss_rel");
  if (b.contains("mtp_loss_rel")) os << ", relative MTP-loss difference <= " << num(b, "mtp_loss_rel");
  os << ", relative gradient difference" << (b.contains("grad_measure") ? " (per tensor)" : "") << " <= "
     << num(b, "grad_rel") << " (" << b.value("why", "") << ")\n";
  if (b.contains("loss_rel_per_step") && b.contains("f32_drift_loss_rel"))
    os << "(each step is judged by its own bound, bounds.*_per_step in the report: a strategy can fail at a step "
          "whose difference is below the largest bound)\n";
  if (b.contains("f32_drift_loss_rel"))
    os << "measured float32 drift of the single-rank run from float64 (largest over the steps): loss "
       << num(b, "f32_drift_loss_rel") << ", gradient " << num(b, "f32_drift_grad_rel") << "\n";
  char line[260];
  std::snprintf(line, sizeof line, "%-16s %9s %11s %11s %11s %11s %8s %10s %8s  %s\n", "strategy", "loss",
                "max dloss", "max dloss", "max dMTP", "max grad", "bitwise", "cp sizes", "ubatch", "result");
  os << line;
  std::snprintf(line, sizeof line, "%-16s %9s %11s %11s %11s %11s %8s %10s %8s\n", "", "(main)", "(abs)", "(rel)",
                "loss (rel)", "(rel diff)", "(repeat)", "(used)", "(/step)");
  os << line;
  std::vector<std::string> order;
  if (r.contains("strategy_order") && r["strategy_order"].is_array()) {
    for (const auto& n : r["strategy_order"])
      if (n.is_string() && st.contains(n.get<std::string>())) order.push_back(n.get<std::string>());
  } else {
    for (auto it = st.begin(); it != st.end(); ++it) order.push_back(it.key());
  }
  for (const std::string& name : order) {
    const json& s = st[name];
    if (s.contains("error")) {
      std::snprintf(line, sizeof line, "%-16s %s\n", name.c_str(), ("FAIL planner error: " + s["error"].get<std::string>()).c_str());
      os << line;
      continue;
    }
    const bool is_ref = name == "reference" || name == "reference_f64";
    // The loss after the main steps: the edge cases after them start again from the initial model.
    const json& losses = s["losses"];
    const int main_steps = r.value("main_steps", 0);
    const json& at = main_steps >= 1 && main_steps <= static_cast<int>(losses.size()) ? losses[main_steps - 1] : losses.back();
    const double last = at.is_number() ? at.get<double>() : std::nan("");
    const std::string result = is_ref ? (name == "reference" ? (s.value("pass", true) ? "reference" : "FAIL") : "drift ref")
                                      : (s.value("pass", false) ? "PASS" : "FAIL");
    char dla[16] = "-", dlr[16] = "-", dm[16] = "-", gr[16] = "-";
    if (!is_ref) {
      std::snprintf(dla, sizeof dla, "%.2e", num(s, "max_abs_dloss"));
      std::snprintf(dlr, sizeof dlr, "%.2e", num(s, "max_rel_dloss"));
      if (s.contains("max_rel_dmtp_loss")) std::snprintf(dm, sizeof dm, "%.2e", num(s, "max_rel_dmtp_loss"));
      std::snprintf(gr, sizeof gr, "%.2e", num(s, "max_rel_grad_diff"));
    }
    std::snprintf(line, sizeof line, "%-16s %9.5f %11s %11s %11s %11s %8s %10s %8.1f  %s\n", name.c_str(), last, dla, dlr, dm, gr,
                  s.contains("bitwise_repeat") ? (s["bitwise_repeat"].get<bool>() ? "yes" : "NO") : "-",
                  sizes_str(s["cp_sizes"]).c_str(), mean_of(s["microbatches"]), result.c_str());
    os << line;
  }
  // float32: each strategy at the float32 reference's parameters of every step (converge.cpp).
  bool same_header = false;
  for (const std::string& name : order) {
    const json& s = st[name];
    if (name == "reference" || name == "reference_f64" || !s.contains("same_params") || !s["same_params"].is_object())
      continue;
    const json& sp = s["same_params"];
    if (!same_header) {
      os << "same parameters (each step from the float32 reference's parameters of that step; bound per step 2 x "
            "the float64 run's drift there + floor, largest: loss "
         << num(b, "same_params_loss_rel");
      if (b.contains("same_params_mtp_loss_rel")) os << ", MTP loss " << num(b, "same_params_mtp_loss_rel");
      os << ", gradient " << num(b, "same_params_grad_rel")
         << " for the loosest tensor, each tensor within 2 x its own drift + floor):\n";
      std::snprintf(line, sizeof line, "  %-16s %11s %11s %11s %11s  %s\n", "", "max dloss", "max dMTP", "max grad",
                    "max grad", "result");
      os << line;
      std::snprintf(line, sizeof line, "  %-16s %11s %11s %11s %11s\n", "", "(rel)", "loss (rel)", "(rel diff)",
                    "(bound use)");
      os << line;
      same_header = true;
    }
    char dlr[16] = "-", dm[16] = "-", gr[16] = "-", use[16] = "-";
    std::snprintf(dlr, sizeof dlr, "%.2e", num(sp, "max_rel_dloss"));
    if (sp.contains("max_rel_dmtp_loss")) std::snprintf(dm, sizeof dm, "%.2e", num(sp, "max_rel_dmtp_loss"));
    std::snprintf(gr, sizeof gr, "%.2e", num(sp, "max_rel_grad_diff"));
    if (sp.contains("max_grad_bound_use")) {  // null: a step was not finite (a diverged run)
      const double u = num(sp, "max_grad_bound_use");
      if (std::isfinite(u))
        std::snprintf(use, sizeof use, "%.0f%%", 100 * u);
      else
        std::snprintf(use, sizeof use, "%s", "not finite");
    }
    std::snprintf(line, sizeof line, "  %-16s %11s %11s %11s %11s  %s\n", name.c_str(), dlr, dm, gr, use,
                  sp.contains("pass") ? (sp["pass"] == true ? "PASS" : "FAIL") : "-");
    os << line;
  }
  // The planners' notes on the plans trained, with how many steps carry each.
  for (const std::string& name : order) {
    const json& s = st[name];
    if (!s.contains("planner_notes") || !s["planner_notes"].is_array()) continue;
    for (const json& n : s["planner_notes"]) {  // as converge.cpp writes them (validate_converge_report checks files)
      os << "planner note: " << name << ", " << n["steps"].size() << " of " << s["losses"].size()
         << " steps: " << n["note"].get<std::string>() << "\n";
    }
  }
  // Planning times (measured, rank 0): how much of each strategy's planning the training hid.
  bool planning_header = false;
  for (const std::string& name : order) {
    const json& s = st[name];
    if (!s.contains("planning") || !s["planning"].is_object()) continue;
    const json& p = s["planning"];
    if (!planning_header) {
      os << "planning (measured wall clock on this host, rank 0; " << p.value("mode", "?")
         << (p.value("mode", "") == "async" ? ": step i+1 planned on a background thread while step i trains)\n"
                                            : ": planned inside the training loop)\n");
      planning_header = true;
    }
    const double plan_ms = p.value("plan_ms_total", 0.0), hidden_ms = p.value("hidden_ms_total", 0.0);
    std::snprintf(line, sizeof line, "  %-16s planned %9.2f ms, training waited %9.2f ms, hidden %9.2f ms (%.0f%%)\n",
                  name.c_str(), plan_ms, p.value("wait_ms_total", 0.0), hidden_ms,
                  plan_ms > 0 ? 100.0 * hidden_ms / plan_ms : 0.0);
    os << line;
  }
  const json& d = r["reference_loss_drop"];
  char tail[200];
  std::snprintf(tail, sizeof tail, "reference loss %.4f -> %.4f over the main steps (%.1f%% drop; at least %.0f%% required)\n",
                d.value("first", 0.0), d.value("last", 0.0), 100 * d.value("drop", 0.0), 100 * d.value("required", 0.0));
  os << tail;
  os << (r.value("pass", false) ? "dcpbench converge: every strategy within its bound\n"
                                : "dcpbench converge: FAILED\n");
  return os.str();
}

}  // namespace dcp::harness
