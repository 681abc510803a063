// Results file writer, reader and schema check (see results.h). All JSON goes through
// nlohmann/json; files are written atomically (core/json_io.h).
#include "harness/results.h"

#include <cmath>

#include "core/error.h"
#include "core/files.h"
#include "core/json_io.h"
#include "core/provenance.h"
#include "core/text.h"
#include "harness/aggregate.h"
#include "harness/object_reader.h"

#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <tuple>
#include <ctime>
#include <unistd.h>

namespace dcp::harness {

// Row halves to and from JSON (missing keys keep their defaults on reading).
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(RowInfo, scenario, strategy, step, plan_valid, oom, error, note, source,
                                                setting, reference, peak_memory_gib, useful_tflop, tokens, samples)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(RowMetrics, step_time_s, tflops_per_gpu, tokens_per_s_per_gpu,
                                                microbatches, balance, bubble_frac, comm_frac, plan_efficiency,
                                                solve_ms, lower_bound_s, compute_s, comm_s, overhead_s, bubble_s,
                                                imbalance_s, busiest_idle_s)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(RowPlanning, planning, plan_hidden_ms, plan_exposed_ms, plan_wait_ms)

namespace {

using nlohmann::json;

// Metric keys: numbers when the plan is valid, null otherwise.
constexpr std::array<const char*, 8> kMetricKeys = {
    "step_time_s", "tflops_per_gpu", "tokens_per_s_per_gpu", "balance",
    "bubble_frac", "comm_frac",      "plan_efficiency",      "speedup_vs_packing"};

// Metric keys one GPU's replay of a rank's share does not measure: null in measured rows.
constexpr std::array<const char*, 4> kNotMeasuredKeys = {"balance", "bubble_frac", "comm_frac", "plan_efficiency"};

bool not_measured_key(const std::string& k) {
  return std::find(kNotMeasuredKeys.begin(), kNotMeasuredKeys.end(), k) != kNotMeasuredKeys.end();
}

constexpr std::array<const char*, 6> kContextKeys = {"git_sha", "date", "host", "device", "cost_model",
                                                     "calibration"};


// Row integers: steps and micro-batch counts fit an int; token and sample counts an int64 with room.
constexpr int64_t kMaxRowInt = 2147483647;
constexpr int64_t kMaxRowCount = int64_t{1} << 62;

bool int_in(const json& v, int64_t lo, int64_t hi) {
  if (!v.is_number_integer()) return false;
  if (v.is_number_unsigned()) return v.get<uint64_t>() <= static_cast<uint64_t>(hi);
  const int64_t x = v.get<int64_t>();
  return x >= lo && x <= hi;
}

bool is_number_array(const json& v) {
  if (!v.is_array()) return false;
  for (const auto& e : v)
    if (!e.is_number()) return false;
  return true;
}

// [[ [first_rank, cp_size, samples, tokens] per group ] per micro-batch], all non-negative integers.
bool is_plan_picture(const json& v) {
  if (!v.is_array()) return false;
  for (const auto& mb : v) {
    if (!mb.is_array()) return false;
    for (const auto& g : mb) {
      if (!g.is_array() || g.size() != 4) return false;
      for (const auto& x : g)
        if (!int_in(x, 0, kMaxRowCount)) return false;
    }
  }
  return true;
}

// The per-scenario facts the table and the charts print: the keys they read must have the types
// they read them as (a reader must not fail, or wrap, on a hand-edited file).
void check_scenario_facts(const json& scenarios, std::vector<std::string>& errs) {
  if (!scenarios.is_array()) {
    errs.push_back("\"scenarios\" is not an array");
    return;
  }
  for (size_t i = 0; i < scenarios.size(); ++i) {
    const json& f = scenarios[i];
    const std::string at = "scenarios[" + std::to_string(i) + "]";
    if (!f.is_object()) {
      errs.push_back(at + " is not an object");
      continue;
    }
    for (const char* k : {"name", "model", "dataset", "file", "hardware", "calibration"})
      if (f.contains(k) && !f[k].is_string()) errs.push_back(at + ".\"" + k + "\" is not a string");
    for (const char* k : {"gpus", "tp", "pp", "cp", "vpp", "dp", "pool", "gpus_per_node", "global_batch", "steps"})
      if (f.contains(k) && !int_in(f[k], 0, kMaxRowInt))
        errs.push_back(at + ".\"" + k + "\" is not an integer in [0, " + std::to_string(kMaxRowInt) + "]");
    // The table prints it beside an OOM row's peak (report.cpp): a finite number >= 0.
    if (f.contains("memory_gib") && !(f["memory_gib"].is_number() && std::isfinite(f["memory_gib"].get<double>()) &&
                                      f["memory_gib"].get<double>() >= 0))
      errs.push_back(at + ".\"memory_gib\" is not a finite number >= 0");
    if (f.contains("data")) {
      const json& d = f["data"];
      bool ok = d.is_object();
      for (const char* k : {"steps", "documents_drawn", "samples", "samples_dropped", "documents_split",
                            "chunks_discarded", "real_tokens", "padding_tokens"})
        ok = ok && (!d.contains(k) || int_in(d[k], 0, std::numeric_limits<int64_t>::max()));
      if (!ok) errs.push_back(at + ".\"data\" is not an object of non-negative integers");
    }
    if (!f.contains("published")) continue;
    const json& p = f["published"];
    const bool values_ok = p.is_object() && (!p.contains("values") || p["values"].is_array());
    const auto text = [&p](const char* k) { return !p.contains(k) || p[k].is_string(); };
    if (!values_ok || !text("source") || !text("note") || !text("hardware")) {
      errs.push_back(at + ".\"published\" is not an object with a string source/note/hardware and a values array");
      continue;
    }
    if (!p.contains("values")) continue;
    for (const auto& v : p["values"]) {
      bool ok = v.is_object() && (!v.contains("strategy") || v["strategy"].is_string());
      for (const char* k : {"tflops_per_gpu", "step_time_ms", "speedup_vs_packing"})
        ok = ok && (!v.contains(k) || v[k].is_number());
      if (!ok) {
        errs.push_back(at + ".\"published.values\" has an entry that is not {strategy: string, numbers}");
        break;
      }
    }
  }
}

// The sensitivity section the table prints (report.cpp print_sensitivity / print_study): the
// types it reads, so printing a loaded file never meets a value of another type.
bool is_string_array(const json& v) {
  if (!v.is_array()) return false;
  for (const auto& e : v)
    if (!e.is_string()) return false;
  return true;
}

bool is_study(const json& st) {
  if (!st.is_object()) return false;
  for (const char* k : {"ranking_changes", "reference_missing"})
    if (st.contains(k) && !st[k].is_boolean()) return false;
  if (st.contains("ranking_tolerance") && !st["ranking_tolerance"].is_number()) return false;
  for (const char* k : {"ranking", "ranking_changed_by", "without_numbers"})
    if (st.contains(k) && !is_string_array(st[k])) return false;
  if (st.contains("ranking_swaps")) {
    if (!st["ranking_swaps"].is_object()) return false;
    for (const auto& [variant, pairs] : st["ranking_swaps"].items()) {
      if (!pairs.is_array()) return false;
      for (const auto& p : pairs)
        if (!p.is_object() || !p.contains("ahead") || !p.contains("behind") || !p["ahead"].is_string() ||
            !p["behind"].is_string())
          return false;
    }
  }
  if (!st.contains("speedups")) return true;
  if (!st["speedups"].is_object()) return false;
  for (const auto& [name, v] : st["speedups"].items()) {
    if (!v.is_object()) return false;
    for (const char* k : {"nominal", "min", "max", "trimmed_nominal", "trimmed_min", "trimmed_max"})  // null: no number
      if (v.contains(k) && !v[k].is_number() && !v[k].is_null()) return false;
    if (v.contains("widest_parameter") && !v["widest_parameter"].is_string()) return false;
    if (v.contains("no_number_in") && !is_string_array(v["no_number_in"])) return false;
  }
  return true;
}

void check_sensitivity(const json& sens, std::vector<std::string>& errs) {
  if (sens.is_null()) return;
  bool ok = sens.is_object();
  for (const char* k : {"low", "high"})
    ok = ok && (!sens.contains(k) || sens[k].is_number());
  ok = ok && (!sens.contains("parameters") || is_string_array(sens["parameters"]));
  ok = ok && (!sens.contains("scenarios") || sens["scenarios"].is_array());
  if (ok && sens.contains("scenarios")) {
    for (const auto& sc : sens["scenarios"]) {
      ok = ok && is_study(sc) && (!sc.contains("scenario") || sc["scenario"].is_string()) &&
           (!sc.contains("tuned") || is_study(sc["tuned"]));
    }
  }
  if (!ok) errs.push_back("\"sensitivity\" has a value of the wrong type");
}

// The draws section the table prints (report.cpp print_draws; draws.h): the types it reads.
bool is_spread(const json& v) {
  if (!v.is_object()) return false;
  for (const char* k : {"nominal", "median", "p5", "p95", "min", "max"})
    if (v.contains(k) && !v[k].is_number()) return false;
  if (!v.contains("values")) return true;
  if (!v["values"].is_array()) return false;
  for (const auto& x : v["values"])
    if (!x.is_number() && !x.is_null()) return false;  // null: a draw without a value
  return true;
}

// An integer in [lo, hi] (counts of draws).
bool is_count(const json& v, int64_t lo, int64_t hi) {
  return v.is_number_integer() && v.get<int64_t>() >= lo && v.get<int64_t>() <= hi;
}

bool is_draw_study(const json& st) {
  if (!st.is_object()) return false;
  if (st.contains("ranking") && !is_string_array(st["ranking"])) return false;
  if (st.contains("draws") && !is_count(st["draws"], 1, kMaxDraws)) return false;
  const int64_t n = st.contains("draws") ? st["draws"].get<int64_t>() : kMaxDraws;
  for (const char* k : {"ranking_held", "first_held"})
    if (st.contains(k) && !is_count(st[k], 0, n)) return false;
  if (!st.contains("strategies")) return true;
  if (!st["strategies"].is_object()) return false;
  for (const auto& [name, v] : st["strategies"].items()) {
    if (!v.is_object()) return false;
    for (const char* k : {"speedup", "trimmed_speedup"})
      if (v.contains(k) && !is_spread(v[k])) return false;
    for (const char* k : {"oom_draws", "invalid_draws"})
      if (v.contains(k) && !is_count(v[k], 0, n)) return false;
  }
  return true;
}

void check_draws(const json& d, std::vector<std::string>& errs) {
  if (d.is_null()) return;
  bool ok = d.is_object() && (!d.contains("draws") || is_count(d["draws"], 1, kMaxDraws)) &&
            (!d.contains("method") || d["method"].is_string()) &&
            (!d.contains("scenarios") || d["scenarios"].is_array());
  if (ok && d.contains("scenarios")) {
    for (const auto& sc : d["scenarios"]) {
      ok = ok && is_draw_study(sc) && (!sc.contains("scenario") || sc["scenario"].is_string()) &&
           (!sc.contains("reference") || sc["reference"].is_string()) &&
           (!sc.contains("steps_per_draw") || is_count(sc["steps_per_draw"], 1, 100000)) &&
           (!sc.contains("tuned") || is_draw_study(sc["tuned"]));
    }
  }
  if (!ok) errs.push_back("\"draws\" has a value of the wrong type");
}

// A measured row's "measured" object (measured.h): numbers finite, strings, booleans, and its
// "microbatch_times": per micro-batch four finite non-negative numbers.
bool is_measured_object(const json& m) {
  if (!m.is_object()) return false;
  for (const auto& [k, v] : m.items()) {
    if (k == "microbatch_times") {
      if (!v.is_array() || v.size() > static_cast<size_t>(kMaxRowCount)) return false;
      for (const auto& t : v) {
        if (!t.is_array() || t.size() != 4) return false;
        for (const auto& x : t)
          if (!x.is_number() || !std::isfinite(x.get<double>()) || x.get<double>() < 0) return false;
      }
      continue;
    }
    if (v.is_number() && !std::isfinite(v.get<double>())) return false;
    if (!v.is_number() && !v.is_boolean() && !v.is_string()) return false;
  }
  return true;
}

// A row's knobs (report.cpp knobs_text): integers in range.
bool is_knobs(const json& k) {
  if (k.is_null()) return true;
  if (!k.is_object()) return false;
  for (const char* key : {"max_seqlen_per_rank", "cp", "vpp"})
    if (k.contains(key) && !int_in(k[key], 0, key[0] == 'm' ? kMaxRowCount : kMaxRowInt)) return false;
  return true;
}

// The aggregates the charts draw from (harness/aggregate.cpp aggregate_to_json): every key they
// read must have the type they read it as.
void check_aggregates(const json& aggs, std::vector<std::string>& errs) {
  if (!aggs.is_array()) {
    errs.push_back("\"aggregates\" is not an array");
    return;
  }
  for (size_t i = 0; i < aggs.size(); ++i) {
    const json& a = aggs[i];
    const std::string at = "aggregates[" + std::to_string(i) + "]";
    if (!a.is_object()) {
      errs.push_back(at + " is not an object");
      continue;
    }
    for (const auto& [k, v] : a.items()) {
      bool ok = true;
      if (k == "scenario" || k == "strategy" || k == "setting" || k == "reference" || k == "source" || k == "error")
        ok = v.is_string();
      else if (k == "steps" || k == "invalid_steps" || k == "oom_steps")
        ok = int_in(v, 0, kMaxRowInt);
      else if (k == "valid")
        ok = v.is_boolean();
      else if (k == "knobs")
        ok = v.is_object() || v.is_null();
      else
        ok = v.is_number() || v.is_null();
      if (!ok) {
        errs.push_back(at + "." + quote(k, 40) + " has the wrong type");
        break;
      }
    }
  }
}

}  // namespace

namespace {
// The speedup of each of rows[first..] over its reference row (same scenario, setting and step),
// none where that row has no numbers: what fill_speedups writes and the reader checks.
std::vector<std::optional<double>> reference_speedups(const std::vector<ResultRow>& rows, size_t first) {
  std::map<std::tuple<std::string, std::string, std::string, int>, const ResultRow*> with_numbers;
  for (size_t k = first; k < rows.size(); ++k)
    if (rows[k].has_metrics()) with_numbers[{rows[k].scenario, rows[k].setting, rows[k].strategy, rows[k].step}] = &rows[k];
  std::vector<std::optional<double>> out(rows.size() - std::min(first, rows.size()));
  for (size_t i = first; i < rows.size(); ++i) {
    const ResultRow& r = rows[i];
    if (!r.has_metrics() || r.step_time_s <= 0) continue;
    const auto ref = with_numbers.find({r.scenario, r.setting, r.reference, r.step});
    if (ref != with_numbers.end()) out[i - first] = ref->second->step_time_s / r.step_time_s;
  }
  return out;
}
}  // namespace

void fill_speedups(std::vector<ResultRow>& rows, size_t first) {
  const auto speedups = reference_speedups(rows, first);
  for (size_t i = 0; i < speedups.size(); ++i)
    rows[first + i].speedup_vs_packing = speedups[i];  // none clears a stale one (review of stop 45)
}

std::string simulated_source(const std::string& cost_model, const std::string& calibration) {
  return "simulated:" + cost_model + "@" + calibration;
}

json make_context(const std::string& device, const std::string& cost_model, const std::string& calibration,
                  const std::string& command) {
  json c;
  c["git_sha"] = source_git_sha();
  c["toolchain"] = build_toolchain();
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tm);
  c["date"] = date;
  char host[256] = {0};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = 0;
  c["host"] = host[0] ? host : "unknown";
  c["device"] = device;
  c["cost_model"] = cost_model;
  c["calibration"] = calibration;
  c["command"] = command;
  return c;
}

