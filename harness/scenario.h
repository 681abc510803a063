// Scenario files (scenarios/*.json, documented in scenarios/SCHEMA.md; DESIGN.md "Scenario file").
//
// A scenario is dataset x model x cluster x training settings x strategies. load_scenario()
// validates everything at the boundary: an unknown key, a missing required key, a value of the
// wrong type or out of range is an InputError whose message names the file, the key (dotted
// path) and the value, e.g.
//   scenarios/x.json: "cluster.cp"=6 is not a power of two
// Relative dataset file paths are resolved against the scenario file's folder, so a scenario
// runs from any working directory. The types here are plain structs; harness/runner.cpp maps
// them onto impl/cost, impl/data and impl/plan.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace dcp::plan {
class PlannerRegistry;  // plan/planner.h
}  // namespace dcp::plan

namespace dcp::harness {

// Dense Llama-style transformer. Either a preset name (resolved by impl/cost) or a full config.
struct ModelSpec {
  std::string preset;  // non-empty: preset name, the fields below are unused
  std::string name = "custom";  // label of a full config in tables
  int layers = 0;
  int hidden = 0;
  int ffn = 0;
  int heads = 0;
  int kv_heads = 0;
  int vocab = 0;
  bool swiglu = true;
  bool tied_embeddings = false;     // Megatron default true unless --untie-embeddings-and-output-weights
  int64_t position_embeddings = 0;  // learned absolute position rows (0: RoPE)
  bool linear_bias = false;         // Megatron default true unless --disable-bias-linear
  std::string norm = "rmsnorm";     // "rmsnorm" | "layernorm" (Megatron's default)
};

// Length source. kind: "file" (path), "lognormal" (mean, sigma, clamp to [min,max] by the
// sampler's rules), "mixture" (components, each with a token share), "quantiles" (empirical
// quantile table: probability -> length, linearly interpolated).
struct DatasetComponent;

struct DatasetSpec {
  std::string kind;
  std::string path;                 // file: resolved path (absolute or relative to cwd)
  std::string path_as_written;      // file: as written in the scenario (for messages / results)
  double mean = 0;                  // lognormal: mean tokens
  double sigma = 0;                 // lognormal: sigma of log(length)
  int64_t min_len = 1;              // lognormal: lower bound (tokens)
  int64_t max_len = 0;              // lognormal: upper bound (tokens), 0 = none (split at max_seqlen)
  std::string clamp = "clamp";      // lognormal: "clamp" (pile up at the bounds) | "resample"
  std::vector<DatasetComponent> components;  // mixture: (token share, source)
  std::vector<std::pair<double, int64_t>> quantiles;       // quantiles: (probability, length)
  // megatron-mock (also mean, sigma, min_len, max_len): Megatron's MockSFTLowLevelDataset pool
  // (np.random.seed(numpy_seed), pool_size log-normal draws), read in order from sample
  // skip_steps x global_batch by the sequential sampler over the scenario's DP ranks
  // (data::SourceKind::sequence); train_samples: the training split's first samples (the rest
  // never reach training); shift: tokens each sample loses (MockVarlenDataset: L - 1).
  int64_t numpy_seed = 0;
  int64_t pool_size = 1000000;
  int64_t train_samples = 0;        // the scenario's value, or pool_size (parse_scenario)
  int64_t skip_steps = 0;
  int64_t shift = 0;
  int64_t min_seqlen = 1;           // documents shorter than this are dropped or padded
  std::string short_policy = "drop";  // "drop" | "pad"
  int64_t pad_multiple = 1;         // every sample rounded up to a multiple of this
  int64_t pad_multiple_dynamic = 0;  // for dynamic-CP plans (Megatron pads to 2*dp*cp there, to
                                     // 2*cp for static CP; x tp with sequence parallelism);
                                     // 0 = pad_multiple
  std::string long_policy = "split";  // documents longer than training.max_seqlen: "split" | "drop"
};

// One component of a mixture (a separate struct: a std::pair of an incomplete type is not allowed).
struct DatasetComponent {
  double share = 0;  // token share in (0, 1]
  DatasetSpec source;
};

struct ClusterSpec {
  int gpus = 0;
  int tp = 1;
  int pp = 1;
  int cp = 1;
  int vpp = 1;
  int gpus_per_node = 8;
  int nics_per_node = 0;  // NICs per node for collectives (default: one per GPU)
  std::string hardware = "h100-sxm";
  int dp() const { return gpus / (tp * pp * cp); }
  int pool() const { return dp() * cp; }
};

struct TrainingSpec {
  int64_t global_batch = 0;
  int64_t max_seqlen = 0;           // longer documents are split into max_seqlen chunks + rest
  int64_t max_seqlen_per_rank = 0;  // M
  int min_cp = 1;
  std::string recompute = "none";   // "none" | "full"
  std::string precision = "bf16";
  int steps = 1;
  uint64_t seed = 0;
  std::string attention_backend = "fa3";  // "fa2" | "fa3" | "cudnn" | "dcpbench"
  bool distributed_optimizer = false;     // --use-distributed-optimizer
  std::string grad_reduce = "fp32";       // "fp32" (Megatron's --bf16 default) | "bf16"
  bool overlap_grad_reduce = false;       // --overlap-grad-reduce (+ --overlap-param-gather)
  bool sequence_parallel = false;         // --sequence-parallel (Megatron's default off); required
                                          // with tp > 1, the only TP the cost model charges
  bool check_for_nan_in_grad = true;      // --check-for-nan-in-loss-and-grad (Megatron's default:
                                          // on; --no-check-for-nan-in-loss-and-grad turns it off)
  bool interleaved_p2p_calls = true;      // sim::ScheduleInput::interleaved_calls (SCHEMA.md)
  bool gradient_accumulation_fusion = true;  // false: --no-gradient-accumulation-fusion
  std::string data_path = "megatron";     // "megatron" | "prefetch" (cost::DataPath)
  bool cross_entropy_fusion = false;      // --cross-entropy-loss-fusion
  std::string cross_entropy_fusion_impl = "native";  // --cross-entropy-fusion-impl native|te
};

// A published number to print beside ours (never mixed with ours: it carries its source).
struct PublishedValue {
  std::string strategy;  // our strategy that corresponds to the published one
  std::optional<double> tflops_per_gpu;
  std::optional<double> step_time_ms;
  std::optional<double> speedup_vs_packing;
};

struct Published {
  std::string source;  // citation
  std::string note;    // what differs from our setup
  std::string hardware;  // what theirs ran on, where the source says ("" = unpublished)
  std::string statistic = "mean";  // how their step times were reduced over iterations: "mean" |
                                   // "trimmed_mean_10" (Megatron's benchmark_dcp.sh); ours are
                                   // reduced the same way beside them
  std::vector<PublishedValue> values;
};

struct Scenario {
  std::string file;  // path as given to load_scenario
  std::string name;
  std::string description;
  std::vector<std::string> notes;
  ModelSpec model;
  DatasetSpec dataset;
  ClusterSpec cluster;
  TrainingSpec training;
  std::vector<std::string> strategies;
  std::optional<Published> published;
  std::string calibration;  // optional calibration file (resolved path), empty = profile defaults
  std::string reference_strategy = "packing";  // speedups are against this strategy
  std::map<std::string, std::string> sources;  // dotted key -> where its value comes from
};

// Limits (README "Input limits and errors"): a scenario file is at most kMaxScenarioBytes, JSON nesting at
// most core's kMaxJsonDepth (checked while parsing), mixtures nest at most
// data::kMaxMixtureDepth levels, training.global_batch at most plan::kMaxBatchSamples.
inline constexpr int64_t kMaxScenarioBytes = int64_t{16} << 20;  // 16 MiB (ours are ~4 KB)
// global_batch x pp x vpp: the per-sample cost model loops over every virtual pipeline stage, and
// the simulator keeps an op per (micro-batch, virtual stage): measured here, 2^23 (1024 samples,
// pp 1024, vpp 8) took 19 s and 0.9 GB for the five strategies; 2^27 ran out of memory. A
// scenario over it is refused, and --tune tries no VPP that goes over it.
inline constexpr int64_t kMaxSamplesTimesStages = int64_t{1} << 23;

// Reads and validates a scenario file. Throws InputError (file, key, value) on any problem. Its
// strategies must be built-in planners (harness/registry.h).
Scenario load_scenario(const std::string& path);

// Validates already-parsed JSON; `file` is used in messages and to resolve relative paths. With a
// `registry`, every strategy must be one of its planners (check_strategy_names), checked before
// the keys that refer to the strategies ("published.values", "reference_strategy"), so a typo is
// named as itself; without one, the names are left to prepare_scenario (harness/runner.h).
Scenario parse_scenario(const nlohmann::json& j, const std::string& file,
                        const plan::PlannerRegistry* registry = nullptr);

// Throws InputError naming the first of s.strategies that `registry` does not know:
//   scenarios/x.json: "strategies[1]"="dcpx" is not a known planner (known: bshd, dcp, ...)
void check_strategy_names(const Scenario& s, const plan::PlannerRegistry& registry);

// The files a scenario reads: the scenario itself, its calibration and every length file of its
// dataset (mixtures included), for check_output_not_input (core/files.h).
std::vector<std::string> input_files(const Scenario& s);

}  // namespace dcp::harness
