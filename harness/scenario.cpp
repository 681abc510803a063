// Scenario loader and validation (see scenario.h and scenarios/SCHEMA.md).
//
// Every message has the shape <file>: "<dotted.key>"=<value as JSON> <what is wrong>
// (harness/object_reader.h).
#include "harness/scenario.h"
#include "harness/object_reader.h"
#include "harness/registry.h"

#include "core/error.h"
#include "core/files.h"
#include "core/json_io.h"
#include "core/text.h"
#include "data/dataset.h"
#include "plan/cp_rule.h"
#include "plan/planner.h"

#include <cctype>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

namespace dcp::harness {
namespace {

using nlohmann::json;

// Lengths in tokens (samples, max_seqlen, max_seqlen_per_rank): the limit of `schedule`, `check`
// and the Python module too (plan::check_config; README "Input limits and errors").
constexpr int64_t kMaxInt = plan::kMaxTokensPerRank;
// A megatron-mock pool is generated whole when the scenario is run: 2^24 lengths = 128 MiB and
// ~1 s here; Megatron's own is 10^6.
constexpr int64_t kMaxMockPool = int64_t{1} << 24;

ModelSpec parse_model(ObjectReader& top) {
  ModelSpec m;
  const json* v = top.find("model", true);
  if (v->is_string()) {
    m.preset = v->get<std::string>();
    if (m.preset.empty()) top.fail("model", *v, "is empty");
    return m;
  }
  if (!v->is_object()) top.fail("model", *v, "is neither a preset name nor an object");
  ObjectReader r = top.child(*v, "model");
  m.name = r.get_string("name", false).value_or("custom");
  m.layers = static_cast<int>(*r.get_int("layers", true, 1, 100000));
  m.hidden = static_cast<int>(*r.get_int("hidden", true, 1, 1 << 20));
  m.ffn = static_cast<int>(*r.get_int("ffn", true, 1, 1 << 22));
  m.heads = static_cast<int>(*r.get_int("heads", true, 1, 1 << 16));
  m.kv_heads = static_cast<int>(r.get_int("kv_heads", false, 1, 1 << 16).value_or(m.heads));
  m.vocab = static_cast<int>(*r.get_int("vocab", true, 1, 1 << 24));
  m.swiglu = r.get_bool("swiglu", false).value_or(true);
  m.tied_embeddings = r.get_bool("tied_embeddings", false).value_or(false);
  m.position_embeddings = r.get_int("position_embeddings", false, 0, kMaxInt).value_or(0);
  m.linear_bias = r.get_bool("linear_bias", false).value_or(false);
  m.norm = r.get_string("norm", false, {"rmsnorm", "layernorm"}).value_or("rmsnorm");
  if (m.hidden % m.heads != 0) r.fail("hidden", json(m.hidden), "is not a multiple of \"heads\"=" + std::to_string(m.heads));
  if (m.heads % m.kv_heads != 0) r.fail("kv_heads", json(m.kv_heads), "does not divide \"heads\"=" + std::to_string(m.heads));
  r.finish();
  return m;
}

// `depth`: mixtures around this source (0 at the top); each level recurses once, so the nesting
// is limited to data::kMaxMixtureDepth before the component is parsed.
DatasetSpec parse_source(ObjectReader& r, int depth) {
  DatasetSpec d;
  d.kind = *r.get_string("source", true, {"file", "lognormal", "mixture", "quantiles", "megatron-mock"});
  if (d.kind == "megatron-mock" && depth > 0)
    r.fail("source", json(d.kind), "is an ordered replay, which a mixture cannot draw from");
  if (d.kind == "file") {
    d.path_as_written = *r.get_string("path", true);
    d.path = resolve_path(r.file(), d.path_as_written);
    if (!std::filesystem::exists(d.path))
      r.fail("path", json(d.path_as_written), "does not exist (looked for " + quote(d.path, 120) + ")");
  } else if (d.kind == "lognormal") {
    d.mean = *r.get_number("mean", true, 1.0, 1e9);
    d.sigma = *r.get_positive("sigma", true, 10.0);
    d.min_len = r.get_int("min", false, 1, kMaxInt).value_or(1);
    d.max_len = r.get_int("max", false, 1, kMaxInt).value_or(0);
    if (d.max_len > 0 && d.max_len < d.min_len)
      r.fail("max", json(d.max_len), "is below \"" + r.path("min") + "\"=" + std::to_string(d.min_len));
    d.clamp = r.get_string("clamp", false, {"clamp", "resample"}).value_or("clamp");
  } else if (d.kind == "megatron-mock") {
    // MockSFTLowLevelDataset's distribution mode (192cbc3554 megatron/training/datasets/
    // sft_dataset.py:236-281): min_seq_len, max_seq_len, mean_seq_len and lognormal_sigma are
    // required there; seed and size are its class attributes (0 and 1000000).
    d.mean = *r.get_number("mean", true, 1.0, 1e9);
    d.sigma = *r.get_positive("sigma", true, 10.0);
    d.min_len = *r.get_int("min", true, 1, kMaxInt);
    d.max_len = *r.get_int("max", true, 1, kMaxInt);
    if (d.max_len < d.min_len)
      r.fail("max", json(d.max_len), "is below \"" + r.path("min") + "\"=" + std::to_string(d.min_len));
    d.numpy_seed = r.get_int("numpy_seed", false, 0, 4294967295LL).value_or(0);
    d.pool_size = r.get_int("size", false, 1, kMaxMockPool).value_or(1000000);
    d.train_samples = r.get_int("train_samples", false, 1, kMaxMockPool).value_or(d.pool_size);
    if (d.train_samples > d.pool_size)
      r.fail("train_samples", json(d.train_samples), "is above \"" + r.path("size") + "\"=" + std::to_string(d.pool_size));
    d.skip_steps = r.get_int("skip_steps", false, 0, kMaxMockPool).value_or(0);
    d.shift = r.get_int("shift", false, 0, kMaxInt).value_or(0);
    if (d.shift >= d.min_len)
      r.fail("shift", json(d.shift), "leaves no token of a \"" + r.path("min") + "\"=" + std::to_string(d.min_len) + "-token sample");
  } else if (d.kind == "mixture") {
    const json* comps = r.get_array("components", true);
    if (depth >= data::kMaxMixtureDepth)  // this mixture is level depth + 1: at most kMax levels
      r.fail("components", *comps,
             "nests mixtures deeper than the limit of " + std::to_string(data::kMaxMixtureDepth) + " levels");
    double total = 0;
    for (size_t i = 0; i < comps->size(); ++i) {
      const std::string key = "components[" + std::to_string(i) + "]";
      if (!(*comps)[i].is_object()) r.fail(key, (*comps)[i], "is not an object");
      ObjectReader c = r.child((*comps)[i], key);
      const double share = *c.get_positive("share", true, 1.0);
      total += share;
      d.components.push_back(DatasetComponent{share, parse_source(c, depth + 1)});
      c.finish();
    }
    if (std::abs(total - 1.0) > 1e-6) r.fail("components", *comps, "shares sum to " + fmt("%.6g", total) + ", not 1");
  } else {
    const json* q = r.get_array("quantiles", true);
    double last_p = -1;
    int64_t last_len = 0;
    for (size_t i = 0; i < q->size(); ++i) {
      const json& e = (*q)[i];
      const std::string key = "quantiles[" + std::to_string(i) + "]";
      if (!e.is_array() || e.size() != 2 || !e[0].is_number() || !e[1].is_number_integer())
        r.fail(key, e, "is not a [probability, length] pair");
      if (e[1].is_number_unsigned() && e[1].get<uint64_t>() > static_cast<uint64_t>(kMaxInt))
        r.fail(key, e, "length is above the maximum " + std::to_string(kMaxInt));
      const double p = e[0].get<double>();
      const int64_t len = e[1].get<int64_t>();
      if (p < 0 || p > 1 || p <= last_p) r.fail(key, e, "probability is not increasing within [0, 1]");
      if (len < 1 || len < last_len) r.fail(key, e, "length is not >= 1 and non-decreasing");
      last_p = p;
      last_len = len;
    }
    if (q->size() < 2 || (*q)[0][0].get<double>() != 0.0 || last_p != 1.0)
      r.fail("quantiles", *q, "must start at probability 0 and end at 1");
    for (const auto& e : *q) d.quantiles.emplace_back(e[0].get<double>(), e[1].get<int64_t>());
  }
  if (depth == 0) {
    d.min_seqlen = r.get_int("min_seqlen", false, 1, kMaxInt).value_or(1);
    d.short_policy = r.get_string("short", false, {"drop", "pad"}).value_or("drop");
    d.pad_multiple = r.get_int("pad_multiple", false, 1, 1 << 20).value_or(1);
    d.pad_multiple_dynamic = r.get_int("pad_multiple_dynamic", false, 1, 1 << 20).value_or(0);
    d.long_policy = r.get_string("long", false, {"split", "drop"}).value_or("split");
  }
  return d;
}

ClusterSpec parse_cluster(ObjectReader& top) {
  ObjectReader r = top.child(*top.get_object("cluster", true), "cluster");
  ClusterSpec c;
  c.gpus = static_cast<int>(*r.get_int("gpus", true, 1, 1 << 20));
  c.tp = static_cast<int>(r.get_int("tp", false, 1, 1024).value_or(1));
  c.pp = static_cast<int>(r.get_int("pp", false, 1, 1024).value_or(1));
  c.cp = static_cast<int>(r.get_int("cp", false, 1, 1 << 20).value_or(1));
  c.vpp = static_cast<int>(r.get_int("vpp", false, 1, 1024).value_or(1));
  c.gpus_per_node = static_cast<int>(r.get_int("gpus_per_node", false, 1, 1024).value_or(8));
  c.nics_per_node = static_cast<int>(r.get_int("nics_per_node", false, 1, 1024).value_or(c.gpus_per_node));
  c.hardware = r.get_string("hardware", false).value_or("h100-sxm");
  if (!plan::is_pow2(c.cp)) r.fail("cp", json(c.cp), "is not a power of two");
  // In int64: tp*pp*cp can exceed int (1024*1024*4096 wraps to 0).
  const int64_t tp_pp_cp = static_cast<int64_t>(c.tp) * c.pp * c.cp;
  if (c.gpus % tp_pp_cp != 0)
    r.fail("gpus", json(c.gpus), "is not a multiple of tp*pp*cp=" + std::to_string(tp_pp_cp));
  if (!plan::is_pow2(c.pool()))
    r.fail("gpus", json(c.gpus), "gives a DP x CP pool of " + std::to_string(c.pool()) +
                                     " ranks, not a power of two (dynamic CP needs one)");
  if (c.vpp > 1 && c.pp == 1) r.fail("vpp", json(c.vpp), "needs \"cluster.pp\" > 1");
  r.finish();
  return c;
}

TrainingSpec parse_training(ObjectReader& top, const ClusterSpec& c) {
  ObjectReader r = top.child(*top.get_object("training", true), "training");
  TrainingSpec t;
  t.global_batch = *r.get_int("global_batch", true, 1, plan::kMaxBatchSamples);
  t.max_seqlen = *r.get_int("max_seqlen", true, 1, kMaxInt);
  t.max_seqlen_per_rank = *r.get_int("max_seqlen_per_rank", true, 1, kMaxInt);
  t.min_cp = static_cast<int>(r.get_int("min_cp", false, 1, 1 << 20).value_or(1));
  t.recompute = r.get_string("recompute", false, {"none", "full"}).value_or("none");
  t.precision = r.get_string("precision", false, {"bf16"}).value_or("bf16");
  t.steps = static_cast<int>(r.get_int("steps", false, 1, 100000).value_or(1));
  t.seed = static_cast<uint64_t>(r.get_int("seed", false, 0, (1LL << 62)).value_or(0));
  t.attention_backend = r.get_string("attention_backend", false, {"fa2", "fa3", "cudnn", "dcpbench"}).value_or("fa3");
  t.distributed_optimizer = r.get_bool("distributed_optimizer", false).value_or(false);
  t.grad_reduce = r.get_string("grad_reduce", false, {"fp32", "bf16"}).value_or("fp32");
  t.overlap_grad_reduce = r.get_bool("overlap_grad_reduce", false).value_or(false);
  // --sequence-parallel is store_true (off by default; Megatron turns it off again at tp 1). The
  // cost and memory models charge tensor parallelism with it only (cost/time_model.h "TP": its
  // all-gathers and reduce-scatters; without it, all-reduces and activations kept whole on every
  // TP rank), so a tp > 1 scenario must say so.
  t.sequence_parallel = r.get_bool("sequence_parallel", false).value_or(false);
  if (c.tp > 1 && !t.sequence_parallel)
    r.fail("sequence_parallel", json(t.sequence_parallel),
           "must be true with \"cluster.tp\"=" + std::to_string(c.tp) +
               " (tensor parallelism is modelled with sequence parallelism only)");
  // --no-check-for-nan-in-loss-and-grad is store_false: the check is on unless a script turns it
  // off (Megatron-LM 3b309c627e megatron/training/arguments.py:2199).
  t.check_for_nan_in_grad = r.get_bool("check_for_nan_in_grad", false).value_or(true);
  t.interleaved_p2p_calls = r.get_bool("interleaved_p2p_calls", false).value_or(true);
  // --no-gradient-accumulation-fusion is store_false: fusion on unless a script turns it off
  // (Megatron-LM 192cbc3554 megatron/training/arguments.py:3613-3617).
  t.gradient_accumulation_fusion = r.get_bool("gradient_accumulation_fusion", false).value_or(true);
  t.data_path = r.get_string("data_path", false, {"megatron", "prefetch"}).value_or("megatron");
  t.cross_entropy_fusion = r.get_bool("cross_entropy_fusion", false).value_or(false);
  // --cross-entropy-fusion-impl: Megatron's default "native" (model_parallel_config.py:325 at
  // d98e8a64dd); it only matters with the fusion on, as in Megatron.
  t.cross_entropy_fusion_impl = r.get_string("cross_entropy_fusion_impl", false, {"native", "te"}).value_or("native");
  if (!plan::is_pow2(t.min_cp)) r.fail("min_cp", json(t.min_cp), "is not a power of two");
  if (t.min_cp > c.pool())
    r.fail("min_cp", json(t.min_cp), "is larger than the DP x CP pool of " + std::to_string(c.pool()) + " ranks");
  if (t.global_batch % c.dp() != 0)
    r.fail("global_batch", json(t.global_batch), "is not a multiple of DP=" + std::to_string(c.dp()));
  if (t.global_batch * c.pool() > plan::kMaxSamplesTimesPool)
    r.fail("global_batch", json(t.global_batch),
           "x the DP x CP pool of " + std::to_string(c.pool()) + " ranks = " + std::to_string(t.global_batch * c.pool()) +
               " is above the limit of " + std::to_string(plan::kMaxSamplesTimesPool) +
               " (samples x ranks: the simulator keeps every rank of every micro-batch)");
  // kMaxSamplesTimesStages (scenario.h): the simulator keeps every micro-batch on every stage.
  const int64_t stages = static_cast<int64_t>(c.pp) * c.vpp;
  if (t.global_batch * stages > kMaxSamplesTimesStages)
    r.fail("global_batch", json(t.global_batch),
           "x pp x vpp = " + std::to_string(t.global_batch * stages) + " is above the limit of " +
               std::to_string(kMaxSamplesTimesStages) + " (the simulator keeps every micro-batch on every stage)");
  const int64_t fits = static_cast<int64_t>(c.pool()) * t.max_seqlen_per_rank;
  if (t.max_seqlen > fits)
    r.fail("max_seqlen", json(t.max_seqlen), "does not fit the pool: DP x CP x max_seqlen_per_rank = " + std::to_string(fits));
  r.finish();
  return t;
}

// `strategies`: the scenario's; every published value belongs to one of them, once (the report
// prints one row per strategy beside ours, and a value of no strategy would never be shown).
Published parse_published(ObjectReader& top, const json& v, const std::vector<std::string>& strategies) {
  ObjectReader r = top.child(v, "published");
  Published p;
  p.source = *r.get_string("source", true);
  p.note = r.get_string("note", false).value_or("");
  p.hardware = r.get_string("hardware", false).value_or("");
  p.statistic = r.get_string("statistic", false, {"mean", "trimmed_mean_10"}).value_or("mean");
  const json* vals = r.get_array("values", true);
  for (size_t i = 0; i < vals->size(); ++i) {
    const std::string key = "values[" + std::to_string(i) + "]";
    if (!(*vals)[i].is_object()) r.fail(key, (*vals)[i], "is not an object");
    ObjectReader e = r.child((*vals)[i], key);
    PublishedValue pv;
    pv.strategy = *e.get_string("strategy", true);
    if (std::find(strategies.begin(), strategies.end(), pv.strategy) == strategies.end())
      e.fail("strategy", json(pv.strategy), "is not one of the scenario's \"strategies\"");
    for (size_t k = 0; k < i; ++k)
      if (p.values[k].strategy == pv.strategy)
        e.fail("strategy", json(pv.strategy),
               "is published twice (also \"" + r.path("values[" + std::to_string(k) + "]") + "\")");
    // Ratios against them (ours / theirs) divide by each: 0 would print inf.
    const auto positive = [&e](const char* key, double hi) { return e.get_positive(key, false, hi); };
    pv.tflops_per_gpu = positive("tflops_per_gpu", 1e6);
    pv.step_time_ms = positive("step_time_ms", 1e12);
    pv.speedup_vs_packing = positive("speedup_vs_packing", 1e6);
    if (!pv.tflops_per_gpu && !pv.step_time_ms && !pv.speedup_vs_packing)
      e.fail("strategy", json(pv.strategy), "has no published number (tflops_per_gpu, step_time_ms or speedup_vs_packing)");
    e.finish();
    p.values.push_back(pv);
  }
  r.finish();
  return p;
}

}  // namespace

Scenario parse_scenario(const json& j, const std::string& file, const plan::PlannerRegistry* registry) {
  if (!j.is_object()) throw InputError(show_path(file) + ": the scenario is not a JSON object");
  refuse_other_dcpbench_file(j, file, "run scenario");
  // A convergence scenario has "data" and "pool" where a run scenario has "dataset" and "cluster":
  // say so, not the first missing key ("model.layers", helper-47); the converse is in
  // converge_scenario.cpp.
  if (const auto mark = scenario_mark(j); mark && !mark->run)
    throw InputError(show_path(file) + ": has \"" + mark->key + "\": it is a convergence scenario (dcpbench converge "
                     "--scenario), not a run scenario (\"dataset\", \"cluster\": scenarios/SCHEMA.md)");
  ObjectReader r(j, file, "");
  Scenario s;
  s.file = file;
  s.name = *r.get_string("name", true);
  if (auto e = safe_name_error(s.name))  // it names chart files (plot: plan_<name>.png)
    r.fail("name", json(s.name), *e);
  s.description = r.get_string("description", false).value_or("");
  if (const json* notes = r.get_array("notes", false)) {
    for (size_t i = 0; i < notes->size(); ++i) {
      if (!(*notes)[i].is_string()) r.fail("notes[" + std::to_string(i) + "]", (*notes)[i], "is not a string");
      s.notes.push_back((*notes)[i].get<std::string>());
    }
  }
  s.model = parse_model(r);
  {
    ObjectReader d = r.child(*r.get_object("dataset", true), "dataset");
    s.dataset = parse_source(d, 0);
    d.finish();
  }
  s.cluster = parse_cluster(r);
  s.training = parse_training(r, s.cluster);
  if (s.dataset.kind == "megatron-mock" && s.dataset.skip_steps * s.training.global_batch >= s.dataset.train_samples)
    r.fail("dataset.skip_steps", json(s.dataset.skip_steps),
           "x \"training.global_batch\"=" + std::to_string(s.training.global_batch) + " is not below \"dataset.train_samples\"=" +
               std::to_string(s.dataset.train_samples) + ": the run's first batch lies past the pool");
  if (s.dataset.min_seqlen > s.training.max_seqlen)
    r.fail("dataset.min_seqlen", json(s.dataset.min_seqlen), "is above \"training.max_seqlen\"=" + std::to_string(s.training.max_seqlen));
  // Documents are split into chunks of max_seqlen tokens and every sample is padded up to the
  // multiple (dynamic planners: pad_multiple_dynamic): a full chunk must stay within max_seqlen
  // after padding, or every planner rejects the steps that draw one (found with max_seqlen 8188 at
  // pad_multiple 8: a chunk became 8192 tokens, "sample 6 has length 8192 > --max-seqlen 8188").
  for (const auto& [key, multiple] : {std::pair{"dataset.pad_multiple", s.dataset.pad_multiple},
                                      std::pair{"dataset.pad_multiple_dynamic", s.dataset.pad_multiple_dynamic}})
    if (multiple > 0 && s.training.max_seqlen % multiple != 0)
      r.fail("training.max_seqlen", json(s.training.max_seqlen),
             "is not a multiple of \"" + std::string(key) + "\"=" + std::to_string(multiple) +
                 ": a sample of max_seqlen tokens would be padded past it");
  const json* strategies = r.get_array("strategies", true);
  std::set<std::string> seen;
  for (size_t i = 0; i < strategies->size(); ++i) {
    const std::string key = "strategies[" + std::to_string(i) + "]";
    const json& v = (*strategies)[i];
    if (!v.is_string() || v.get<std::string>().empty()) r.fail(key, v, "is not a planner name");
    if (!seen.insert(v.get<std::string>()).second) r.fail(key, v, "is listed twice");
    s.strategies.push_back(v.get<std::string>());
  }
  if (registry) check_strategy_names(s, *registry);
  if (const json* p = r.get_object("published", false)) s.published = parse_published(r, *p, s.strategies);
  if (auto ref = r.get_string("reference_strategy", false)) {
    if (std::find(s.strategies.begin(), s.strategies.end(), *ref) == s.strategies.end())
      r.fail("reference_strategy", json(*ref), "is not one of the scenario's \"strategies\"");
    s.reference_strategy = *ref;
  }
  if (const json* src = r.get_object("sources", false)) {
    for (const auto& [key, v] : src->items()) {
      if (!v.is_string() || v.get<std::string>().empty()) r.fail("sources." + key, v, "is not a citation string");
      // The key must name a value of this scenario (dotted path through objects).
      const json* at = &j;
      size_t pos = 0;
      while (at && pos <= key.size()) {
        const size_t dot = key.find('.', pos);
        const std::string part = key.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
        at = at->is_object() && at->contains(part) ? &(*at)[part] : nullptr;
        if (dot == std::string::npos) break;
        pos = dot + 1;
      }
      if (!at || key.rfind("sources", 0) == 0) r.fail("sources." + key, v, "names no key of this scenario");
      s.sources[key] = v.get<std::string>();
    }
  }
  if (auto cal = r.get_string("calibration", false)) {
    s.calibration = resolve_path(file, *cal);
    if (!std::filesystem::exists(s.calibration))
      r.fail("calibration", json(*cal), "does not exist (looked for " + quote(s.calibration, 120) + ")");
  }
  r.finish();
  return s;
}

Scenario load_scenario(const std::string& path) {
  return parse_scenario(read_json_file(path, kMaxScenarioBytes), path, &builtin_planners());
}

void check_strategy_names(const Scenario& s, const plan::PlannerRegistry& registry) {
  for (size_t i = 0; i < s.strategies.size(); ++i) {
    if (!registry.contains(s.strategies[i])) {
      std::string known;
      for (const auto& n : registry.names()) known += (known.empty() ? "" : ", ") + n;
      throw InputError(show_path(s.file) + ": \"strategies[" + std::to_string(i) + "]\"=" + quote(s.strategies[i]) +
                       " is not a known planner (known: " + known + ")");
    }
  }
}

namespace {
void add_dataset_files(const DatasetSpec& d, std::vector<std::string>& out) {
  if (!d.path.empty()) out.push_back(d.path);
  for (const auto& c : d.components) add_dataset_files(c.source, out);
}
}  // namespace

std::vector<std::string> input_files(const Scenario& s) {
  std::vector<std::string> out{s.file};
  if (!s.calibration.empty()) out.push_back(s.calibration);
  add_dataset_files(s.dataset, out);
  return out;
}

}  // namespace dcp::harness
