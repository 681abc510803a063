// Planner interface and the registry by name (nccl-tests' shape: the harness knows no planner).
//
// A planner maps (batch, config) to a Plan. It throws dcp::InputError for inputs that cannot be
// planned (e.g. a sample needing more than N ranks), naming the sample, its length and the
// largest length that fits. Planners are registered explicitly (register_*_planners functions
// of sched/ and baselines/), not through static initialisers that a static link may drop.
#pragma once

#include "plan/plan.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dcp::plan {

// Optional context a planner may use (policy passed down explicitly, no globals). Planners that
// do not need it ignore it; the harness fills it from the scenario's cost model and simulator.
struct PlannerOptions {
  int pp = 1;   // pipeline stages the plan will run on (pipeline-aware planners)
  int vpp = 1;  // virtual stages per pipeline stage
  // Seconds one rank of a CP group of `cp_size` ranks spends on a sample of `length_tokens`
  // (forward + backward, all of its pipeline stage's layers, exposed CP communication
  // included). Empty: the planner's built-in model.
  std::function<double(int64_t length_tokens, int cp_size)> sample_time_s;
  // Simulated step time of a whole plan (e.g. the discrete-event simulator). Empty: the
  // planner's own estimate.
  std::function<double(const Plan&)> step_time_s;
  // The same simulation with the memory model: step time, and whether every GPU's peak fits
  // the GPU (a planner that searches must not return a plan the harness would report as oom
  // when a fitting one exists). Empty: no memory model (the token cap M is the only limit).
  struct Estimate {
    double step_s = 0;
    bool fits = true;
    double peak_bytes = 0;
  };
  std::function<Estimate(const Plan&)> estimate;
  // The model's shape, for planners with a FLOP cost model of their own (nvidia-prototype).
  struct ModelShape {
    double hidden = 0, ffn = 0;
    int heads = 0, kv_heads = 0;
    bool gated = true;           // SwiGLU: the first MLP GEMM is 2 x ffn wide
    bool recompute_full = false;
  };
  std::optional<ModelShape> model;
  std::string cost_label;  // how sample_time_s / step_time_s were obtained, for reports
  // Search budget of planners that search (dcp: its local search), in milliseconds; 0: the
  // planner's default. Planners convert it to a count of work units by a fixed calibration, so
  // the same input and budget give the same plan on any machine (see the planner's header).
  double time_budget_ms = 0;
};

class Planner {
 public:
  virtual ~Planner() = default;
  virtual std::string name() const = 0;
  // True for planners whose groups change size per micro-batch (pool N = dp*cp).
  virtual bool dynamic() const = 0;
  // True for planners that search within PlannerOptions::time_budget_ms (dcp); the others ignore
  // it, so `dcpbench schedule --time-budget-ms` refuses them.
  virtual bool searches() const { return false; }
  virtual Plan plan(const Batch& batch, const PlanConfig& config) const = 0;
};

class PlannerRegistry {
 public:
  using Factory = std::function<std::unique_ptr<Planner>(const PlannerOptions&)>;
  void add(const std::string& name, Factory factory);
  // For planners that take no options.
  void add(const std::string& name, std::function<std::unique_ptr<Planner>()> factory);
  bool contains(const std::string& name) const;
  // Throws InputError naming the unknown planner and listing the known ones.
  std::unique_ptr<Planner> make(const std::string& name, const PlannerOptions& options = {}) const;
  std::vector<std::string> names() const;

 private:
  std::map<std::string, Factory> factories_;
};

// Largest supported per-rank budget and pool: their products stay far below 2^63. kMaxTokensPerRank
// is also the longest sample and --max-seqlen (README "Input limits and errors": sample length /
// max_seqlen / max_seqlen_per_rank, 2^40 tokens): check_config, the CLI flags and scenarios use
// it; data::kMaxSampleTokens is the same 2^40 for the generated samples.
inline constexpr int64_t kMaxTokensPerRank = int64_t{1} << 40;
inline constexpr int64_t kMaxPool = int64_t{1} << 20;
// Largest global batch (samples) any planner is given. Measured on this project's 2-core CI-class
// machine: a run of every strategy on 2^18 log-normal samples (64 GPUs) takes ~4 min per step and
// ~200 MB, and time grows about quadratically beyond (the dcp solver); 10^7 samples ran out of
// memory. Real global batches are ~10^3-10^5 samples.
inline constexpr int64_t kMaxBatchSamples = int64_t{1} << 18;
// Largest G x N (samples x DP*CP ranks). A plan can have up to G micro-batches, each covering all
// N ranks, and the simulator and the plan JSON hold per-rank entries for every micro-batch.
// Measured here: bshd at G = 1024, N = 2^20 (2^30) ran 49 s and peaked at 16.9 GB in `run`;
// megatron-pr2000 at G = 2^16, N = 2^20 planned for 123 s. 2^27 keeps either to ~2 GB / seconds.
inline constexpr int64_t kMaxSamplesTimesPool = int64_t{1} << 27;

// Checks the config against the batch the way every planner needs it (dp, cp >= 1,
// 1 <= M <= kMaxTokensPerRank, dp*cp <= kMaxPool, min_cp power of two <= N, lengths and
// max_seqlen in [1, kMaxTokensPerRank], V >= 1, at most kMaxBatchSamples samples, samples x pool
// at most kMaxSamplesTimesPool). Throws InputError naming the bad value.
void check_config(const Batch& batch, const PlanConfig& config);

// Throws InputError if some sample needs more than the pool's ranks: names the first such
// sample, its length and the largest length that fits (N * M).
void check_fits(const Batch& batch, const PlanConfig& config);

}  // namespace dcp::plan
