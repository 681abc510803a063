// The benchmark loop (see runner.h).
#include "harness/runner.h"

#include "core/error.h"
#include "core/files.h"
#include "core/json_io.h"
#include "core/text.h"
#include "data/numpy_legacy.h"
#include "harness/draws.h"
#include "harness/tune.h"
#include "plan/async_planner.h"
#include "plan/validate.h"
#include "sim/simulator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <set>
#include <span>

namespace dcp::harness {
namespace {

using nlohmann::json;

// Re-throws an InputError from impl/ with the scenario file and key in front.
template <typename F>
auto at_key(const Scenario& s, const std::string& key, const json& value, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const InputError& e) {
    throw InputError(show_path(s.file) + ": \"" + key + "\"=" + json_excerpt(value, 80) + ": " + e.what());
  }
}

std::string fmt_g(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

std::string elapsed_text(std::chrono::steady_clock::time_point t0) {
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return fmt(s < 1 ? "%.3f s" : "%.1f s", s);
}

namespace {

std::string dataset_label(const DatasetSpec& d) {
  std::string l;
  if (d.kind == "file") {
    l = "file " + d.path_as_written;
  } else if (d.kind == "lognormal") {
    l = "lognormal(mean " + fmt_g(d.mean) + ", sigma " + fmt_g(d.sigma);
    if (d.min_len > 1 || d.max_len > 0) l += ", " + fmt_g(double(d.min_len)) + ".." + (d.max_len ? fmt_g(double(d.max_len)) : "inf");
    l += ")";
  } else if (d.kind == "quantiles") {
    l = "quantiles(" + std::to_string(d.quantiles.size()) + " points)";
  } else if (d.kind == "megatron-mock") {
    l = "megatron-mock(numpy seed " + std::to_string(d.numpy_seed) + ", lognormal mean " + fmt_g(d.mean) + ", sigma " +
        fmt_g(d.sigma) + ", " + fmt_g(double(d.min_len)) + ".." + fmt_g(double(d.max_len)) + ", " +
        std::to_string(d.train_samples) + " of " + std::to_string(d.pool_size) + " in order from step " +
        std::to_string(d.skip_steps) + (d.shift ? ", minus " + std::to_string(d.shift) + " token" : std::string()) + ")";
  } else {
    l = "mixture(";
    for (size_t i = 0; i < d.components.size(); ++i)
      l += (i ? ", " : "") + fmt_g(d.components[i].share) + " " + dataset_label(d.components[i].source);
    l += ")";
  }
  return l;
}

data::LengthSource source_of(const Scenario& s, const DatasetSpec& d, const std::string& key) {
  if (d.kind == "file") {
    return at_key(s, key + ".path", json(d.path_as_written), [&] { return data::lengths_file_source(d.path); });
  }
  if (d.kind == "lognormal") {
    const auto mode = d.clamp == "resample" ? data::ClampMode::resample : data::ClampMode::clamp;
    return at_key(s, key + ".mean", json(d.mean), [&] {
      return data::lognormal_source_from_mean(d.mean, d.sigma, d.min_len, d.max_len, mode);
    });
  }
  if (d.kind == "megatron-mock") {
    // Megatron's pool, replayed in the order its sequential sampler hands it to the scenario's DP
    // ranks (data::SourceKind::sequence; the dataset's DP at the published setting: a --tune
    // setting at another static CP keeps the same batches).
    const int dp = s.cluster.dp();
    return at_key(s, key + ".mean", json(d.mean), [&] {
      std::vector<int64_t> pool = data::megatron_mock_lognormal_lengths(
          static_cast<uint32_t>(d.numpy_seed), d.train_samples, d.mean, d.sigma, d.min_len, d.max_len);
      for (int64_t& l : pool) l -= d.shift;
      // skip_steps x global_batch < train_samples: checked when the scenario is read.
      return data::sequence_source(std::move(pool), d.skip_steps * s.training.global_batch, dp, "megatron-mock");
    });
  }
  if (d.kind == "quantiles") {
    std::vector<data::QuantilePoint> pts;
    for (const auto& [p, len] : d.quantiles) pts.push_back({p, static_cast<double>(len)});
    return at_key(s, key + ".quantiles", json("..."), [&] { return data::quantile_source(pts, "quantiles"); });
  }
  std::vector<data::LengthSource> comps;
  std::vector<double> shares;
  for (size_t i = 0; i < d.components.size(); ++i) {
    comps.push_back(source_of(s, d.components[i].source, key + ".components[" + std::to_string(i) + "]"));
    shares.push_back(d.components[i].share);
  }
  return data::mixture_source(std::move(comps), std::move(shares));
}

json plan_picture(const plan::Plan& p, const plan::Batch& batch) {
  json mbs = json::array();
  for (const auto& mb : p.microbatches) {
    json groups = json::array();
    for (const auto& g : mb.groups) {
      int64_t tokens = 0;
      for (int id : g.samples) tokens += batch.lengths[static_cast<size_t>(id)];
      groups.push_back(json::array({g.first_rank, g.cp_size, static_cast<int64_t>(g.samples.size()), tokens}));
    }
    mbs.push_back(std::move(groups));
  }
  return mbs;
}

// What the dataset rules did to the run's batches, summed over its steps (helper-67: 42.5% of the
// documents llama13b-github draws fall below its 256-token minimum and are dropped, which no
// output showed): the table prints it under the scenario's header.
json data_facts(const std::vector<data::SampledBatch>& batches) {
  int64_t drawn = 0, samples = 0, dropped = 0, split = 0, discarded = 0, real = 0, padding = 0;
  for (const auto& b : batches) {
    drawn += b.documents_drawn;
    samples += static_cast<int64_t>(b.real_lengths.size());
    dropped += b.samples_dropped;
    split += b.documents_split;
    discarded += b.chunks_discarded;
    real += std::accumulate(b.real_lengths.begin(), b.real_lengths.end(), int64_t{0});
    padding += b.padding_tokens;
  }
  return {{"steps", static_cast<int64_t>(batches.size())}, {"documents_drawn", drawn}, {"samples", samples},
          {"samples_dropped", dropped}, {"documents_split", split}, {"chunks_discarded", discarded},
          {"real_tokens", real}, {"padding_tokens", padding}};
}

json scenario_facts(const Scenario& s, const cost::CostModel& cm, int steps) {
  json f;
  f["name"] = s.name;
  f["file"] = s.file;
  if (!s.description.empty()) f["description"] = s.description;
  f["model"] = cm.model.name;
  f["dataset"] = dataset_label(s.dataset);
  // What the label leaves out and the batches depend on: the filters and the padding (the gate
  // compares it; helper-60's review).
  f["dataset_rules"] = "min_seqlen " + std::to_string(s.dataset.min_seqlen) + " (shorter: " + s.dataset.short_policy +
                       "), longer than max_seqlen: " + s.dataset.long_policy + ", pad_multiple " +
                       std::to_string(s.dataset.pad_multiple) + ", pad_multiple_dynamic " +
                       (s.dataset.pad_multiple_dynamic > 0 ? std::to_string(s.dataset.pad_multiple_dynamic)
                                                           : std::string("= pad_multiple")) +
                       (s.dataset.kind == "lognormal" ? ", lognormal bounds: " + s.dataset.clamp : std::string());
  f["gpus"] = s.cluster.gpus;
  f["tp"] = s.cluster.tp;
  f["pp"] = s.cluster.pp;
  f["cp"] = s.cluster.cp;
  f["vpp"] = s.cluster.vpp;
  f["dp"] = s.cluster.dp();
  f["pool"] = s.cluster.pool();
  f["gpus_per_node"] = s.cluster.gpus_per_node;
  f["hardware"] = cm.hardware.name;
  f["calibration"] = cm.hardware.calibration;
  f["calibration_obtained"] = cm.hardware.obtained;
  f["global_batch"] = s.training.global_batch;
  f["max_seqlen"] = s.training.max_seqlen;
  f["max_seqlen_per_rank"] = s.training.max_seqlen_per_rank;
  f["min_cp"] = s.training.min_cp;
  f["recompute"] = s.training.recompute;
  f["precision"] = s.training.precision;
  f["steps"] = steps;
  f["seed"] = s.training.seed;
  f["strategies"] = s.strategies;
  f["reference_strategy"] = s.reference_strategy;
  f["attention_backend"] = s.training.attention_backend;
  f["distributed_optimizer"] = s.training.distributed_optimizer;
  f["grad_reduce"] = s.training.grad_reduce;
  f["overlap_grad_reduce"] = s.training.overlap_grad_reduce;
  f["sequence_parallel"] = s.training.sequence_parallel;
  f["check_for_nan_in_grad"] = s.training.check_for_nan_in_grad;
  f["interleaved_p2p_calls"] = s.training.interleaved_p2p_calls;
  f["gradient_accumulation_fusion"] = s.training.gradient_accumulation_fusion;
  f["cross_entropy_fusion"] = s.training.cross_entropy_fusion;
  f["cross_entropy_fusion_impl"] = s.training.cross_entropy_fusion_impl;
  f["data_path"] = s.training.data_path;
  f["nics_per_node"] = s.cluster.nics_per_node;
  f["memory_gib"] = cm.hardware.memory_bytes / (1024.0 * 1024 * 1024);
  f["notes"] = s.notes;
  if (!s.sources.empty()) f["sources"] = s.sources;
  if (s.published) {
    json p;
    p["source"] = s.published->source;
    if (!s.published->note.empty()) p["note"] = s.published->note;
    if (!s.published->hardware.empty()) p["hardware"] = s.published->hardware;
    p["statistic"] = s.published->statistic;
    json vals = json::array();
    for (const auto& v : s.published->values) {
      json e;
      e["strategy"] = v.strategy;
      if (v.tflops_per_gpu) e["tflops_per_gpu"] = *v.tflops_per_gpu;
      if (v.step_time_ms) e["step_time_ms"] = *v.step_time_ms;
      if (v.speedup_vs_packing) e["speedup_vs_packing"] = *v.speedup_vs_packing;
      vals.push_back(e);
    }
    p["values"] = vals;
    f["published"] = p;
  }
  return f;
}

}  // namespace

cost::CostModel cost_model_of(const Scenario& s) {
  cost::CostModel cm;
  if (!s.model.preset.empty()) {
    cm.model = at_key(s, "model", json(s.model.preset), [&] { return cost::model_preset(s.model.preset); });
    // A preset's vocabulary is its tokenizer's; Megatron pads it to a multiple of
    // --make-vocab-size-divisible-by (128) x tp (megatron/training/vocab_utils.py:58 at
    // d98e8a64dd). Every preset's is a multiple of 128, so only tp > 1 can change it (Llama-3's
    // 128256 becomes 128512 at tp 4, 129024 at tp 8). A full config states its padded vocabulary.
    const int64_t multiple = int64_t{128} * s.cluster.tp;
    cm.model.vocab = (cm.model.vocab + multiple - 1) / multiple * multiple;
  } else {
    cm.model.name = s.model.name;
    cm.model.layers = s.model.layers;
    cm.model.hidden = s.model.hidden;
    cm.model.ffn = s.model.ffn;
    cm.model.heads = s.model.heads;
    cm.model.kv_heads = s.model.kv_heads;
    cm.model.vocab = s.model.vocab;
    cm.model.swiglu = s.model.swiglu;
    cm.model.tied_embeddings = s.model.tied_embeddings;
    cm.model.position_embeddings = s.model.position_embeddings;
    cm.model.linear_bias = s.model.linear_bias;
    cm.model.layernorm = s.model.norm == "layernorm";
    at_key(s, "model", json("{...}"), [&] { cost::validate_model(cm.model); return 0; });
  }
  cm.hardware = at_key(s, "cluster.hardware", json(s.cluster.hardware),
                       [&] { return cost::hardware_preset(s.cluster.hardware); });
  if (!s.calibration.empty()) {
    cm.hardware = at_key(s, "calibration", json(s.calibration),
                         [&] { return cost::load_calibration_file(cm.hardware, s.calibration); });
  }
  cm.cluster.gpus = s.cluster.gpus;
  cm.cluster.tp = s.cluster.tp;
  cm.cluster.pp = s.cluster.pp;
  cm.cluster.cp = s.cluster.cp;
  cm.cluster.vpp = s.cluster.vpp;
  cm.cluster.gpus_per_node = s.cluster.gpus_per_node;
  cm.cluster.nics_per_node = s.cluster.nics_per_node;
  at_key(s, "cluster", json("{...}"), [&] { cost::validate_cluster(cm.cluster); return 0; });
  at_key(s, "cluster", json("{...}"), [&] { cost::validate_layout(cm.model, cm.cluster); return 0; });
  cm.training.recompute_full = s.training.recompute == "full";
  cm.training.attention_backend = s.training.attention_backend;
  cm.training.distributed_optimizer = s.training.distributed_optimizer;
  cm.training.grad_reduce_fp32 = s.training.grad_reduce == "fp32";
  cm.training.overlap_grad_reduce = s.training.overlap_grad_reduce;
  cm.training.check_for_nan_in_grad = s.training.check_for_nan_in_grad;
  cm.training.interleaved_p2p_calls = s.training.interleaved_p2p_calls;
  cm.training.gradient_accumulation_fusion = s.training.gradient_accumulation_fusion;
  cm.training.data_path = s.training.data_path == "prefetch" ? cost::DataPath::prefetch : cost::DataPath::megatron;
  cm.training.cross_entropy_fusion = s.training.cross_entropy_fusion;
  cm.training.cross_entropy_te = s.training.cross_entropy_fusion_impl == "te";
  // The backend must have a table in the profile (a calibration may name others).
  at_key(s, "training.attention_backend", json(s.training.attention_backend), [&] {
    return cm.hardware.attn_efficiency(cm.training.attention_backend, cost::AttnKind::fwd_causal, 1024, 1024,
                                       static_cast<int>(cm.model.head_dim_or_default()));
  });
  return cm;
}

data::LengthSource length_source_of(const Scenario& s) {
  data::LengthSource src = source_of(s, s.dataset, "dataset");
  at_key(s, "dataset", json(dataset_label(s.dataset)), [&] { data::validate_source(src); return 0; });
  return src;
}

data::SamplerConfig sampler_config_of(const Scenario& s) {
  data::SamplerConfig c;
  c.global_batch = s.training.global_batch;
  c.max_seqlen = s.training.max_seqlen;
  c.min_seqlen = s.dataset.min_seqlen;
  c.short_policy = s.dataset.short_policy == "pad" ? data::ShortPolicy::pad : data::ShortPolicy::drop;
  c.pad_multiple = s.dataset.pad_multiple;
  c.seed = s.training.seed;
  c.drop_long = s.dataset.long_policy == "drop";
  at_key(s, "training", json("{...}"), [&] { data::validate_sampler(c); return 0; });
  return c;
}

nlohmann::json Setting::to_json() const {
  return {{"max_seqlen_per_rank", max_seqlen_per_rank}, {"cp", cp}, {"vpp", vpp}};
}

Setting published_setting(const Scenario& s) {
  return Setting{s.training.max_seqlen_per_rank, s.cluster.cp, s.cluster.vpp};
}

plan::PlanConfig plan_config_of(const Scenario& s, const Setting& st) {
  const int pool = s.cluster.pool();
  DCP_REQUIRE(st.cp >= 1 && pool % st.cp == 0, s.file, ": setting cp=", st.cp, " does not divide the pool of ", pool);
  plan::PlanConfig c;
  c.dp = pool / st.cp;
  c.cp = st.cp;
  c.max_seqlen_per_rank = st.max_seqlen_per_rank;
  c.min_cp = s.training.min_cp;
  // Interleaved 1F1B needs the micro-batch count to be a multiple of the VPP group, which
  // Megatron sets to pp by default (microbatch_group_size_per_vp_stage).
  if (st.vpp > 1) c.vpp_group = s.cluster.pp;
  c.max_seqlen = s.training.max_seqlen;
  return c;
}

plan::PlanConfig plan_config_of(const Scenario& s) { return plan_config_of(s, published_setting(s)); }

cost::CostModel cost_model_at(const cost::CostModel& base, const Setting& st) {
  cost::CostModel cm = base;
  cm.cluster.cp = st.cp;
  cm.cluster.vpp = st.vpp;
  cost::validate_cluster(cm.cluster);
  cost::validate_layout(cm.model, cm.cluster);
  return cm;
}

// The scenario's cost model as planner options: time per rank of one sample on a CP group,
// averaged over the pipeline's virtual stages (fwd + bwd incl. recompute and exposed CP comm),
// and the simulated step time of a whole plan on this batch.
plan::PlannerOptions planner_options_of(const cost::CostModel& cm, const data::SampledBatch& sb,
                                        int64_t m_tokens) {
  return planner_options_of(cm, std::make_shared<const plan::Batch>(sb.batch), sb.real_lengths, m_tokens);
}

plan::PlannerOptions planner_options_of(const cost::CostModel& cm, std::shared_ptr<const plan::Batch> batch,
                                        std::span<const int64_t> real_lengths, int64_t m_tokens) {
  plan::PlannerOptions o;
  o.pp = cm.cluster.pp;
  o.vpp = cm.cluster.vpp;
  const int stages = cm.cluster.pp * cm.cluster.vpp;
  // The planners cost many groups and plans of this one batch, which hold the same samples (dcp:
  // every candidate packing, each finalist in nine orders, the pipeline ramp's candidates): each
  // sample's attention times are memoised for the planner's lifetime (cost::AttnTermsMemo: the
  // same results to the bit; ~20 MiB at most), and so is the filler's time alone per group size
  // below. One call at a time per planner's options (the mutex).
  struct Shared {
    explicit Shared(const cost::CostModel& m) : memo(m) {}
    std::mutex mutex;
    cost::AttnTermsMemo memo;
    std::map<int, std::vector<cost::StageTimes>> filler_alone;  // by group size
  };
  auto shared = std::make_shared<Shared>(cm);
  // Marginal time of the sample in a half-full pack (filler: one sequence of M*k/2 tokens), so
  // GEMM efficiency is that of a packed rank, not of the sample alone (a 100-token sample alone
  // would run its GEMMs at a tiny fraction of peak; packed, it does not).
  o.sample_time_s = [&cm, stages, m_tokens, shared](int64_t length, int cp_size) {
    const int64_t filler = std::max<int64_t>(1, m_tokens * cp_size / 2);
    const int64_t with[2] = {filler, length};
    std::lock_guard<std::mutex> lock(shared->mutex);
    const auto as = cost::group_stage_times_all(cm, std::span<const int64_t>(with, 2), cp_size, 0,
                                                cost::QkvFormat::thd, &shared->memo);
    auto [it, fresh] = shared->filler_alone.try_emplace(cp_size);
    if (fresh)
      it->second = cost::group_stage_times_all(cm, std::span<const int64_t>(with, 1), cp_size, 0,
                                               cost::QkvFormat::thd, &shared->memo);
    const auto& bs = it->second;
    double t = 0;
    for (size_t v = 0; v < as.size(); ++v)
      t += (as[v].fwd.total_s() + as[v].bwd.total_s()) - (bs[v].fwd.total_s() + bs[v].bwd.total_s());
    return std::max(0.0, t) * cm.cluster.vpp / stages;  // one pipeline stage's share
  };
  const auto simulate = [&cm, batch, real_lengths, shared](const plan::Plan& plan) {
    std::lock_guard<std::mutex> lock(shared->mutex);
    return sim::simulate_step(plan, *batch, cm, real_lengths, sim::Bound::skip, &shared->memo);
  };
  o.step_time_s = [simulate](const plan::Plan& plan) { return simulate(plan).step_s; };
  o.estimate = [simulate](const plan::Plan& plan) {
    const sim::StepResult r = simulate(plan);
    return plan::PlannerOptions::Estimate{r.step_s, r.fits, r.peak_memory_bytes};
  };
  o.model = plan::PlannerOptions::ModelShape{static_cast<double>(cm.model.hidden), static_cast<double>(cm.model.ffn),
                                              cm.model.heads, cm.model.kv_heads, cm.model.swiglu,
                                              cm.training.recompute_full};
  o.cost_label = cost::source_label(cm);
  return o;
}

std::vector<std::string> strategies_of(const Scenario& s, const RunOptions& options,
                                       const plan::PlannerRegistry& registry) {
  check_strategy_names(s, registry);
  if (options.strategies.empty()) return s.strategies;
  std::string known;
  for (const auto& n : registry.names()) known += (known.empty() ? "" : ", ") + n;
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const auto& want : options.strategies) {
    DCP_REQUIRE(registry.contains(want), "--strategies: ", quote(want), " is not a known planner (known: ", known, ")");
    DCP_REQUIRE(seen.insert(want).second, "--strategies: ", quote(want),
                " is listed twice (each strategy runs once per step)");
    for (const auto& have : s.strategies)
      if (have == want) out.push_back(want);
  }
  DCP_REQUIRE(!out.empty(), s.file, ": none of the --strategies is listed in its \"strategies\"");
  return out;
}

PreparedScenario prepare_scenario(const Scenario& s, const RunOptions& options, const plan::PlannerRegistry& registry) {
  PreparedScenario p;
  p.scenario = &s;
  p.cm = cost_model_of(s);
  p.source = length_source_of(s);
  p.sampler = sampler_config_of(s);
  plan_config_of(s);
  p.strategies = strategies_of(s, options, registry);
  p.steps = options.steps.value_or(s.training.steps);
  DCP_REQUIRE(p.steps >= 1, "--steps=", p.steps, " is not >= 1");
  return p;
}

int64_t static_pad_multiple(const Scenario& s, int cp) {
  // Megatron's divisor for static CP: 2 cp (1 at cp 1), times tp with sequence parallelism
  // (d48bd6be0a sft_dataset.py:99-111, sequence_parallel_size = tp with --sequence-parallel,
  // pretrain_gpt.py:464), which every tp > 1 scenario has.
  const int64_t tp = s.cluster.tp;
  const auto megatron_rule = [tp](int c) -> int64_t { return (c > 1 ? 2 * int64_t{c} : 1) * tp; };
  const int64_t m = s.dataset.pad_multiple;
  return cp == s.cluster.cp || m != megatron_rule(s.cluster.cp) ? m : megatron_rule(cp);
}

int64_t planner_length(const Scenario& s, int64_t real_length, bool dynamic, int cp) {
  const auto& d = s.dataset;
  const int64_t min_pad = d.short_policy == "pad" ? d.min_seqlen : 1;
  const int64_t multiple =
      dynamic ? (d.pad_multiple_dynamic > 0 ? d.pad_multiple_dynamic : d.pad_multiple) : static_pad_multiple(s, cp);
  return data::pad_length(real_length, min_pad, std::max<int64_t>(1, multiple));
}

namespace {

// The batch a planner sees (planner_length): the sampler's batch, padded to pad_multiple, or the
// real lengths padded to a multiple of the planner's own (a dynamic planner's
// pad_multiple_dynamic, a static planner's 2 x cp x tp at a tuned cp).
plan::Batch batch_for(const PreparedScenario& p, const data::SampledBatch& sb, bool dynamic, int cp) {
  const Scenario& s = *p.scenario;
  const bool own = dynamic ? s.dataset.pad_multiple_dynamic > 0 : static_pad_multiple(s, cp) != s.dataset.pad_multiple;
  if (!own) return sb.batch;
  plan::Batch b;
  for (int64_t L : sb.real_lengths) b.lengths.push_back(planner_length(s, L, dynamic, cp));
  return b;
}

}  // namespace

namespace {

// An ordered pool (megatron-mock) holds a fixed number of global batches: the run's steps and
// every draw read forward from its first (steps 0, 1, ... up to `end`, exclusive), --tune's held-out
// batches the `steps` before it (steps -steps .. -1, tune.cpp), wrapping round the pool's end: they
// must not meet. The `steps` batches are kept apart whether or not this run tunes, so that a run's
// batches do not depend on its flags.
void check_ordered_windows(const PreparedScenario& p, int64_t end) {
  const Scenario& s = *p.scenario;
  const int64_t g = p.sampler.global_batch, n = static_cast<int64_t>(p.source.pool->size());
  const int64_t last = std::max<int64_t>(end, 0);
  at_key(s, "dataset", json(dataset_label(s.dataset)), [&] {
    DCP_REQUIRE((last + p.steps) * g <= n, "holds ", n, " samples, ", n / g, " global batches of ", g, ": steps 0 to ",
                last - 1, " and the ", p.steps, " before them kept for --tune's held-out batches need ", last + p.steps,
                " (fewer --draws or --steps)");
    return 0;
  });
}

}  // namespace

void sample_batches(PreparedScenario& p, int first_step) {
  const Scenario& s = *p.scenario;
  p.batches.clear();
  if (p.source.kind == data::SourceKind::sequence) check_ordered_windows(p, first_step + p.steps);
  for (int step = first_step; step < first_step + p.steps; ++step)
    p.batches.push_back(at_key(s, "dataset", json(dataset_label(s.dataset)),
                               [&] { return data::sample_global_batch(p.source, p.sampler, step); }));
}

plan::PlanRequest plan_request_of(const PreparedScenario& p, const cost::CostModel& cm, const std::string& strategy,
                                  const plan::PlanConfig& config, int step, double time_budget_ms,
                                  const plan::PlannerRegistry& registry) {
  const Scenario& s = *p.scenario;
  DCP_CHECK(step >= 0 && static_cast<size_t>(step) < p.batches.size(), "plan_request_of: step ", step, " of ",
            p.batches.size(), " sampled batches");
  const data::SampledBatch& sb = p.batches[static_cast<size_t>(step)];
  const bool dynamic = registry.make(strategy)->dynamic();
  // Planners that use a cost model (dcp, nvidia-prototype) get this setting's time model and
  // simulator, over the batch they plan (padded for dynamic planners), as the row simulates it.
  // The callbacks refer to cm and to sb's lengths (in p), which must outlive the planner.
  auto batch = std::make_shared<const plan::Batch>(batch_for(p, sb, dynamic, config.cp));
  plan::PlannerOptions planner_options = planner_options_of(cm, batch, sb.real_lengths, config.max_seqlen_per_rank);
  planner_options.time_budget_ms = time_budget_ms;
  std::shared_ptr<const plan::Planner> planner = registry.make(strategy, planner_options);
  if (config.dp > 0 && s.training.global_batch % config.dp != 0)
    throw InputError("global_batch " + std::to_string(s.training.global_batch) + " is not a multiple of dp=" +
                     std::to_string(config.dp));
  return plan::PlanRequest{*batch, config, std::move(planner)};
}

Heartbeat::Heartbeat(std::ostream& out, std::chrono::milliseconds period)
    : out_(out), period_(period), start_(std::chrono::steady_clock::now()) {
  thread_ = std::thread([this] { loop(); });
}

Heartbeat::~Heartbeat() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void Heartbeat::at(const std::string& where) {
  std::lock_guard<std::mutex> lock(mutex_);
  where_ = where;
}

void Heartbeat::print(const std::string& line) {
  std::lock_guard<std::mutex> lock(out_mutex_);
  out_.write(line.data(), static_cast<std::streamsize>(line.size()));
  out_.flush();
}

void Heartbeat::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, period_, [this] { return stop_; })) {
    if (where_.empty()) continue;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const std::string line = "dcpbench run: still running (" + fmt_g(std::round(s)) + " s): " + where_ + "\n";
    lock.unlock();  // the runner may note its next step while this line is written
    print(line);
    lock.lock();
  }
}