json row_to_json(const ResultRow& r) {
  json j = static_cast<const RowInfo&>(r);
  if (r.error.empty()) j.erase("error");
  if (r.note.empty()) j.erase("note");
  if (!r.oom) j.erase("oom");
  if (r.has_metrics()) {
    j.update(json(static_cast<const RowMetrics&>(r)));
    j["speedup_vs_packing"] = r.speedup_vs_packing ? json(*r.speedup_vs_packing) : json(nullptr);
    if (r.is_measured())
      for (const char* k : kNotMeasuredKeys) j[k] = nullptr;
  } else {
    for (const char* k : kMetricKeys) j[k] = nullptr;
    j["microbatches"] = nullptr;
  }
  if (!r.planning.empty()) j.update(json(static_cast<const RowPlanning&>(r)));
  if (!r.knobs.is_null()) j["knobs"] = r.knobs;
  if (!r.rank_busy_s.empty()) j["rank_busy_s"] = r.rank_busy_s;
  if (!r.plan.is_null()) j["plan"] = r.plan;
  if (!r.measured.is_null()) j["measured"] = r.measured;
  return j;
}

ResultRow row_from_json(const json& j) {
  // Nulls (metrics of an invalid or oom row) read as the defaults.
  json clean = json::object();
  for (const auto& [k, v] : j.items())
    if (!v.is_null()) clean[k] = v;
  ResultRow r;
  static_cast<RowInfo&>(r) = clean.get<RowInfo>();
  static_cast<RowMetrics&>(r) = clean.get<RowMetrics>();
  static_cast<RowPlanning&>(r) = clean.get<RowPlanning>();
  if (clean.contains("speedup_vs_packing") && clean["speedup_vs_packing"].is_number())
    r.speedup_vs_packing = clean["speedup_vs_packing"].get<double>();
  if (clean.contains("knobs")) r.knobs = clean["knobs"];
  if (clean.contains("rank_busy_s") && clean["rank_busy_s"].is_array()) {
    for (const auto& v : clean["rank_busy_s"])
      if (v.is_number()) r.rank_busy_s.push_back(v.get<double>());
  }
  if (clean.contains("plan")) r.plan = clean["plan"];
  if (clean.contains("measured")) r.measured = clean["measured"];
  return r;
}

