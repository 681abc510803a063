// Results file writer, reader and schema check (see results.h). All JSON goes through
// nlohmann/json; files are written atomically (core/json_io.h).
#include "harness/results.h"

#include <cmath>

#include "core/error.h"
#include "core/json_io.h"
#include "harness/aggregate.h"

#include <array>
#include <cstdio>
#include <ctime>
#include <unistd.h>

#ifndef DCP_SOURCE_DIR
#define DCP_SOURCE_DIR "."
#endif

namespace dcp::harness {

// Row halves to and from JSON (missing keys keep their defaults on reading).
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(RowInfo, scenario, strategy, step, plan_valid, oom, error, source,
                                                setting, reference, peak_memory_gib, useful_tflop, tokens, samples)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(RowMetrics, step_time_s, tflops_per_gpu, tokens_per_s_per_gpu,
                                                microbatches, balance, bubble_frac, comm_frac, plan_efficiency,
                                                solve_ms, lower_bound_s, compute_s, comm_s, overhead_s, bubble_s,
                                                imbalance_s)

namespace {

using nlohmann::json;

// Metric keys: numbers when the plan is valid, null otherwise.
constexpr std::array<const char*, 8> kMetricKeys = {
    "step_time_s", "tflops_per_gpu", "tokens_per_s_per_gpu", "balance",
    "bubble_frac", "comm_frac",      "plan_efficiency",      "speedup_vs_packing"};

constexpr std::array<const char*, 6> kContextKeys = {"git_sha", "date", "host", "device", "cost_model",
                                                     "calibration"};

std::string run_command(const std::string& cmd) {
  std::string out;
  FILE* f = ::popen(cmd.c_str(), "r");
  if (!f) return out;
  std::array<char, 256> buf{};
  while (std::fgets(buf.data(), buf.size(), f)) out += buf.data();
  ::pclose(f);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r' || out.back() == ' ')) out.pop_back();
  return out;
}

std::string git_sha() {
  // The tree this binary was built from (whatever the working directory is: a run from inside
  // another checkout must not record that checkout's sha), then the working directory.
  for (const std::string& dir : {std::string(DCP_SOURCE_DIR), std::string(".")}) {
    const std::string sha = run_command("git -C '" + dir + "' rev-parse HEAD 2>/dev/null");
    if (sha.size() == 40) {
      const std::string dirty = run_command("git -C '" + dir + "' status --porcelain --untracked-files=no 2>/dev/null");
      return dirty.empty() ? sha : sha + "-dirty";
    }
  }
  return "unknown";
}

}  // namespace

std::string simulated_source(const std::string& cost_model, const std::string& calibration) {
  return "simulated:" + cost_model + "@" + calibration;
}

json make_context(const std::string& device, const std::string& cost_model, const std::string& calibration,
                  const std::string& command) {
  json c;
  c["git_sha"] = git_sha();
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
  if (!r.oom) j.erase("oom");
  if (r.has_metrics()) {
    j.update(json(static_cast<const RowMetrics&>(r)));
    j["speedup_vs_packing"] = r.speedup_vs_packing ? json(*r.speedup_vs_packing) : json(nullptr);
  } else {
    for (const char* k : kMetricKeys) j[k] = nullptr;
    j["microbatches"] = nullptr;
  }
  if (!r.knobs.is_null()) j["knobs"] = r.knobs;
  if (!r.rank_busy_s.empty()) j["rank_busy_s"] = r.rank_busy_s;
  if (!r.plan.is_null()) j["plan"] = r.plan;
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
  if (clean.contains("speedup_vs_packing") && clean["speedup_vs_packing"].is_number())
    r.speedup_vs_packing = clean["speedup_vs_packing"].get<double>();
  if (clean.contains("knobs")) r.knobs = clean["knobs"];
  if (clean.contains("rank_busy_s") && clean["rank_busy_s"].is_array()) {
    for (const auto& v : clean["rank_busy_s"])
      if (v.is_number()) r.rank_busy_s.push_back(v.get<double>());
  }
  if (clean.contains("plan")) r.plan = clean["plan"];
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
        errs.push_back(at + ".\"source\"=\"" + s + "\" is neither simulated:... nor measured:...");
    }
    const bool oom = r.contains("oom") && r["oom"].is_boolean() && r["oom"].get<bool>();
    const bool valid = has_valid && r["plan_valid"].get<bool>() && !oom;
    for (const char* k : kMetricKeys) {
      const bool is_num = r.contains(k) && r[k].is_number();
      const bool is_null = r.contains(k) && r[k].is_null();
      // speedup_vs_packing is null when the scenario has no valid packing row for that step.
      const bool nullable = !valid || std::string(k) == "speedup_vs_packing";
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
  }
  return errs;
}

ResultsFile read_results(const std::string& path) {
  const json j = read_json_file(path);
  const auto errs = validate_results(j);
  if (!errs.empty()) {
    std::string more = errs.size() > 1 ? " (and " + std::to_string(errs.size() - 1) + " more problems)" : "";
    throw InputError(path + ": not a valid " + kResultsSchema + " file: " + errs.front() + more);
  }
  ResultsFile f;
  f.context = j["context"];
  if (j.contains("scenarios") && j["scenarios"].is_array()) f.scenarios = j["scenarios"];
  if (j.contains("sensitivity")) f.sensitivity = j["sensitivity"];
  try {
    for (const auto& r : j["rows"]) f.rows.push_back(row_from_json(r));
  } catch (const nlohmann::json::exception& e) {
    throw InputError(path + ": a row has a key of the wrong type (" + e.what() + ")");
  }
  return f;
}

void write_results(const std::string& path, const ResultsFile& results) {
  const json j = results_to_json(results);
  const auto errs = validate_results(j);
  DCP_CHECK(errs.empty(), "results about to be written do not validate: ", errs.front());
  write_json_atomic(path, j, 1);
}

}  // namespace dcp::harness