void note_progress(Heartbeat* heartbeat, const std::string& where) {
  if (heartbeat) heartbeat->at(where);
}

void progress_line(const RunOptions& options, const std::string& line) {
  if (!options.progress) return;
  if (options.heartbeat) {
    options.heartbeat->print(line + "\n");
  } else {
    *options.progress << line << std::endl;
  }
}

std::vector<ResultRow> run_strategy(const PreparedScenario& p, const cost::CostModel& base_cm, const std::string& strategy,
                                    const Setting& setting, const std::string& setting_label, const RunOptions& options,
                                    const plan::PlannerRegistry& registry, const cost::CostModel* planner_base_cm) {
  const Scenario& s = *p.scenario;
  const plan::PlanConfig config = plan_config_of(s, setting);
  const cost::CostModel cm = cost_model_at(base_cm, setting);
  const cost::CostModel plan_cm = cost_model_at(planner_base_cm ? *planner_base_cm : base_cm, setting);
  const std::string source = cost::source_label(cm);
  std::vector<ResultRow> rows;
  // Step i+1 is planned on a background thread while step i is simulated here (README "Async
  // planning"); the source runs on that thread and reads only the immutable prepared batches.
  // An InputError of a step (dp not dividing the batch, a sample that cannot be placed; an unknown
  // planner was refused before any step by strategies_of) comes back from next() for that step
  // and is recorded in its row, as before.
  plan::AsyncPlanner planner_of_steps(
      [&](int64_t step) -> std::optional<plan::PlanRequest> {
        if (step >= p.steps) return std::nullopt;
        // plan_cm (declared above) outlives the planner; the batches live in p.
        return plan_request_of(p, plan_cm, strategy, config, static_cast<int>(step), options.time_budget_ms, registry);
      },
      options.sync_planning ? plan::PlanningMode::sync : plan::PlanningMode::async);
  double previous_step_s = 0;  // simulated step time of the previous step (0: none, or no figures)
  for (int step = 0; step < p.steps; ++step) {
    if (options.heartbeat)  // (the line only built when someone reads it)
      options.heartbeat->at(s.name + ", " + strategy + " (" + setting_label +
                            (options.phase.empty() ? "" : ", " + options.phase) + "), step " + std::to_string(step + 1) +
                            " of " + std::to_string(p.steps));
    const data::SampledBatch& sb = p.batches[static_cast<size_t>(step)];
    ResultRow row;
    row.scenario = s.name;
    row.strategy = strategy;
    row.step = step;
    row.source = source;
    row.setting = setting_label;
    row.reference = s.reference_strategy;
    row.knobs = setting.to_json();
    row.samples = sb.batch.size();
    for (int64_t L : sb.real_lengths) row.tokens += L;
    row.useful_tflop = cost::useful_flops(cm.model, sb.real_lengths) / 1e12;
    plan::Plan plan;
    plan::Batch batch = sb.batch;
    row.planning = options.sync_planning ? "sync" : "async";
    try {
      std::optional<plan::PlannedStep> planned = planner_of_steps.next();
      DCP_CHECK(planned && planned->step == step, "run: the planner of ", strategy, " did not return step ", step);
      plan = std::move(planned->plan);
      batch = std::move(planned->batch);
      row.solve_ms = 1e3 * planned->timing.plan_s;
      row.plan_wait_ms = 1e3 * planned->timing.wait_s;
      // Modelled: on the real cluster, step `step` is planned while step-1 trains, which takes
      // its simulated step time; step 0's plan is never hidden.
      row.plan_hidden_ms = options.sync_planning ? 0.0 : std::min(row.solve_ms, 1e3 * previous_step_s);
      row.plan_exposed_ms = row.solve_ms - row.plan_hidden_ms;
      row.note = plan.note;
      if (auto v = plan::find_violation(plan, batch, config)) {
        row.error = "invalid plan: " + *v;
      } else {
        row.plan_valid = true;
      }
    } catch (const Error& e) {
      row.error = std::string("planner failed: ") + e.what();
    }
    if (row.plan_valid) {
      // A limit of the simulator (simulator.h, kMaxScheduleEntries) names the scenario, strategy
      // and step it was hit at: its own line named none (audit of helper-48).
      const sim::StepResult r = [&] {
        try {
          return sim::simulate_step(plan, batch, cm, sb.real_lengths);
        } catch (const InputError& e) {
          throw InputError(show_path(s.file) + ": " + strategy + " (" + setting_label + "), step " +
                           std::to_string(step) + ": " + e.what());
        }
      }();
      row.peak_memory_gib = r.peak_memory_bytes / (1024.0 * 1024 * 1024);
      row.oom = !r.fits;
      row.step_time_s = r.step_s;
      row.tflops_per_gpu = r.tflops_per_gpu;
      row.tokens_per_s_per_gpu = r.tokens_per_s_per_gpu;
      row.microbatches = r.microbatches;
      row.balance = r.balance;
      row.bubble_frac = r.bubble_frac;
      row.comm_frac = r.comm_frac;
      row.plan_efficiency = r.plan_efficiency;
      row.lower_bound_s = r.bound_s;
      row.compute_s = r.schedule.compute_s;
      row.comm_s = r.schedule.comm_s;
      row.overhead_s = r.schedule.overhead_s;
      row.bubble_s = r.schedule.bubble_s;
      row.imbalance_s = r.schedule.imbalance_s;
      row.busiest_idle_s = r.schedule.busiest_idle_s;
      if (step == 0 && options.detail && setting_label == "published") {
        row.rank_busy_s = r.rank_busy_s;
        row.plan = plan_picture(plan, batch);
      }
      if (options.on_row && row.has_metrics()) options.on_row(row, RowSource{plan, batch, cm, sb.real_lengths, r});
    }
    previous_step_s = row.has_metrics() ? row.step_time_s : 0.0;
    rows.push_back(std::move(row));
  }
  return rows;
}