json results_to_json(const ResultsFile& results) {
  json j;
  j["schema"] = kResultsSchema;
  j["context"] = results.context;
  j["scenarios"] = results.scenarios;
  json rows = json::array();
  for (const auto& r : results.rows) rows.push_back(row_to_json(r));
  j["rows"] = std::move(rows);
  // Aggregated once, here, from the rows: the table, the gate and the charts use these.
  json aggs = json::array();
  for (const auto& a : aggregate(results)) aggs.push_back(aggregate_to_json(a));
  j["aggregates"] = std::move(aggs);
  if (!results.sensitivity.is_null()) j["sensitivity"] = results.sensitivity;
  if (!results.draws.is_null()) j["draws"] = results.draws;
  return j;
}

std::vector<std::string> validate_results(const json& j) {
  std::vector<std::string> errs;
  if (!j.is_object()) return {"the results are not a JSON object"};
  if (!j.contains("schema") || j["schema"] != kResultsSchema)
    errs.push_back(std::string("\"schema\" is not \"") + kResultsSchema + "\"");
  if (!j.contains("context") || !j["context"].is_object()) {
    errs.push_back("\"context\" is missing or not an object");
  } else {
    for (const char* k : kContextKeys)
      if (!j["context"].contains(k) || !j["context"][k].is_string())
        errs.push_back(std::string("\"context.") + k + "\" is missing or not a string");
    if (j["context"].contains("tune_pick") && !j["context"]["tune_pick"].is_string())
      errs.push_back("\"context.tune_pick\" is not a string");
  }
  if (!j.contains("rows") || !j["rows"].is_array()) {
    errs.push_back("\"rows\" is missing or not an array");
    return errs;
  }
  const json& rows = j["rows"];
  for (size_t i = 0; i < rows.size(); ++i) {
    const json& r = rows[i];
    const std::string at = "rows[" + std::to_string(i) + "]";
    if (!r.is_object()) {
      errs.push_back(at + " is not an object");
      continue;
    }
    auto need = [&](const char* k, bool ok, const char* type) {
      if (!r.contains(k)) errs.push_back(at + ".\"" + k + "\" is missing");
      else if (!ok) errs.push_back(at + ".\"" + k + "\" is not " + type);
    };
    need("scenario", r.contains("scenario") && r["scenario"].is_string(), "a string");
    need("strategy", r.contains("strategy") && r["strategy"].is_string(), "a string");
    need("step", r.contains("step") && r["step"].is_number_integer(), "an integer");
    need("source", r.contains("source") && r["source"].is_string(), "a string");
    const bool has_valid = r.contains("plan_valid") && r["plan_valid"].is_boolean();
    need("plan_valid", has_valid, "a boolean");
    if (r.contains("source") && r["source"].is_string()) {
      const std::string s = r["source"].get<std::string>();
      if (s.rfind("simulated:", 0) != 0 && s.rfind("measured:", 0) != 0)
        errs.push_back(at + ".\"source\"=" + quote(s) + " is neither simulated:... nor measured:...");
    }
    const bool oom = r.contains("oom") && r["oom"].is_boolean() && r["oom"].get<bool>();
    const bool valid = has_valid && r["plan_valid"].get<bool>() && !oom;
    const bool measured = r.contains("source") && r["source"].is_string() &&
                          r["source"].get<std::string>().rfind("measured:", 0) == 0;
    for (const char* k : kMetricKeys) {
      const bool is_num = r.contains(k) && r[k].is_number();
      const bool is_null = r.contains(k) && r[k].is_null();
      // speedup_vs_packing is null when the scenario has no valid packing row for that step; a
      // measured row has no balance, bubble, comm or plan efficiency (results.h).
      const bool nullable = !valid || std::string(k) == "speedup_vs_packing" || (measured && not_measured_key(k));
      need(k, is_num || (nullable && is_null), nullable ? "a number or null" : "a number");
      // NaN/inf would be written as null and make the file unreadable; a zero step time would
      // weigh nothing in the gate's time-weighted TFLOPS.
      if (is_num && !std::isfinite(r[k].get<double>())) errs.push_back(at + ".\"" + k + "\" is not finite");
      const std::string key = k;
      if (valid && is_num && (key == "step_time_s" || key == "tflops_per_gpu") && !(r[k].get<double>() > 0))
        errs.push_back(at + ".\"" + k + "\"=" + r[k].dump() + " must be > 0 for a valid plan");
    }
    const bool mb_ok = r.contains("microbatches") &&
                       (r["microbatches"].is_number_integer() || (!valid && r["microbatches"].is_null()));
    need("microbatches", mb_ok, valid ? "an integer" : "an integer or null");
    // Integers are range-checked (a JSON 2^63 must not wrap into a negative step, a 1e300 must not
    // reach an integer conversion in row_from_json).
    for (const char* k : {"step", "microbatches"})
      if (r.contains(k) && r[k].is_number_integer() && !int_in(r[k], 0, kMaxRowInt))
        errs.push_back(at + ".\"" + k + "\"=" + json_excerpt(r[k], 24) + " is not in [0, " + std::to_string(kMaxRowInt) + "]");
    for (const char* k : {"tokens", "samples"})
      if (r.contains(k) && !r[k].is_null() && !(r[k].is_number_integer() && int_in(r[k], 0, kMaxRowCount)))
        errs.push_back(at + ".\"" + k + "\" is not an integer in [0, " + std::to_string(kMaxRowCount) + "]");
    for (const char* k : {"useful_tflop", "peak_memory_gib", "solve_ms", "lower_bound_s", "compute_s", "comm_s",
                          "overhead_s", "bubble_s", "imbalance_s", "busiest_idle_s", "plan_hidden_ms", "plan_exposed_ms",
                          "plan_wait_ms"})
      if (r.contains(k) && !r[k].is_number() && !r[k].is_null()) errs.push_back(at + ".\"" + k + "\" is not a number");
    for (const char* k : {"planning", "error", "note"})
      if (r.contains(k) && !r[k].is_null() && !r[k].is_string()) errs.push_back(at + ".\"" + k + "\" is not a string");
    for (const char* k : {"plan_hidden_ms", "plan_exposed_ms", "plan_wait_ms"})
      if (r.contains(k) && r[k].is_number() && !std::isfinite(r[k].get<double>()))
        errs.push_back(at + ".\"" + k + "\" is not finite");
    if (r.contains("knobs") && !is_knobs(r["knobs"]))
      errs.push_back(at + ".\"knobs\" is not an object of integer max_seqlen_per_rank, cp, vpp");
    if (r.contains("rank_busy_s") && !is_number_array(r["rank_busy_s"]))
      errs.push_back(at + ".\"rank_busy_s\" is not an array of numbers");
    if (r.contains("measured") && !r["measured"].is_null() && !is_measured_object(r["measured"]))
      errs.push_back(at + ".\"measured\" is not an object of numbers, booleans and strings");
    if (r.contains("plan") && !r["plan"].is_null() && !is_plan_picture(r["plan"]))
      errs.push_back(at + ".\"plan\" is not an array of micro-batches of [first_rank, cp_size, samples, tokens] groups");
  }
  if (j.contains("scenarios")) check_scenario_facts(j["scenarios"], errs);
  if (j.contains("aggregates")) check_aggregates(j["aggregates"], errs);
  if (j.contains("sensitivity")) check_sensitivity(j["sensitivity"], errs);
  if (j.contains("draws")) check_draws(j["draws"], errs);
  return errs;
}

