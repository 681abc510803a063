// The benchmark loop behind `dcpbench run`: for each scenario and step, sample a global batch
// (impl/data), plan it with every strategy (planner registry), check each plan with
// plan::find_violation (an invalid plan or a planner error is recorded in its row, never
// hidden), simulate the valid ones (impl/sim over impl/cost) and collect result rows.
//
// Every row of one (scenario, step) sees the same real lengths, so the strategies' useful FLOPs are
// equal and speedup_vs_packing (reference step time / this step time; the reference is the
// scenario's reference_strategy, default packing) is a speed ratio. Dynamic-CP planners may see
// those lengths padded to a different multiple (dataset.pad_multiple_dynamic), as in Megatron.
// A plan that does not fit the GPU's memory (impl/cost/memory.h) is recorded as oom, without speed
// figures. The harness names no strategy: it asks the registry, and the planner whether it is
// dynamic.
// This file is the only place that maps scenario structs onto the impl/ modules; tune.h builds
// the --tune and --sensitivity runs from the pieces declared here.
#pragma once

#include "cost/time_model.h"
#include "data/dataset.h"
#include "harness/results.h"
#include "harness/scenario.h"
#include "plan/async_planner.h"
#include "plan/planner.h"
#include "sim/simulator.h"

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

namespace dcp::harness {

// What made a row with figures, for RunOptions::on_row (valid during the call only).
struct RowSource {
  const plan::Plan& plan;
  const plan::Batch& batch;          // the lengths the plan was made for (possibly padded)
  const cost::CostModel& cm;         // at the row's setting
  std::span<const int64_t> real_lengths;
  const sim::StepResult& step;       // the simulated step (rank_busy_s, schedule)
};

// Progress on long runs (RunOptions::heartbeat): run_strategy says which step it is on, and a
// ticker thread prints that every kHeartbeatSeconds while the run goes on, so a run whose step
// takes minutes (262144 samples, or pp 1024 x vpp 8) is never silent for long. Every progress
// line of a run goes through progress_line(), one whole line per write under one lock, so the
// ticker's lines never land inside another.
inline constexpr int kHeartbeatSeconds = 30;
class Heartbeat {
 public:
  explicit Heartbeat(std::ostream& out, std::chrono::milliseconds period = std::chrono::seconds(kHeartbeatSeconds));
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;
  void at(const std::string& where);     // what the next tick reports ("" = nothing)
  void print(const std::string& line);   // writes line as is, under the stream's lock

