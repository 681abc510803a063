// See converge_scenario.h.
#include "harness/converge_scenario.h"

#include <algorithm>
#include <filesystem>

#include "core/json_io.h"
#include "core/text.h"
#include "harness/object_reader.h"
#include "harness/registry.h"
#include "harness/scenario.h"

namespace dcp::harness {

namespace {

constexpr int64_t kMaxDim = 4096;          // a CPU model; larger is a typo, not a plan
constexpr int64_t kMaxSeqlen = 1 << 16;    // the float64 reference attention is O(L^2) per rank
constexpr int kMaxPool = 64;               // thread ranks / mpirun processes
// Every step's batch is built before training and rank 0 keeps the reference's gradient of every
// step: 452 KB per step on converge-moby, 1.13 MB in float32 (README "Input limits and errors").
constexpr int kMaxSteps = kConvergeMaxSteps;

model::ModelConfig parse_converge_model(ObjectReader& top) {
  model::ModelConfig m;
  ObjectReader r = top.child(*top.get_object("model", true), "model");
  // >= 256: the corpus is tokenised one byte per token (converge_data.cpp), so every byte value is
  // a token id; a smaller vocabulary failed the model's assertion on the first step (exit 1,
  // helper-77's trial) instead of being refused here.
  m.vocab = static_cast<int>(r.get_int("vocab", false, 256, 1 << 20).value_or(m.vocab));
  m.hidden = static_cast<int>(r.get_int("hidden", false, 1, kMaxDim).value_or(m.hidden));
  m.ffn = static_cast<int>(r.get_int("ffn", false, 1, kMaxDim).value_or(m.ffn));
  m.heads = static_cast<int>(r.get_int("heads", false, 1, 256).value_or(m.heads));
  m.kv_heads = static_cast<int>(r.get_int("kv_heads", false, 1, 256).value_or(m.kv_heads));
  m.head_dim = static_cast<int>(r.get_int("head_dim", false, 2, 1024).value_or(m.head_dim));
  if (m.heads % m.kv_heads != 0)
    r.fail("kv_heads", json(m.kv_heads), "does not divide \"model.heads\"=" + std::to_string(m.heads));
  if (m.head_dim % 2 != 0) r.fail("head_dim", json(m.head_dim), "is odd (RoPE rotates pairs)");
  if (const json* mix = r.get_array("mixers", false)) {
    m.mixers.clear();
    for (size_t i = 0; i < mix->size(); ++i) {
      const json& v = (*mix)[i];
      const std::string key = "mixers[" + std::to_string(i) + "]";
      if (v == "attention") m.mixers.push_back(model::MixerKind::attention);
      else if (v == "mamba") m.mixers.push_back(model::MixerKind::mamba);
      else r.fail(key, v, "is not one of: attention, mamba");
    }
    if (m.mixers.empty()) r.fail("mixers", *mix, "is empty");
  }
  m.mamba_heads = static_cast<int>(r.get_int("mamba_heads", false, 1, 1024).value_or(m.mamba_heads));
  m.mamba_head_dim = static_cast<int>(r.get_int("mamba_head_dim", false, 1, 1024).value_or(m.mamba_head_dim));
  m.mamba_state = static_cast<int>(r.get_int("mamba_state", false, 1, 1024).value_or(m.mamba_state));
  m.mtp = r.get_bool("mtp", false).value_or(m.mtp);
  m.mtp_loss_weight = r.get_number("mtp_loss_weight", false, 0.0, 100.0).value_or(m.mtp_loss_weight);
  const std::string algo = r.get_string("attention", false, {"ring", "all_gather"}).value_or("ring");
  m.attn_algo = algo == "ring" ? attn::CpAlgo::ring : attn::CpAlgo::all_gather;
  m.seed = static_cast<uint64_t>(r.get_int("seed", false, 0, int64_t{1} << 53).value_or(1));
  r.finish();
  return m;
}

ConvergeEdgeCase parse_edge(ObjectReader& r, int64_t max_seqlen) {
  ConvergeEdgeCase e;
  e.name = *r.get_string("name", true);
  e.why = r.get_string("why", false).value_or("");
  const json* lens = r.get_array("lengths", true);
  if (lens->size() > (size_t{1} << 16))
    r.fail("lengths", json(lens->size()), "entries: an edge case has 1 to 65536 documents (training.global_batch's limit)");
  for (size_t i = 0; i < lens->size(); ++i) {
    const json& v = (*lens)[i];
    const std::string key = "lengths[" + std::to_string(i) + "]";
    if (!v.is_number_integer() || v.get<int64_t>() < 2 || v.get<int64_t>() > max_seqlen)
      r.fail(key, v, "is not an integer in [2, data.max_seqlen=" + std::to_string(max_seqlen) + "]");
    e.lengths.push_back(v.get<int64_t>());
  }
  if (auto v = r.get_int("vpp_group", false, 1, 64)) e.vpp_group = static_cast<int>(*v);
  r.finish();
  return e;
}

}  // namespace

ConvergeScenario load_converge_scenario(const std::string& path) {
  const json j = read_json_file(path, kMaxScenarioBytes);  // the limit of every scenario file
  if (!j.is_object()) throw InputError(path + ": a convergence scenario is a JSON object");
  // A run scenario (scenarios/SCHEMA.md) has "dataset" and "cluster" where a convergence scenario
  // has "data" and "pool": say so, not only its first value out of range here ("model.ffn"=8192).
  if (const auto mark = scenario_mark(j); mark && mark->run)
    throw InputError(show_path(path) + ": has \"" + mark->key + "\": it is a run scenario (dcpbench run), not a "
                     "convergence scenario (\"data\", \"pool\": scenarios/SCHEMA.md)");
  refuse_other_dcpbench_file(j, path, "convergence scenario");
  ConvergeScenario s;
  s.file = path;
  ObjectReader top(j, path, "");
  s.name = *top.get_string("name", true);
  // As a run scenario's (scenario.cpp): it is printed on progress lines and written into the
  // report (control bytes had reached the terminal raw, helper-47).
  if (auto e = safe_name_error(s.name)) top.fail("name", json(s.name), *e);
  s.description = top.get_string("description", false).value_or("");
  s.model = parse_converge_model(top);

  ObjectReader d = top.child(*top.get_object("data", true), "data");
  s.text_dir_as_written = *d.get_string("text_dir", true);
  s.text_dir = resolve_path(path, s.text_dir_as_written);
  if (!std::filesystem::is_directory(s.text_dir))
    d.fail("text_dir", json(s.text_dir_as_written), "is not a folder (looked for " + s.text_dir + ")");
  s.max_seqlen = *d.get_int("max_seqlen", true, 4, kMaxSeqlen);
  s.whole_chapter_share = d.get_number("whole_chapter_share", false, 0.0, 1.0).value_or(s.whole_chapter_share);
  s.max_paragraphs = static_cast<int>(d.get_int("max_paragraphs", false, 1, 10000).value_or(s.max_paragraphs));
  s.data_seed = static_cast<uint64_t>(d.get_int("seed", false, 0, int64_t{1} << 53).value_or(1));
  d.finish();

  ObjectReader p = top.child(*top.get_object("pool", true), "pool");
  s.dp = static_cast<int>(*p.get_int("dp", true, 1, kMaxPool));
  s.cp = static_cast<int>(*p.get_int("cp", true, 1, kMaxPool));
  if (s.dp * s.cp > kMaxPool)
    p.fail("cp", json(s.cp), "makes a pool of " + std::to_string(s.dp * s.cp) + " ranks, more than " +
                                 std::to_string(kMaxPool));
  p.finish();

  ObjectReader t = top.child(*top.get_object("training", true), "training");
  // >= 2: the reference's loss must be seen to fall between the first and the last main step.
  s.steps = static_cast<int>(*t.get_int("steps", true, 2, kMaxSteps));
  s.global_batch = static_cast<int>(*t.get_int("global_batch", true, 1, 1 << 16));
  s.max_seqlen_per_rank = *t.get_int("max_seqlen_per_rank", true, 1, kMaxSeqlen);
  if (s.max_seqlen_per_rank * s.pool() < s.max_seqlen)
    t.fail("max_seqlen_per_rank", json(s.max_seqlen_per_rank),
           "times the pool (" + std::to_string(s.pool()) + " ranks) is below \"data.max_seqlen\"=" +
               std::to_string(s.max_seqlen) + ": the longest document could not be placed");
  s.adam.lr = t.get_number("lr", false, 0.0, 10.0).value_or(1e-3);
  s.adam.weight_decay = t.get_number("weight_decay", false, 0.0, 1.0).value_or(s.adam.weight_decay);
  s.dtype = t.get_string("dtype", false, {"f64", "f32"}).value_or("f64");
  s.batch_seed = static_cast<uint64_t>(t.get_int("seed", false, 0, int64_t{1} << 53).value_or(1));
  // Not capped at "steps": it counts the run's steps, the edge cases' included, and --steps may
  // raise the main ones; converge.cpp repeats min(repeat_steps, the run's steps) (helper-78).
  s.repeat_steps = static_cast<int>(t.get_int("repeat_steps", false, 0, kMaxSteps).value_or(0));
  t.finish();

  const json* strat = top.get_array("strategies", true);
  for (size_t i = 0; i < strat->size(); ++i) {
    const json& v = (*strat)[i];
    if (!v.is_string() || v.get<std::string>().empty() || v == "reference" ||
        !builtin_planners().contains(v.get<std::string>())) {
      top.fail("strategies[" + std::to_string(i) + "]", v, "is not a planner (" + builtin_planner_list(", ") + ")");
    }
    if (std::find(s.strategies.begin(), s.strategies.end(), v.get<std::string>()) != s.strategies.end())
      top.fail("strategies[" + std::to_string(i) + "]", v, "is listed twice");
    s.strategies.push_back(v.get<std::string>());
  }
  if (const json* edges = top.get_array("edge_cases", false)) {
    for (size_t i = 0; i < edges->size(); ++i) {
      const std::string key = "edge_cases[" + std::to_string(i) + "]";
      if (!(*edges)[i].is_object()) top.fail(key, (*edges)[i], "is not an object");
      ObjectReader e = top.child((*edges)[i], key);
      s.edge_cases.push_back(parse_edge(e, s.max_seqlen));
      for (size_t k = 0; k + 1 < s.edge_cases.size(); ++k)
        if (s.edge_cases[k].name == s.edge_cases.back().name)
          top.fail(key + ".name", json(s.edge_cases.back().name), "is the name of edge_cases[" + std::to_string(k) + "] too");
    }
  }
  top.finish();
  model::validate(s.model);
  // Every CP size up to the pool may be chosen for a Mamba layer (reference §7r): each must
  // divide its heads. The sizes the group registry creates all divide the pool (plan/geometry.h),
  // so the pool dividing mamba_heads is enough.
  for (auto k : s.model.mixers)
    if (k == model::MixerKind::mamba && s.model.mamba_heads % s.pool() != 0)
      throw InputError(path + ": \"model.mamba_heads\"=" + std::to_string(s.model.mamba_heads) +
                       " is not divisible by the pool of " + std::to_string(s.pool()) +
                       " ranks: a Mamba layer must split its heads over every CP size up to the pool");
  return s;
}

}  // namespace dcp::harness
