// Results file writer, reader and schema check (see results.h). All JSON goes through
// nlohmann/json; files are written atomically (core/json_io.h).
#include "harness/results.h"

#include <cmath>

#include "core/error.h"
#include "core/files.h"
#include "core/json_io.h"
#include "core/text.h"

#include <array>
#include <cstdio>
#include <ctime>
#include <unistd.h>

#ifndef DCP_SOURCE_DIR
#define DCP_SOURCE_DIR "."
#endif

namespace dcp::harness {
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
    if (!f.contains("published")) continue;
    const json& p = f["published"];
    const bool values_ok = p.is_object() && (!p.contains("values") || p["values"].is_array());
    if (!values_ok || (p.contains("source") && !p["source"].is_string()) || (p.contains("note") && !p["note"].is_string())) {
      errs.push_back(at + ".\"published\" is not an object with a string source/note and a values array");
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

double num_or(const json& j, const char* key, double dflt) {
  auto it = j.find(key);
  return (it != j.end() && it->is_number()) ? it->get<double>() : dflt;
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
  json j;
  j["scenario"] = r.scenario;
  j["strategy"] = r.strategy;
  j["step"] = r.step;
  j["plan_valid"] = r.plan_valid;
  j["source"] = r.source;
  if (!r.error.empty()) j["error"] = r.error;
  if (r.plan_valid) {
    j["step_time_s"] = r.step_time_s;
    j["tflops_per_gpu"] = r.tflops_per_gpu;
    j["tokens_per_s_per_gpu"] = r.tokens_per_s_per_gpu;
    j["microbatches"] = r.microbatches;
    j["balance"] = r.balance;
    j["bubble_frac"] = r.bubble_frac;
    j["comm_frac"] = r.comm_frac;
    j["plan_efficiency"] = r.plan_efficiency;
    j["speedup_vs_packing"] = r.speedup_vs_packing ? json(*r.speedup_vs_packing) : json(nullptr);
    j["solve_ms"] = r.solve_ms;
    j["lower_bound_s"] = r.lower_bound_s;
    j["compute_s"] = r.compute_s;
    j["comm_s"] = r.comm_s;
    j["bubble_s"] = r.bubble_s;
    j["imbalance_s"] = r.imbalance_s;
  } else {
    for (const char* k : kMetricKeys) j[k] = nullptr;
    j["microbatches"] = nullptr;
  }
  j["useful_tflop"] = r.useful_tflop;
  j["tokens"] = r.tokens;
  j["samples"] = r.samples;
  if (!r.rank_busy_s.empty()) j["rank_busy_s"] = r.rank_busy_s;
  if (!r.plan.is_null()) j["plan"] = r.plan;
  return j;
}

ResultRow row_from_json(const json& j) {
  ResultRow r;
  r.scenario = j.at("scenario").get<std::string>();
  r.strategy = j.at("strategy").get<std::string>();
  r.step = static_cast<int>(json_int(j.at("step"), 0, kMaxRowInt, "step"));
  r.plan_valid = j.at("plan_valid").get<bool>();
  r.source = j.at("source").get<std::string>();
  if (j.contains("error") && j["error"].is_string()) r.error = j["error"].get<std::string>();
  r.step_time_s = num_or(j, "step_time_s", 0);
  r.tflops_per_gpu = num_or(j, "tflops_per_gpu", 0);
  r.tokens_per_s_per_gpu = num_or(j, "tokens_per_s_per_gpu", 0);
  r.microbatches = j.contains("microbatches") && j["microbatches"].is_number_integer()
                       ? static_cast<int>(json_int(j["microbatches"], 0, kMaxRowInt, "microbatches"))
                       : 0;
  r.balance = num_or(j, "balance", 0);
  r.bubble_frac = num_or(j, "bubble_frac", 0);
  r.comm_frac = num_or(j, "comm_frac", 0);
  r.plan_efficiency = num_or(j, "plan_efficiency", 0);
  if (j.contains("speedup_vs_packing") && j["speedup_vs_packing"].is_number())
    r.speedup_vs_packing = j["speedup_vs_packing"].get<double>();
  r.solve_ms = num_or(j, "solve_ms", 0);
  r.lower_bound_s = num_or(j, "lower_bound_s", 0);
  r.compute_s = num_or(j, "compute_s", 0);
  r.comm_s = num_or(j, "comm_s", 0);
  r.bubble_s = num_or(j, "bubble_s", 0);
  r.imbalance_s = num_or(j, "imbalance_s", 0);
  r.useful_tflop = num_or(j, "useful_tflop", 0);
  r.tokens = j.contains("tokens") ? json_int(j["tokens"], 0, kMaxRowCount, "tokens") : 0;
  r.samples = j.contains("samples") ? json_int(j["samples"], 0, kMaxRowCount, "samples") : 0;
  if (j.contains("rank_busy_s") && j["rank_busy_s"].is_array()) {
    for (const auto& v : j["rank_busy_s"])
      if (v.is_number()) r.rank_busy_s.push_back(v.get<double>());
  }
  if (j.contains("plan")) r.plan = j["plan"];
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
        errs.push_back(at + ".\"source\"=" + quote(s) + " is neither simulated:... nor measured:...");
    }
    const bool valid = has_valid && r["plan_valid"].get<bool>();
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
    // Integers are range-checked (a JSON 2^63 must not wrap into a negative step).
    for (const char* k : {"step", "microbatches"})
      if (r.contains(k) && r[k].is_number_integer() && !int_in(r[k], 0, kMaxRowInt))
        errs.push_back(at + ".\"" + k + "\"=" + json_excerpt(r[k], 24) + " is not in [0, " + std::to_string(kMaxRowInt) + "]");
    for (const char* k : {"tokens", "samples"})
      if (r.contains(k) && !(r[k].is_number_integer() && int_in(r[k], 0, kMaxRowCount)))
        errs.push_back(at + ".\"" + k + "\" is not an integer in [0, " + std::to_string(kMaxRowCount) + "]");
    for (const char* k : {"useful_tflop", "solve_ms", "lower_bound_s", "compute_s", "comm_s", "bubble_s", "imbalance_s"})
      if (r.contains(k) && !r[k].is_number() && !r[k].is_null()) errs.push_back(at + ".\"" + k + "\" is not a number");
    if (r.contains("rank_busy_s") && !is_number_array(r["rank_busy_s"]))
      errs.push_back(at + ".\"rank_busy_s\" is not an array of numbers");
    if (r.contains("plan") && !r["plan"].is_null() && !is_plan_picture(r["plan"]))
      errs.push_back(at + ".\"plan\" is not an array of micro-batches of [first_rank, cp_size, samples, tokens] groups");
  }
  if (j.contains("scenarios")) check_scenario_facts(j["scenarios"], errs);
  return errs;
}

ResultsFile read_results(const std::string& path) {
  const json j = read_json_file(path);
  const auto errs = validate_results(j);
  if (!errs.empty()) {
    std::string more = errs.size() > 1 ? " (and " + std::to_string(errs.size() - 1) + " more problems)" : "";
    throw InputError(show_path(path) + ": not a valid " + kResultsSchema + " file: " + errs.front() + more);
  }
  ResultsFile f;
  f.context = j["context"];
  if (j.contains("scenarios") && j["scenarios"].is_array()) f.scenarios = j["scenarios"];
  for (const auto& r : j["rows"]) f.rows.push_back(row_from_json(r));
  return f;
}

void write_results(const std::string& path, const ResultsFile& results) {
  const json j = results_to_json(results);
  const auto errs = validate_results(j);
  DCP_CHECK(errs.empty(), "results about to be written do not validate: ", errs.front());
  write_json_atomic(path, j, 1);
}

}  // namespace dcp::harness