namespace {

// Numbers equal to a relative 1e-9 (the file holds them to 17 digits; aggregate() over the rows
// read back gives the same doubles, the slack only forgives another libm).
bool close_json(const json& a, const json& b) {
  if (a.is_number() && b.is_number()) return within_rel(a.get<double>(), b.get<double>(), 1e-9);
  return a == b;
}

// Files written before 0b0a667 (2026-12-04) hold bubble_frac, comm_frac and plan_efficiency as the
// mean of the steps' ratios, where aggregate() now gives the ratio of the mean step's seconds.
// Such a value is what its rows give under that definition, not an edit: the reader takes it, and
// every reader uses aggregate()'s values (plot draws from a copy with them), so an existing gate
// baseline or results file stays readable (review of stop 45: every older file was refused).
using AggregateKey = std::tuple<std::string, std::string, std::string>;  // scenario, setting, strategy
// Per (scenario, setting, strategy): the sums over its steps with numbers of each row's
// bubble_frac, comm_frac and plan_efficiency, and the step count, for the definition before
// 0b0a667 (their means). Made once per file (a check per mismatching value had walked every row
// again: 22 s on a 40k-row file, helper-2).
using LegacySums = std::map<AggregateKey, std::pair<std::array<double, 3>, int>>;
LegacySums legacy_sums(const ResultsFile& f) {
  LegacySums sums;
  for (const auto& r : f.rows)
    if (r.has_metrics()) {
      auto& [sum, n] = sums[{r.scenario, r.setting, r.strategy}];
      sum[0] += r.bubble_frac;
      sum[1] += r.comm_frac;
      sum[2] += r.plan_efficiency;
      ++n;
    }
  return sums;
}

bool is_legacy_mean_of_ratios(const LegacySums& sums, const AggregateKey& key, const std::string& k, const json& v) {
  const int at = k == "bubble_frac" ? 0 : k == "comm_frac" ? 1 : k == "plan_efficiency" ? 2 : -1;
  const auto it = sums.find(key);
  return at >= 0 && v.is_number() && it != sums.end() &&
         close_json(v, json(it->second.first[static_cast<size_t>(at)] / it->second.second));
}

// What only the rows together say: every strategy of a scenario and setting has the same steps,
// once each (speedups and means compare strategies on the same batches), and the aggregates the
// charts draw from are the rows' (harness/aggregate.cpp). An edited file (a row deleted, an
// aggregate halved) was read without complaint, and the table, the gate and the charts then
// disagreed with each other. Returns the first problem, or "".
std::string check_rows_agree(const ResultsFile& f, const json& j) {
  std::map<std::pair<std::string, std::string>, std::map<std::string, std::vector<int>>> steps;
  for (const auto& r : f.rows) steps[{r.scenario, r.setting}][r.strategy].push_back(r.step);
  const auto show = [](const std::vector<int>& v) {
    std::string out;
    for (size_t i = 0; i < v.size() && i < 8; ++i) out += (i ? ", " : "") + std::to_string(v[i]);
    return "[" + out + (v.size() > 8 ? ", ...]" : "]");
  };
  for (auto& [key, by_strategy] : steps) {
    const std::string where = "scenario " + quote(key.first, 80) + " (" + key.second + ")";
    const std::vector<int>* first = nullptr;
    const std::string* first_name = nullptr;
    for (auto& [strategy, v] : by_strategy) {
      std::sort(v.begin(), v.end());
      if (std::adjacent_find(v.begin(), v.end()) != v.end())
        return where + ": strategy " + quote(strategy, 60) + " has a step twice: " + show(v);
      if (!first) {
        first = &v;
        first_name = &strategy;
      } else if (v != *first) {
        return where + ": strategy " + quote(strategy, 60) + " has steps " + show(v) + " where " +
               quote(*first_name, 60) + " has " + show(*first) + " (a row missing?)";
      }
    }
  }
  // One reference strategy per scenario, the scenario's own (`reference_strategy` of its facts):
  // the aggregate pairs each row with its row's reference, so a row given another one was read and
  // mixed two baselines into one speedup (review of stop 45: 15.03 "over bshd", half of it packing).
  {
    std::map<std::string, const std::string*> declared;
    for (const auto& sc : f.scenarios)
      if (sc.is_object() && sc.contains("name") && sc["name"].is_string() && sc.contains("reference_strategy") &&
          sc["reference_strategy"].is_string())
        declared.emplace(sc["name"].get<std::string>(), sc["reference_strategy"].get_ptr<const std::string*>());
    std::map<std::string, size_t> first_row;
    for (size_t i = 0; i < f.rows.size(); ++i) {
      const ResultRow& r = f.rows[i];
      const auto it = first_row.emplace(r.scenario, i).first;
      const auto d = declared.find(r.scenario);
      const std::string& want = d != declared.end() ? *d->second : f.rows[it->second].reference;
      if (r.reference != want)
        return "row " + std::to_string(i) + " (scenario " + quote(r.scenario, 60) + ", " + quote(r.strategy, 40) +
               ", step " + std::to_string(r.step) + "): \"reference\"=" + quote(r.reference, 40) + " is not its scenario's " +
               (d != declared.end() ? "reference_strategy " : "reference (row " + std::to_string(it->second) + "'s) ") +
               quote(want, 40);
    }
  }
  // The step-0 detail the charts draw per pool rank (rank_busy_s: one entry per rank; plan: groups
  // of ranks [first_rank, first_rank + cp_size)) fits its scenario's pool (helper-20: a
  // rank_busy_s of 1 entry, or a group of 400 ranks, on a pool of 4 was drawn).
  {
    std::map<std::string, int64_t> pools;
    for (const auto& sc : f.scenarios)
      if (sc.is_object() && sc.contains("name") && sc["name"].is_string() && sc.contains("pool") &&
          sc["pool"].is_number_integer() && sc["pool"].get<int64_t>() > 0)
        pools.emplace(sc["name"].get<std::string>(), sc["pool"].get<int64_t>());
    for (size_t i = 0; i < f.rows.size(); ++i) {
      const ResultRow& r = f.rows[i];
      const auto p = pools.find(r.scenario);
      if (p == pools.end()) continue;
      const int64_t pool = p->second;
      const std::string at = "row " + std::to_string(i) + " (scenario " + quote(r.scenario, 60) + ", " +
                             quote(r.strategy, 40) + ", step " + std::to_string(r.step) + ")";
      if (!r.rank_busy_s.empty() && static_cast<int64_t>(r.rank_busy_s.size()) != pool)
        return at + ": \"rank_busy_s\" has " + std::to_string(r.rank_busy_s.size()) + " entries, its pool " +
               std::to_string(pool) + " ranks";
      if (r.plan.is_array())
        for (const auto& mb : r.plan)
          for (const auto& g : mb) {  // (is_plan_picture: four integers in [0, kMaxRowCount])
            const int64_t first = g[0].get<int64_t>(), size = g[1].get<int64_t>();
            if (size < 1 || first > pool - size)  // (first + size may overflow: each is up to kMaxRowCount)
              return at + ": \"plan\" has a group of ranks [" + std::to_string(first) + ", " +
                     std::to_string(first + size) + ") outside its pool of " + std::to_string(pool) + " ranks";
          }
    }
  }
  // Each row's speedup is its reference row's step time over its own (fill_speedups), and every
  // step of a strategy and setting has the same knobs (the aggregate carries the first step's):
  // an edited speedup or knob was read, the table printed it and the gate passed (stop 44).
  const auto expected = reference_speedups(f.rows, 0);
  std::map<std::tuple<std::string, std::string, std::string>, size_t> first_of;
  for (size_t i = 0; i < f.rows.size(); ++i) {
    const ResultRow& r = f.rows[i];
    const std::string at = "row " + std::to_string(i) + " (scenario " + quote(r.scenario, 60) + ", " +
                           quote(r.strategy, 40) + ", step " + std::to_string(r.step) + ")";
    const auto& want = expected[i];
    const auto& got = r.speedup_vs_packing;
    if (want.has_value() != got.has_value() || (want && !close_json(json(*want), json(*got))))
      return at + ": \"speedup_vs_packing\"=" + (got ? json_excerpt(json(*got), 24) : std::string("null")) +
             " is not what its rows give (" + (want ? json_excerpt(json(*want), 24) : std::string("null")) +
             ": the step time of its reference " + quote(r.reference, 40) + " over its own)";
    const auto [it, fresh] = first_of.emplace(std::make_tuple(r.scenario, r.setting, r.strategy), i);
    if (!fresh && f.rows[it->second].knobs != r.knobs)
      return at + ": \"knobs\"=" + json_excerpt(r.knobs, 60) + " differ from its step " +
             std::to_string(f.rows[it->second].step) + "'s " + json_excerpt(f.rows[it->second].knobs, 60) +
             " (a setting's knobs are the same every step)";
  }
  if (!j.contains("aggregates")) return "";
  const json& file = j["aggregates"];
  json rows = json::array();
  for (const auto& a : aggregate(f)) rows.push_back(aggregate_to_json(a));
  if (file.size() != rows.size())
    return "\"aggregates\" has " + std::to_string(file.size()) + " entries, its rows make " + std::to_string(rows.size());
  // Matched by (scenario, setting, strategy), not by position.
  const auto key_of = [](const json& a) {
    const auto str = [&](const char* k) { return a.contains(k) && a[k].is_string() ? a[k].get<std::string>() : ""; };
    return std::make_tuple(str("scenario"), str("setting"), str("strategy"));
  };
  // One entry per (scenario, setting, strategy) of the rows, each with every key the rows give
  // (helper-33: an entry replaced by a copy of another's, or one without "tflops_per_gpu", was read,
  // and the charts then left a strategy out or failed).
  std::map<std::tuple<std::string, std::string, std::string>, const json*> made;
  for (const auto& a : rows) made[key_of(a)] = &a;
  std::set<std::tuple<std::string, std::string, std::string>> matched;
  std::optional<LegacySums> legacy;  // made at the first mismatch
  for (size_t i = 0; i < file.size(); ++i) {
    const auto it = made.find(key_of(file[i]));
    const std::string at = "\"aggregates\"[" + std::to_string(i) + "]";
    if (it == made.end()) return at + " names a scenario, setting and strategy that no row has";
    if (!matched.insert(it->first).second)
      return at + " names a scenario, setting and strategy that an earlier entry names";
    for (const auto& [k, v] : file[i].items())
      if (it->second->contains(k) && !close_json(v, (*it->second)[k]) &&
          !is_legacy_mean_of_ratios(legacy.has_value() ? *legacy : legacy.emplace(legacy_sums(f)), it->first, k, v))
        return at + "." + quote(k, 40) + "=" + json_excerpt(v, 40) + " is not what its rows give (" +
               json_excerpt((*it->second)[k], 40) + ")";
    for (const auto& [k, v] : it->second->items())
      if (!file[i].contains(k)) return at + " has no " + quote(k, 40) + " (its rows give " + json_excerpt(v, 40) + ")";
  }
  return "";
}

}  // namespace

