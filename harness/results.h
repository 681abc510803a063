// Results file, schema "dcpbench.results.v1" (DESIGN.md "Results file"): the only thing the
// table, the charts (harness/plot/plot_results.py) and the gate read.
//
//   {"schema": "dcpbench.results.v1",
//    "context": {"git_sha", "toolchain" (compiler, target), "date", "host", "device", "cost_model",
//                "calibration", "command",
//                "tune_pick" ("held-out" | "none"; absent before 2026-12-06: in-sample; harness/tune.h)},
//    "scenarios": [{"name", "gpus", "dp", "cp", "pp", "tp", "pool" (read: the rank_busy_s length),
//                   "reference_strategy" (read: the speedups' reference), ... (runner.cpp
//                   scenario_facts; the gate compares gate.cpp's kConfigFacts among them),
//                   "data": {"steps", "documents_drawn", "samples", "samples_dropped",
//                   "documents_split", "chunks_discarded", "real_tokens", "padding_tokens"}
//                   (non-negative integers, the run's own batches summed; runner.cpp data_facts;
//                   absent before 2026-12-07),
//                   "published": {...} | absent}],
//    "rows": [ one object per (scenario, strategy, setting, step) ]}
//
// Row keys (required, with their JSON types; metrics are null when the plan is invalid or does
// not fit the GPU's memory, "oom": true):
//   scenario (string), strategy (string), step (int), plan_valid (bool), source (string),
//   step_time_s, tflops_per_gpu, tokens_per_s_per_gpu, balance, bubble_frac, comm_frac,
//   plan_efficiency, speedup_vs_packing (number|null), microbatches (int|null).
//   speedup_vs_packing is the speedup over the scenario's reference strategy ("reference",
//   default packing; the key keeps its v1 name).
// Optional row keys: error (string), oom (bool), note (string: the planner's note on its plan,
//   plan::Plan::note, e.g. nvidia-prototype's fallback), setting ("published" | "tuned"), knobs (object:
//   max_seqlen_per_rank, cp, vpp), reference (string), peak_memory_gib, solve_ms, lower_bound_s,
//   compute_s, comm_s, overhead_s, bubble_s, imbalance_s (means over GPUs), busiest_idle_s (the
//   busiest GPU's idle time: step_time_s - lower_bound_s - this is its busy time above the
//   bound), useful_tflop, tokens, samples,
//   rank_busy_s ([N] per pool rank), plan ([[ [first_rank, cp_size, samples, tokens] per group ]
//   per micro-batch]). rank_busy_s and plan are kept for step 0 only (the charts draw one step).
//   planning ("async" | "sync"), plan_hidden_ms, plan_exposed_ms, plan_wait_ms: RowPlanning below
//   (README "Async planning"); written only when planning is set.
// Measured rows (source "measured:<device>", `run --backend cuda`, harness/measured.h): one pool
//   rank's share of the plan on one pipeline stage replayed on that device. step_time_s is that
//   GPU's busy time for the step (forward, recompute and backward of every micro-batch of the
//   share; no pipeline bubble, DP or CP transfer), tflops_per_gpu and tokens_per_s_per_gpu the
//   share's useful FLOPs and tokens over it; balance, bubble_frac, comm_frac and plan_efficiency
//   are null (one GPU measures none of them); "measured" (object) says which rank and stage, the
//   ring's stand-in copies and the simulator's prediction of the same work (measured.h).
// The file also carries "aggregates" (one per scenario, strategy and setting: report.h's
// aggregate(), computed once here in C++; the charts draw from them) and, when asked for,
// "sensitivity" (harness/tune.h) and "draws" (harness/draws.h).
// Rows go to and from JSON through nlohmann's NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT
// (results.cpp). Readers ignore unknown fields; validate_results() checks the required ones.
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace dcp::harness {

// x and y equal to a relative `rel` of the larger (the results reader's check of a file's
// aggregates, the gate's of a step's batch and peak memory); false when either is NaN.
inline bool within_rel(double x, double y, double rel) {
  return x == y || std::fabs(x - y) <= rel * std::max(std::fabs(x), std::fabs(y));
}

inline constexpr const char* kResultsSchema = "dcpbench.results.v1";
inline constexpr int kMaxDraws = 1000;  // `run --draws` (harness/draws.h)

// Identity of a row (what was run) and its speed metrics; ResultRow is both plus the optional
// parts. Split so each half goes through one NLOHMANN_DEFINE_TYPE_* macro.
struct RowInfo {
  std::string scenario;
  std::string strategy;
  int step = 0;
  bool plan_valid = false;
  bool oom = false;          // plan valid but does not fit the GPU's memory: no speed figures
  std::string error;         // why the plan is invalid or could not be made (empty if valid)
  std::string note;          // the planner's note on this plan (plan::Plan::note), empty if none
  std::string source;        // "simulated:<cost-model>@<calibration>" or "measured:<device>"
  std::string setting = "published";  // "published" (as the scenario sets it) | "tuned"
  std::string reference = "packing";  // strategy the speedup is measured against
  double peak_memory_gib = 0;         // simulated peak per GPU (GiB); also set when oom
  double useful_tflop = 0;  // useful TFLOP of the whole global batch (same for every strategy)
  int64_t tokens = 0;
  int64_t samples = 0;
};

struct RowMetrics {  // meaningful only if plan_valid and not oom
  double step_time_s = 0;
  double tflops_per_gpu = 0;        // useful FLOPs (real lengths, no recompute) / time / GPUs
  double tokens_per_s_per_gpu = 0;
  int microbatches = 0;             // micro-batches per DP x CP rank (the plan's count)
  double balance = 0;               // max / mean rank busy time
  double bubble_frac = 0;           // pipeline bubble / step time
  double comm_frac = 0;             // exposed communication / step time
  double plan_efficiency = 0;       // lower bound / step time
  double solve_ms = 0;
  double lower_bound_s = 0;
  double compute_s = 0;
  double comm_s = 0;
  double overhead_s = 0;            // host floors, micro-batch and iteration costs
  double bubble_s = 0;
  double imbalance_s = 0;
  double busiest_idle_s = 0;        // idle time of the busiest GPU (sim::ScheduleResult)
};

// When the plan was made (README "Async planning"). solve_ms (RowMetrics) is the planner's measured
// wall time; these split it against the training step:
struct RowPlanning {
  std::string planning;        // "async": planned while the previous step ran; "sync": inside the step
  double plan_hidden_ms = 0;   // MODELLED: min(solve_ms, previous step's simulated step time) when
                               // async (0 for step 0, after a step without figures, and when sync)
  double plan_exposed_ms = 0;  // solve_ms - plan_hidden_ms: planning the step would wait for
  double plan_wait_ms = 0;     // MEASURED: wall time the runner waited for this plan on the host
                               // (the host's simulation of the previous step ran meanwhile)
};

struct ResultRow : RowInfo, RowMetrics, RowPlanning {
  std::optional<double> speedup_vs_packing;  // reference step time / this step time, same batch
  nlohmann::json knobs;             // the setting's knobs (object) or null
  std::vector<double> rank_busy_s;  // step 0 only
  nlohmann::json plan;              // step 0 only; null otherwise
  nlohmann::json measured;          // measured rows: the object above; null otherwise
  bool has_metrics() const { return plan_valid && !oom; }
  bool is_measured() const { return source.rfind("measured:", 0) == 0; }
};

struct ResultsFile {
  nlohmann::json context;                // git_sha, date, host, device, cost_model, calibration
  nlohmann::json scenarios = nlohmann::json::array();  // per-scenario facts (see above)
  std::vector<ResultRow> rows;
  nlohmann::json sensitivity;            // null, or harness/tune.h's sensitivity section
  nlohmann::json draws;                  // null, or harness/draws.h's section
};

nlohmann::json row_to_json(const ResultRow& row);
ResultRow row_from_json(const nlohmann::json& j);  // ignores unknown fields
nlohmann::json results_to_json(const ResultsFile& results);

// Fills speedup_vs_packing of rows[first..]: the step time of the row of their reference strategy
// with the same scenario, setting and step over theirs, or none when that row has no numbers.
// The writer's and the reader's check (results_from_json) are this one function.
void fill_speedups(std::vector<ResultRow>& rows, size_t first = 0);

// Checks schema, context and every row's required keys and types. Returns the problems found
// (empty when valid), each naming the row index and key.
std::vector<std::string> validate_results(const nlohmann::json& j);

// Reads and validates a results file; InputError naming the file and the first problem.
// The results file of already-parsed JSON: validate_results, the rows, and their agreement (every
// strategy of a scenario and setting has the same steps, once each; the aggregates are what the
// rows give). InputError naming `path` otherwise. read_results is this over the file's JSON.
ResultsFile results_from_json(const nlohmann::json& j, const std::string& path);
ResultsFile read_results(const std::string& path);

// Writes atomically (temp file + rename). Where step 0's per-rank detail (rank_busy_s, plan) would
// take the file past kMaxJsonFileBytes it is left out, with a line on `note` when given.
void write_results(const std::string& path, const ResultsFile& results, std::ostream* note = nullptr);

// Context for a run now: git sha (dcp::source_git_sha, core/provenance.h), UTC date, host name,
// device, cost model and calibration labels, command line.

nlohmann::json make_context(const std::string& device, const std::string& cost_model,
                            const std::string& calibration, const std::string& command);

// "simulated:<cost_model>@<calibration>"
std::string simulated_source(const std::string& cost_model, const std::string& calibration);

}  // namespace dcp::harness