 private:
  void loop();
  std::ostream& out_;
  const std::chrono::milliseconds period_;
  const std::chrono::steady_clock::time_point start_;
  std::mutex mutex_;      // where_, stop_
  std::mutex out_mutex_;  // the stream
  std::condition_variable wake_;
  bool stop_ = false;
  std::string where_;
  std::thread thread_;
};
void note_progress(Heartbeat* heartbeat, const std::string& where);
struct RunOptions;
// Writes `line` (a newline is added) to options.progress, if any.
void progress_line(const RunOptions& options, const std::string& line);
// Seconds since t0 for a progress line: "0.002 s", "12.3 s".
std::string elapsed_text(std::chrono::steady_clock::time_point t0);

struct RunOptions {
  std::optional<int> steps;             // overrides every scenario's training.steps
  std::vector<std::string> strategies;  // non-empty: only these (each must be in the scenario)
  std::ostream* progress = nullptr;     // one line per (scenario, step), e.g. std::cerr
  Heartbeat* heartbeat = nullptr;       // set by run_scenarios when progress is: where the run is
  std::string phase;                    // what the heartbeat says besides the step ("draw 3 of 20", ...)
  std::string command;                  // recorded in the context
  bool detail = true;                   // step 0 rows keep rank_busy_s and the plan picture
  bool tune = false;                    // also search each strategy's knobs (tune.h)
  bool sensitivity = false;             // also vary every uncertain parameter by +-20% (tune.h)
  int draws = 1;                        // > 1: also re-run on draws - 1 further data draws (draws.h)
  double time_budget_ms = 0;            // PlannerOptions::time_budget_ms of every planner (0: their default)
  // Plan every step inside the loop instead of step i+1 on a background thread while step i is
  // simulated (plan/async_planner.h; README "Async planning"). The plans are the same.
  bool sync_planning = false;
  // Called for every row with figures (valid plan, fits) right after its simulation, on the
  // runner's thread, in the order the rows are made (the measured backend replays the row's rank
  // share on the GPU: harness/measured.h). Null: nothing.
  std::function<void(ResultRow&, const RowSource&)> on_row;
  // Called once every input is checked (each scenario prepared, its batches drawn), before the
  // first simulation: `run` probes its --out folder there (core/files.h), so bad input leaves the
  // folder untouched. Null: nothing.
  std::function<void()> on_checked;
};

// The knobs a strategy can be run at: per-rank token budget M, static CP size (static planners;
// dp = pool / cp), virtual pipeline size.
struct Setting {
  int64_t max_seqlen_per_rank = 0;
  int cp = 1;
  int vpp = 1;
  nlohmann::json to_json() const;
};

// Everything of one scenario that does not depend on the strategy or the setting; the batches are
// sampled once.
struct PreparedScenario {
  const Scenario* scenario = nullptr;
  cost::CostModel cm;
  data::LengthSource source;
  data::SamplerConfig sampler;
  std::vector<std::string> strategies;
  int steps = 1;
  std::vector<data::SampledBatch> batches;  // [steps]
};

PreparedScenario prepare_scenario(const Scenario& s, const RunOptions& options,
                                  const plan::PlannerRegistry& registry);
Setting published_setting(const Scenario& s);
// Draws the scenario's global batches of steps first_step .. first_step + p.steps - 1 into
// p.batches (each step's batch depends only on its step number).
void sample_batches(PreparedScenario& p, int first_step = 0);
// What run_strategy asks the planner for step p.batches[step]: the batch it plans (real lengths, padded to
// the scenario's dynamic multiple for dynamic planners), the config, and the planner with this
// cost model's callbacks (which refer to cm and p: they must outlive the request's planner).
plan::PlanRequest plan_request_of(const PreparedScenario& p, const cost::CostModel& cm, const std::string& strategy,
                                  const plan::PlanConfig& config, int step, double time_budget_ms,
                                  const plan::PlannerRegistry& registry);
// The length a planner is given for a sample of `real_length` tokens: padded to the dataset's
// pad_multiple (as the sampler pads), or, for a dynamic planner, to pad_multiple_dynamic when the
// scenario sets one (Megatron pads to 2*dp*cp with dynamic CP, to 2*cp without, each times tp with
// sequence parallelism). `cp`: the static
// CP size of the setting (a --tune setting may differ from the scenario's; static_pad_multiple).
int64_t planner_length(const Scenario& s, int64_t real_length, bool dynamic, int cp);
// The padding multiple of a static-CP planner at static CP size `cp`. Megatron pads to 2 x cp
// without dynamic CP (1 at cp 1; sft_dataset.py _calculate_padding_divisor, 3b309c627e:77-95),
// times tp with sequence parallelism (d48bd6be0a:99-111);
// a scenario's pad_multiple states that at its own cp. When it follows that rule, a setting at
// another cp pads to that cp's 2 x cp x tp (tp at cp 1; until 2026-11-28 a tuned static CP kept the published
// multiple: CommonCrawl's packing at cp 4 padded to 16, not 8; Megatron's example at cp 16 to 8,
// which TE's THD kernels refuse); a pad_multiple of the scenario's own choosing is kept.
int64_t static_pad_multiple(const Scenario& s, int cp);
// Plan config and cost model of a setting (throws InputError if the setting is impossible).
plan::PlanConfig plan_config_of(const Scenario& s, const Setting& setting);
cost::CostModel cost_model_at(const cost::CostModel& base, const Setting& setting);

// Rows of one strategy at one setting over every step, in step order; speedups not filled.
// `cm` is the cost model to simulate with (the scenario's, or a sensitivity variant);
// `planner_cm`, when given, the one the cost-model planners (dcp, nvidia-prototype) plan with:
// a sensitivity variant stands for hardware that differs from the calibration, which a planner
// on the real cluster would not know either (tune.h).
std::vector<ResultRow> run_strategy(const PreparedScenario& p, const cost::CostModel& cm, const std::string& strategy,
                                    const Setting& setting, const std::string& setting_label,
                                    const RunOptions& options, const plan::PlannerRegistry& registry,
                                    const cost::CostModel* planner_cm = nullptr);

// Scenario -> impl/ configuration. Each throws InputError naming the scenario file and key.
// The scenario's cost model as planner options (time per rank of a sample on a CP group, the
// simulated step time and the estimate with the memory model on this batch); the returned
// callbacks refer to cm and sb, which must outlive them.
plan::PlannerOptions planner_options_of(const cost::CostModel& cm, const data::SampledBatch& sb, int64_t m_tokens);
// The same over the batch the planner is given (dynamic planners see the lengths padded to their
// multiple), so the planner's simulator scores plans exactly as the result row will; the callbacks
// keep `batch` alive and refer to cm and real_lengths, which must outlive them.
plan::PlannerOptions planner_options_of(const cost::CostModel& cm, std::shared_ptr<const plan::Batch> batch,
                                        std::span<const int64_t> real_lengths, int64_t m_tokens);
cost::CostModel cost_model_of(const Scenario& s);
data::LengthSource length_source_of(const Scenario& s);
data::SamplerConfig sampler_config_of(const Scenario& s);
plan::PlanConfig plan_config_of(const Scenario& s);  // at the published setting

// Strategies of the scenario after the RunOptions filter, each checked against the registry.
std::vector<std::string> strategies_of(const Scenario& s, const RunOptions& options,
                                       const plan::PlannerRegistry& registry);

// Runs every scenario; rows in (scenario, step, strategy) order.
ResultsFile run_scenarios(const std::vector<Scenario>& scenarios, const RunOptions& options,
                          const plan::PlannerRegistry& registry);

}  // namespace dcp::harness