ResultsFile read_results(const std::string& path) { return results_from_json(read_json_file(path), path); }

ResultsFile results_from_json(const json& j, const std::string& path) {
  // Another of dcpbench's files says what it is, not its first missing key (helper-77's trial: a
  // convergence scenario given to plot was "not a valid dcpbench.results.v1 file: ...").
  if (j.is_object()) {
    const auto it = j.find("schema");
    if (it != j.end() && it->is_string() && *it != kResultsSchema)
      throw InputError(show_path(path) + ": is a " + quote(it->get<std::string>(), 60) + " file, not a " +
                       kResultsSchema + " file");
    if (const auto mark = scenario_mark(j); it == j.end() && mark)
      throw InputError(show_path(path) + (mark->run ? ": is a run scenario (the input of dcpbench run)"
                                                    : ": is a convergence scenario (the input of dcpbench converge)") +
                       ", not a " + kResultsSchema + " file");
  }
  const auto errs = validate_results(j);
  if (!errs.empty()) {
    std::string more = errs.size() > 2   ? " (and " + std::to_string(errs.size() - 1) + " more problems)"
                       : errs.size() == 2 ? " (and 1 more problem)"
                                          : "";
    throw InputError(show_path(path) + ": not a valid " + kResultsSchema + " file: " + errs.front() + more);
  }
  ResultsFile f;
  f.context = j["context"];
  if (j.contains("scenarios") && j["scenarios"].is_array()) f.scenarios = j["scenarios"];
  if (j.contains("sensitivity")) f.sensitivity = j["sensitivity"];
  if (j.contains("draws")) f.draws = j["draws"];
  try {
    for (const auto& r : j["rows"]) f.rows.push_back(row_from_json(r));
  } catch (const nlohmann::json::exception& e) {
    throw InputError(show_path(path) + ": a row has a key of the wrong type (" + e.what() + ")");
  }
  if (const std::string problem = check_rows_agree(f, j); !problem.empty())
    throw InputError(show_path(path) + ": not a valid " + kResultsSchema + " file: " + problem);
  return f;
}