ResultsFile run_scenarios(const std::vector<Scenario>& scenarios, const RunOptions& options_in,
                          const plan::PlannerRegistry& registry) {
  DCP_REQUIRE(!scenarios.empty(), "no scenario given");
  RunOptions options = options_in;
  std::optional<Heartbeat> heartbeat;
  if (options.progress && !options.heartbeat) options.heartbeat = &heartbeat.emplace(*options.progress);
  // Validate everything before the first (possibly long) simulation.
  std::vector<PreparedScenario> prepared;
  std::set<std::string> names, calibrations;
  for (const auto& s : scenarios) {
    DCP_REQUIRE(names.insert(s.name).second, s.file, ": \"name\"=\"", s.name, "\" is used by another scenario of this run");
    prepared.push_back(prepare_scenario(s, options, registry));
    calibrations.insert(prepared.back().cm.hardware.calibration);
  }
  std::string calibration;
  for (const auto& c : calibrations) calibration += (calibration.empty() ? "" : ",") + c;
  // Every scenario's batches are drawn once before the first runs: a scenario that loads but cannot
  // draw a batch (every sample dropped by `long: drop`, a length past what its pool holds) failed
  // only after the scenarios before it had run (exploratory CLI test of stop 44). Each is let go at
  // once and drawn again when its turn comes (the same batches: sampling is seeded per step), and a
  // scenario's batches are let go when it is done, so the run holds one scenario's batches at a
  // time, as the limit on steps x global batch assumes (it had kept every finished scenario's, and
  // the first's beside each drawn in this check: review of stop 45). A single scenario keeps the
  // batches it draws here.
  const bool several = prepared.size() > 1;
  for (auto& p : prepared) {
    note_progress(options.heartbeat, p.scenario->name + (several ? ", checking that its batches can be drawn"
                                                                  : ", sampling " + std::to_string(p.steps) +
                                                                        " global batches"));
    // An ordered source's draws too, before anything runs (they are drawn only when their turn
    // comes: helper-68 found --draws refused after draw 4 of 6 had run).
    if (p.source.kind == data::SourceKind::sequence)
      check_ordered_windows(p, static_cast<int64_t>(std::max(options.draws, 1)) * p.steps);
    if (options.tune) {  // --tune's selection batches too (tune.h), let go at once
      sample_selection_batches(p);
      std::vector<data::SampledBatch>().swap(p.batches);
    }
    sample_batches(p);
    if (several) std::vector<data::SampledBatch>().swap(p.batches);
  }
  if (options.on_checked) options.on_checked();

  ResultsFile out;
  out.context = make_context("none (simulated on the host CPU)", cost::kCostModelName, calibration, options.command);
  // How the tuned settings were picked (tune.h); "none" without --tune, so the legend does not read
  // the absent key as an old file's in-sample pick.
  out.context["tune_pick"] = options.tune ? kTunePickHeldOut : kTunePickNone;
  json sensitivity = json::array(), draws = json::array();
  for (auto& p : prepared) {
    const Scenario& s = *p.scenario;
    out.scenarios.push_back(scenario_facts(s, p.cm, p.steps));
    const auto t0 = std::chrono::steady_clock::now();
    note_progress(options.heartbeat, s.name + ", sampling " + std::to_string(p.steps) + " global batches");
    if (p.batches.size() != static_cast<size_t>(p.steps)) sample_batches(p);
    out.scenarios.back()["data"] = data_facts(p.batches);
    const size_t first = out.rows.size();
    for (const auto& name : p.strategies) {
      auto rows = run_strategy(p, p.cm, name, published_setting(s), "published", options, registry);
      out.rows.insert(out.rows.end(), std::make_move_iterator(rows.begin()), std::make_move_iterator(rows.end()));
    }
    // Rows in (step, strategy) order, as before, so a step's rows sit together.
    std::stable_sort(out.rows.begin() + static_cast<std::ptrdiff_t>(first), out.rows.end(),
                     [](const ResultRow& a, const ResultRow& b) { return a.step < b.step; });
    fill_speedups(out.rows, first);
    if (std::find(p.strategies.begin(), p.strategies.end(), s.reference_strategy) == p.strategies.end())
      progress_line(options, "dcpbench run: " + s.name + ": note: the reference strategy \"" + s.reference_strategy +
                                 "\" is not among the strategies run, so there are no speedups");
    progress_line(options, "dcpbench run: " + s.name + ": " + std::to_string(p.steps) + " steps x " +
                               std::to_string(p.strategies.size()) + " strategies (" + elapsed_text(t0) + ")");
    std::map<std::string, Setting> tuned;
    if (options.tune) {
      const size_t tuned_first = out.rows.size();
      auto rows = run_tuned(p, options, registry);
      tuned = tuned_settings(rows);
      out.rows.insert(out.rows.end(), std::make_move_iterator(rows.begin()), std::make_move_iterator(rows.end()));
      fill_speedups(out.rows, tuned_first);
    }
    if (options.sensitivity) sensitivity.push_back(run_sensitivity(p, options, registry, tuned));
    // Draw 0's batches are done with: let go before the draws study, which copies the prepared
    // scenario and draws its own (it had held both).
    std::vector<data::SampledBatch>().swap(p.batches);
    if (options.draws > 1) {
      const std::vector<ResultRow> own(out.rows.begin() + static_cast<std::ptrdiff_t>(first), out.rows.end());
      draws.push_back(run_draws(p, options, registry, own, tuned));
    }
  }
  if (options.sensitivity) out.sensitivity = sensitivity_section(sensitivity);
  if (options.draws > 1) out.draws = draws_section(options.draws, draws);
  return out;
}

}  // namespace dcp::harness
