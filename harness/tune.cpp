// --tune and --sensitivity (see tune.h).
#include "harness/tune.h"

#include "core/error.h"
#include "harness/aggregate.h"
#include "core/rng.h"
#include "core/text.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <tuple>

namespace dcp::harness {
namespace {

using nlohmann::json;

bool every_step_has_numbers(const std::vector<ResultRow>& rows) {
  if (rows.empty()) return false;
  for (const auto& r : rows)
    if (!r.has_metrics()) return false;
  return true;
}

double total_time(const std::vector<ResultRow>& rows) {
  double t = 0;
  for (const auto& r : rows) t += r.step_time_s;
  return t;
}

void scale_curve(cost::Curve& c, double f) {
  for (auto& p : c.points) p.y = std::min(1.0, p.y * f);
}

// Scales a hardware scalar (by calibration key).
std::function<void(cost::CostModel&, double)> scalar(std::vector<std::string> keys) {
  return [keys](cost::CostModel& cm, double f) {
    for (const auto& k : keys) cost::set_profile_scalar(cm.hardware, k, cost::profile_scalar(cm.hardware, k) * f);
  };
}

}  // namespace

namespace {

// The range of M the search covers: [max(512, M0/8), max(2 M0, max_seqlen)].
std::pair<int64_t, int64_t> m_range(const Scenario& s) {
  const int64_t m0 = s.training.max_seqlen_per_rank;
  return {std::max<int64_t>(512, m0 / 8), std::max<int64_t>(2 * m0, s.training.max_seqlen)};
}

// Whether a setting can hold the longest sample the dataset yields (tune_space's comment).
bool holds_longest(const Scenario& s, int64_t m, int cp, bool dynamic) {
  const int64_t longest = planner_length(s, s.training.max_seqlen, dynamic, cp);
  return (dynamic ? static_cast<int64_t>(s.cluster.pool()) : cp) * m >= longest;
}

}  // namespace

std::vector<Setting> tune_refinement(const Scenario& s, const Setting& best, bool dynamic) {
  const auto [lo, hi] = m_range(s);
  std::vector<Setting> out;
  for (const double f : kTuneRefineFactors) {
    const auto m = static_cast<int64_t>(std::llround(static_cast<double>(best.max_seqlen_per_rank) * f));
    if (m >= lo && m <= hi && holds_longest(s, m, best.cp, dynamic)) out.push_back(Setting{m, best.cp, best.vpp});
  }
  return out;
}

std::vector<Setting> tune_space(const Scenario& s, int layers, bool dynamic) {
  const int64_t m0 = s.training.max_seqlen_per_rank;
  std::set<int64_t> ms{m0};
  const auto [lo, hi] = m_range(s);
  for (int64_t m = 1; m <= hi; m *= 2)
    if (m >= lo) ms.insert(m);
  std::vector<int> cps{s.cluster.cp};
  const int pool = s.cluster.pool();
  if (!dynamic) {
    cps.clear();
    // (a full max_seqlen chunk must stay within max_seqlen after the padding of that cp)
    for (int cp = 1; cp <= pool; cp *= 2)
      if (pool % cp == 0 && s.training.global_batch % (pool / cp) == 0 &&
          s.training.max_seqlen % static_pad_multiple(s, cp) == 0)
        cps.push_back(cp);
  }
  std::vector<int> vpps{1};
  if (s.cluster.pp > 1) {
    // (within the limit a scenario's own VPP must meet: helper-32 found the search went past it)
    for (int v = 2; v <= layers / s.cluster.pp; ++v)
      if (layers % (s.cluster.pp * v) == 0 &&
          s.training.global_batch * static_cast<int64_t>(s.cluster.pp) * v <= kMaxSamplesTimesStages)
        vpps.push_back(v);
  }
  if (std::find(vpps.begin(), vpps.end(), s.cluster.vpp) == vpps.end()) vpps.push_back(s.cluster.vpp);
  // Only settings that can hold the longest sample the dataset yields (max_seqlen, padded as the
  // planner sees it): cp * M tokens for a static CP group, the pool's DP x CP x M for a dynamic
  // one. On a batch with such a sample any other setting has no valid plan (Megatron fails the
  // step), however fast it was on the batches the search saw: with 3 steps of CommonCrawl, a
  // setting holding 65536 of the 131072 tokens won as "tuned" and was invalid on 5 of the 19
  // further draws (`run --draws 20`, 2026-11-27). The published setting is kept whatever it holds.
  std::vector<Setting> out;
  for (int64_t m : ms)
    for (int cp : cps)
      for (int v : vpps) {
        const bool published = m == m0 && cp == s.cluster.cp && v == s.cluster.vpp;
        if (published || holds_longest(s, m, cp, dynamic)) out.push_back(Setting{m, cp, v});
      }
  return out;
}

uint64_t tune_selection_seed(uint64_t seed) { return hash_u64(seed, kTuneSelectionSalt); }

std::string tune_pick_phrase(const nlohmann::json& context) {
  const std::string v = context.value("tune_pick", "in-sample");
  bool held_out = false, in_sample = false;
  for (const auto& part : context_value_parts(v)) {
    if (part == kTunePickHeldOut)
      held_out = true;
    else if (part != kTunePickNone)
      in_sample = true;
  }
  if (held_out && !in_sample)
    return "picked on held-out selection batches (another seed's steps; for a replayed pool, megatron-mock, the "
           "batches before the run's), so it may be slower than the published one on these batches";
  if (held_out) return "picked on held-out batches in some files, in-sample in others";
  if (!in_sample) return "not searched here (run without --tune: no tuned rows)";
  return "picked as the fastest on these same batches (in-sample; results written before 2026-12-06)";
}

std::vector<std::string> context_value_parts(const std::string& v) {
  std::vector<std::string> out;
  std::string cur;
  for (size_t i = 0; i <= v.size(); ++i) {
    const bool plus = v.compare(i, 3, " + ") == 0;
    if (i == v.size() || v[i] == ',' || plus) {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
      if (plus) i += 2;
    } else {
      cur += v[i];
    }
  }
  return out;
}

std::string tune_pick_phrase(const ResultsFile& results) {
  const bool tuned = std::any_of(results.rows.begin(), results.rows.end(), [](const ResultRow& r) { return r.setting == "tuned"; });
  return tune_pick_phrase(tuned ? results.context : nlohmann::json{{"tune_pick", kTunePickNone}});
}

void sample_selection_batches(PreparedScenario& p) {
  // An ordered source (megatron-mock) ignores the seed: its held-out batches are the `steps`
  // windows before the run's first (sample_batches), which no run or draw reads.
  if (p.source.kind == data::SourceKind::sequence) {
    try {
      sample_batches(p, -p.steps);
    } catch (const InputError& e) {
      throw InputError(std::string("--tune's selection batches (the ") + std::to_string(p.steps) +
                       " before the run's): " + e.what());
    }
    return;
  }
  const uint64_t seed = p.sampler.seed;
  p.sampler.seed = tune_selection_seed(seed);
  try {
    sample_batches(p);
  } catch (const InputError& e) {
    p.sampler.seed = seed;
    throw InputError(std::string("--tune's selection batches (seed ") + std::to_string(tune_selection_seed(seed)) +
                     "): " + e.what());
  }
  p.sampler.seed = seed;
}

std::vector<ResultRow> run_tuned(PreparedScenario& p, const RunOptions& options,
                                 const plan::PlannerRegistry& registry) {
  const Scenario& s = *p.scenario;
  RunOptions quiet = options;
  quiet.detail = false;
  // The batches the settings are compared on: as many steps as the run, drawn from the data
  // stream of another seed (a replayed pool: its batches before the run's), so held out from the
  // batches the rows report (and from every draw of --draws) (tune.h). They take the place of p's own in p during the search (no copy of the
  // scenario's length source, one set of batches held at a time).
  struct Restore {
    PreparedScenario& p;
    std::vector<data::SampledBatch> own;
    ~Restore() {
      if (!own.empty()) p.batches = std::move(own);
    }
  } restore{p, std::move(p.batches)};
  sample_selection_batches(p);
  struct Pick {
    std::optional<Setting> setting;  // none: no setting had numbers on every selection batch
    int tried = 0;
    std::string elapsed;
  };
  std::vector<Pick> picks;
  for (const auto& strategy : p.strategies) {
    const auto t0 = std::chrono::steady_clock::now();
    const bool dynamic = registry.make(strategy)->dynamic();
    Pick pick;
    double best_t = 0;
    std::set<std::tuple<int64_t, int, int>> seen;
    std::map<std::pair<int, int>, std::pair<double, Setting>> best_per_cp_vpp;  // first pass
    const auto try_setting = [&](const Setting& setting) {
      if (!seen.insert({setting.max_seqlen_per_rank, setting.cp, setting.vpp}).second) return;
      std::vector<ResultRow> rows;
      quiet.phase = "--tune " + setting.to_json().dump() + " on the selection batches";
      try {
        rows = run_strategy(p, p.cm, strategy, setting, "tuned", quiet, registry);
      } catch (const InputError&) {
        return;  // an impossible setting (cp not dividing the pool, ...)
      }
      ++pick.tried;
      if (!every_step_has_numbers(rows)) return;
      const double t = total_time(rows);
      const auto [at, fresh] = best_per_cp_vpp.try_emplace({setting.cp, setting.vpp}, t, setting);
      if (!fresh && t < at->second.first) at->second = {t, setting};
      if (!pick.setting || t < best_t) {
        pick.setting = setting;
        best_t = t;
      }
    };
    for (const auto& setting : tune_space(s, p.cm.model.layers, dynamic)) try_setting(setting);
    // Then M within the octaves around the best M of each (cp, VPP) (tune.h): the grid's factor
    // of 2 had left the baselines, whose micro-batch counts and group sizes move with M, up to
    // 4-14% behind their best on Megatron's example, while dcp, which searches its own
    // micro-batch count, reaches its plateau on the grid (helper-17's audit).
    const auto first_pass = best_per_cp_vpp;
    for (const auto& [knobs, best_there] : first_pass)
      for (const auto& setting : tune_refinement(s, best_there.second, dynamic)) try_setting(setting);
    pick.elapsed = elapsed_text(t0);
    picks.push_back(std::move(pick));
  }
  // The picks on the run's own batches: the rows reported.
  p.batches = std::move(restore.own);
  restore.own.clear();
  std::vector<ResultRow> out;
  for (size_t i = 0; i < p.strategies.size(); ++i) {
    const std::string& strategy = p.strategies[i];
    const Pick& pick = picks[i];
    quiet.phase = "--tune: the pick on the run's batches";
    std::vector<ResultRow> rows =
        run_strategy(p, p.cm, strategy, pick.setting ? *pick.setting : published_setting(s), "tuned", quiet, registry);
    std::string said = pick.setting ? "picked " : "none with numbers on every step of the selection batches (out of "
                                                  "memory or no valid plan): the published setting's rows kept, ";
    said += rows.front().knobs.dump();
    if (pick.setting && !every_step_has_numbers(rows))
      said += ", which has a step without numbers (out of memory or no valid plan) on the run's batches";
    progress_line(options, "dcpbench run --tune: " + s.name + " " + strategy + ": " + std::to_string(pick.tried) +
                               " settings on the selection batches (" + pick.elapsed + "), " + said);
    out.insert(out.end(), std::make_move_iterator(rows.begin()), std::make_move_iterator(rows.end()));
  }
  return out;
}

std::vector<SensitivityParameter> sensitivity_parameters() {
  // The parameters marked [estimate] or [derived] in impl/cost/hardware.cpp and
  // attention_table.cpp, and the link bandwidths: datasheet figures, but NCCL achieves less than
  // them (README: "every memory-bound kernel and link also runs at its datasheet peak") by an
  // amount not measured here, and CP rings inside a node run on NVLink (every Llama-13B and
  // Megatron-example group: until 2026-11-28 only the NIC was varied, so no ring's bandwidth was,
  // helper-32). Peak FLOP/s is not varied (the efficiency curves carry its uncertainty), nor HBM
  // bandwidth (the byte counts of the memory-bound kernels are).
  return {
      {"gemm_efficiency", [](cost::CostModel& cm, double f) { scale_curve(cm.hardware.gemm_efficiency, f); }},
      {"attention_efficiency",
       [](cost::CostModel& cm, double f) {
         for (auto& t : cm.hardware.attention_tables)
           for (auto* g : {&t.fwd_causal, &t.fwd_full, &t.bwd})
             for (double& v : *g) v = std::min(1.0, v * f);
       }},
      // The points below 512 tokens alone (every backend's 128 and 256 rows and columns): the FA3
      // paper starts at 512, so they are [estimate]s with no source (attention_table.cpp), and
      // they set most short documents' ring steps; scaling whole tables (above) mostly cancels in
      // speedups and hides them (helper-66: +-20% on them alone moved Llama-13B GitHub's dcp
      // speedup 1.797 / 1.772 / 1.752).
      {"attention_efficiency_short",
       [](cost::CostModel& cm, double f) {
         for (auto& t : cm.hardware.attention_tables) {
           const size_t n = t.lengths.size();
           for (auto* g : {&t.fwd_causal, &t.fwd_full, &t.bwd})
             for (size_t iq = 0; iq < n; ++iq)
               for (size_t ik = 0; ik < n; ++ik)
                 if (t.lengths[iq] < 512 || t.lengths[ik] < 512)
                   (*g)[iq * n + ik] = std::min(1.0, (*g)[iq * n + ik] * f);
         }
       }},
      {"host_layer_s", scalar({"host_layer_fwd_s", "host_layer_bwd_s", "grad_add_host_s", "tp_collective_host_s"})},
      {"ring_host_s", scalar({"ring_step_fwd_s", "ring_step_bwd_s", "bshd_ring_step_fwd_s", "bshd_ring_step_bwd_s",
                              "ring_call_fwd_s", "ring_call_bwd_s", "bshd_ring_call_fwd_s", "bshd_ring_call_bwd_s",
                              "cudnn_ring_step_fwd_s", "cudnn_ring_step_bwd_s", "cudnn_ring_call_fwd_s",
                              "cudnn_ring_call_bwd_s", "cudnn_bshd_ring_step_fwd_s", "cudnn_bshd_ring_step_bwd_s",
                              "cudnn_bshd_ring_call_fwd_s", "cudnn_bshd_ring_call_bwd_s", "thd_flash_ring_bwd_sync_s"})},
      {"microbatch_overhead_s",
       scalar({"microbatch_every_stage_s", "microbatch_first_stage_s", "microbatch_last_stage_s"})},
      {"iteration_overhead_s", scalar({"iteration_overhead_s"})},
      {"packed_data_overhead_s", scalar({"packed_data_overhead_s"})},
      {"ring_side_bytes", scalar({"thd_side_fwd_bytes_q", "thd_side_fwd_bytes_kv", "thd_side_bwd_bytes_q",
                                 "thd_side_bwd_bytes_kv", "thd_side_first_fwd_bytes_q", "thd_side_first_fwd_bytes_kv",
                                 "thd_side_first_bwd_bytes_q",
                                 "thd_side_first_bwd_bytes_kv", "bshd_side_fwd_bytes_q", "bshd_side_fwd_bytes_kv",
                                 "bshd_side_bwd_bytes_q", "bshd_side_bwd_bytes_kv", "bshd_side_first_fwd_bytes_q"})},
      {"thd_fused_fill_bytes",
       scalar({"thd_fused_fill_fwd_bytes_q", "thd_fused_fill_bwd_bytes_q", "thd_fused_fill_bwd_bytes_kv"})},
      {"optimizer_bytes_per_param", scalar({"optimizer_bytes_per_param"})},
      {"elementwise_bytes", scalar({"elementwise_bytes_per_token_hidden", "loss_bytes_per_token_vocab",
                                    "loss_fused_bytes_per_token_vocab", "loss_te_bytes_per_token_vocab"})},
      {"link_latency_s", scalar({"intra_node_latency_s", "inter_node_latency_s"})},
      {"nic_bytes_per_s", scalar({"inter_node_bytes_per_s"})},
      {"nvlink_bytes_per_s", scalar({"intra_node_bytes_per_s"})},
      {"memory_reserved_bytes", scalar({"memory_reserved_bytes"})},
      {"ce_bytes_per_logit", scalar({"ce_fp32_saved_bytes_per_logit", "ce_fp32_peak_bytes_per_logit",
                                     "ce_te_saved_bytes_per_logit", "ce_te_peak_bytes_per_logit"})},
  };
}

SpeedupSummary summarize_speedups(const std::vector<ResultRow>& rows, const std::vector<std::string>& strategies,
                                  const std::string& reference) {
  std::map<std::string, std::map<int, double>> t;  // strategy -> step -> time (rows with numbers)
  std::map<std::string, bool> complete;
  for (const auto& st : strategies) complete[st] = true;
  for (const auto& r : rows) {
    if (r.has_metrics()) t[r.strategy][r.step] = r.step_time_s;
    else complete[r.strategy] = false;
  }
  SpeedupSummary out;
  std::vector<std::pair<double, std::string>> order;
  std::vector<std::string> without;
  for (const auto& st : strategies) {
    if (!complete[st] || t[st].empty()) {
      without.push_back(st);
      continue;
    }
    double mine = 0;
    for (const auto& [step, x] : t[st]) mine += x;
    order.push_back({mine, st});
    out.total_s[st] = mine;
  }
  // The speedups as the table's aggregates give them (aggregate.h: over every step, where the
  // strategy and the reference both have numbers on each), so both statistics match the table.
  ResultsFile file;
  file.rows = rows;
  for (const Aggregate& a : aggregate(file)) {
    if (a.reference != reference || !out.total_s.count(a.strategy)) continue;
    if (a.speedup_vs_reference) out.speedup[a.strategy] = *a.speedup_vs_reference;
    if (a.trimmed_speedup_vs_reference) out.trimmed[a.strategy] = *a.trimmed_speedup_vs_reference;
  }
  std::stable_sort(order.begin(), order.end());
  for (const auto& [_, st] : order) out.ranking.push_back(st);
  out.ranking.insert(out.ranking.end(), without.begin(), without.end());
  out.without_numbers = std::move(without);
  return out;
}

namespace {

// The pairs `v` reorders: a strategy it puts ahead of one the nominal ranking has before it, by
// more than kRankingTolerance of their summed step times (both with numbers in both), as
// {"ahead", "behind"} in nominal order of the one now behind.
json clear_swaps(const SpeedupSummary& nominal, const SpeedupSummary& v) {
  std::vector<std::string> ranked;  // nominal order, strategies with numbers in both
  for (const auto& st : nominal.ranking)
    if (nominal.total_s.count(st) && v.total_s.count(st)) ranked.push_back(st);
  json swaps = json::array();
  for (size_t i = 0; i < ranked.size(); ++i)
    for (size_t j = i + 1; j < ranked.size(); ++j) {
      const double first = v.total_s.at(ranked[i]), second = v.total_s.at(ranked[j]);
      if (second < first * (1.0 - kRankingTolerance)) swaps.push_back({{"ahead", ranked[j]}, {"behind", ranked[i]}});
    }
  return swaps;
}

// Widens e's [min_key, max_key] range to take x.
void widen(json& e, const char* min_key, const char* max_key, double x) {
  e[min_key] = e[min_key].is_null() ? x : std::min(e[min_key].get<double>(), x);
  e[max_key] = e[max_key].is_null() ? x : std::max(e[max_key].get<double>(), x);
}

}  // namespace

json merge_study(const SpeedupSummary& nominal, const std::vector<std::pair<std::string, SpeedupSummary>>& variants,
                 const std::vector<std::string>& strategies, bool reference_run) {
  json speedups = json::object();
  std::map<std::string, double> widest;  // strategy -> largest |variant - nominal|
  for (const auto& st : strategies) {
    json e = {{"nominal", nullptr},         {"min", nullptr},         {"max", nullptr},
              {"trimmed_nominal", nullptr}, {"trimmed_min", nullptr}, {"trimmed_max", nullptr},
              {"widest_parameter", "-"},    {"no_number_in", json::array()}};
    auto it = nominal.speedup.find(st);
    if (it != nominal.speedup.end()) e["nominal"] = e["min"] = e["max"] = it->second;
    else e["no_number_in"].push_back("nominal");
    if (auto tr = nominal.trimmed.find(st); tr != nominal.trimmed.end())
      e["trimmed_nominal"] = e["trimmed_min"] = e["trimmed_max"] = tr->second;
    speedups[st] = std::move(e);
  }
  json changed_by = json::array();
  json swaps_by = json::object();  // variant -> the pairs it reorders (clear_swaps)
  for (const auto& [name, v] : variants) {
    for (const auto& st : strategies) {
      auto& e = speedups[st];
      if (auto tr = v.trimmed.find(st); tr != v.trimmed.end()) widen(e, "trimmed_min", "trimmed_max", tr->second);
      auto it = v.speedup.find(st);
      if (it == v.speedup.end()) {
        e["no_number_in"].push_back(name);
        continue;
      }
      const double x = it->second;
      widen(e, "min", "max", x);
      if (e["nominal"].is_null()) continue;
      const double d = std::abs(x - e["nominal"].get<double>());
      if (d > widest[st]) {
        widest[st] = d;
        e["widest_parameter"] = name.substr(0, name.rfind(" x"));
      }
    }
    json swaps = clear_swaps(nominal, v);
    if (v.without_numbers != nominal.without_numbers || !swaps.empty()) changed_by.push_back(name);
    if (!swaps.empty()) swaps_by[name] = std::move(swaps);
  }
  json out = {{"ranking", nominal.ranking},
              {"without_numbers", nominal.without_numbers},
              {"ranking_changes", !changed_by.empty()},
              {"ranking_changed_by", changed_by},
              {"ranking_swaps", swaps_by},
              {"ranking_tolerance", kRankingTolerance},
              {"speedups", speedups}};
  if (!reference_run) out["reference_missing"] = true;
  return out;
}

std::map<std::string, Setting> tuned_settings(const std::vector<ResultRow>& rows) {
  std::map<std::string, Setting> out;
  for (const auto& r : rows) {
    if (r.setting != "tuned" || !r.knobs.is_object()) continue;
    out[r.strategy] = Setting{r.knobs.value("max_seqlen_per_rank", int64_t{0}), r.knobs.value("cp", 1),
                              r.knobs.value("vpp", 1)};
  }
  return out;
}

namespace {

// Nominal summary and its range over every variant, for one choice of settings per strategy.
json study(const PreparedScenario& p, const RunOptions& quiet, const plan::PlannerRegistry& registry,
           const std::function<Setting(const std::string&)>& setting_of, const std::string& label) {
  const Scenario& s = *p.scenario;
  std::string phase = "--sensitivity nominal";
  auto run_all = [&](const cost::CostModel& cm) {
    std::vector<ResultRow> rows;
    RunOptions here = quiet;
    here.phase = phase;
    for (const auto& st : p.strategies) {
      // Simulated under the variant, planned with the scenario's own model (runner.h).
      auto r = run_strategy(p, cm, st, setting_of(st), label, here, registry, &p.cm);
      rows.insert(rows.end(), r.begin(), r.end());
    }
    return summarize_speedups(rows, p.strategies, s.reference_strategy);
  };
  const SpeedupSummary nominal = run_all(p.cm);
  std::vector<std::pair<std::string, SpeedupSummary>> summaries;
  json variants = json::array();
  for (const auto& param : sensitivity_parameters()) {
    for (double f : {kSensitivityLow, kSensitivityHigh}) {
      cost::CostModel cm = p.cm;
      param.scale(cm, f);
      const std::string name = param.name + " x" + (f < 1 ? "0.8" : "1.2");
      phase = "--sensitivity " + name;
      SpeedupSummary v = run_all(cm);
      variants.push_back({{"name", name},  // the key of ranking_changed_by and ranking_swaps
                          {"parameter", param.name},
                          {"factor", f},
                          {"speedups", v.speedup},
                          {"ranking", v.ranking},
                          {"without_numbers", v.without_numbers}});
      summaries.emplace_back(name, std::move(v));
    }
  }
  const bool reference_run =
      std::find(p.strategies.begin(), p.strategies.end(), s.reference_strategy) != p.strategies.end();
  json out = merge_study(nominal, summaries, p.strategies, reference_run);
  out["variants"] = std::move(variants);
  return out;
}

}  // namespace

json run_sensitivity(const PreparedScenario& p, const RunOptions& options, const plan::PlannerRegistry& registry,
                     const std::map<std::string, Setting>& tuned) {
  const Scenario& s = *p.scenario;
  RunOptions quiet = options;
  quiet.detail = false;
  const auto t0 = std::chrono::steady_clock::now();
  json out = study(p, quiet, registry, [&](const std::string&) { return published_setting(s); }, "published");
  out["scenario"] = s.name;
  out["reference"] = s.reference_strategy;
  if (!tuned.empty()) {
    out["tuned"] = study(p, quiet, registry, [&](const std::string& st) {
      auto it = tuned.find(st);
      return it != tuned.end() ? it->second : published_setting(s);
    }, "tuned");
  }
  progress_line(options, "dcpbench run --sensitivity: " + s.name + ": " + std::to_string(out["variants"].size()) +
                             " variants" + (tuned.empty() ? "" : " x 2 (published, tuned settings)") + " (" +
                             elapsed_text(t0) + ")");
  return out;
}

json sensitivity_section(const json& scenarios) {
  json params = json::array();
  for (const auto& p : sensitivity_parameters()) params.push_back(p.name);
  return {{"low", kSensitivityLow},
          {"high", kSensitivityHigh},
          {"setting", "published (and tuned, when run with --tune: each strategy's tuned setting held fixed)"},
          {"parameters", params},
          {"scenarios", scenarios}};
}

}  // namespace dcp::harness