void write_results(const std::string& path, const ResultsFile& results, std::ostream* note) {
  json j = results_to_json(results);
  const auto errs = validate_results(j);
  DCP_CHECK(errs.empty(), "results about to be written do not validate: ", errs.front());
  // Step 0's per-rank detail grows with rows x pool (~10 MB a row at 2^19 ranks): where it would
  // take the file past what table, plot and gate read, it is left out (as with --no-detail)
  // rather than the run lost; the row count is bounded before the run (cmd_run.cpp).
  // The text is dumped once (twice when too big) and written as is: write_json_atomic would dump
  // it again for the same limit check.
  std::string text = j.dump(1) + "\n";
  if (static_cast<int64_t>(text.size()) > kMaxJsonFileBytes) {
    const size_t with_detail = text.size();
    for (auto& r : j["rows"]) {
      r.erase("rank_busy_s");
      r.erase("plan");
    }
    text = j.dump(1) + "\n";
    DCP_REQUIRE(static_cast<int64_t>(text.size()) <= kMaxJsonFileBytes, show_path(path), ": ", results.rows.size(),
                " result rows would make a file of ", text.size() >> 20,
                " MiB even without the per-rank detail, above the ", kMaxJsonFileBytes >> 20,
                " MiB that table, plot and gate read; nothing written (use fewer steps)");
    if (note)
      *note << "dcpbench: the per-rank detail of step 0 (rank_busy_s, plan) is left out of " << show_path(path)
            << ": with it the file would be " << (with_detail >> 20) << " MiB, above the "
            << (kMaxJsonFileBytes >> 20) << " MiB that table, plot and gate read (as --no-detail)\n";
  }
  write_file_atomic(path, text);
}

}  // namespace dcp::harness
