// `dcpbench share`: one pool rank's share of a strategy's plan on one pipeline stage (sim/
// rank_share.h): the micro-batches it runs, the CP group of each, the sequences and rows it holds,
// and what the cost model predicts for each, forward and backward. The busiest rank and its
// busiest stage by default: the GPU that sets the pace. What a GPU run of that rank executes and
// is compared with, micro-batch by micro-batch (issue 10).
//   dcpbench share SCENARIO --strategy NAME [--step I] [--rank R] [--stage S] [--out FILE]
//                  [--measure [--reps N] | --measured RESULTS.json] [--calibration F] [--attention-backend B]
// --measure replays the share on this GPU; --measured takes the times a `run --backend cuda` of the
// same share recorded (measured.microbatch_times), so the error per micro-batch under another
// calibration needs no GPU.
// Writes JSON (schema dcpbench.share.v1) to --out (default stdout) and a table to stderr.
#include "core/error.h"
#include "core/files.h"
#include "core/json_io.h"
#include "cost/hardware.h"
#include "harness/cli_options.h"
#include "harness/commands.h"
#include "harness/measured.h"
#include "harness/results.h"
#include "harness/registry.h"
#include "harness/runner.h"
#include "harness/scenario.h"
#include "plan/validate.h"
#include "sim/rank_share.h"
#include "sim/simulator.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <optional>
#include <tuple>
#include <filesystem>
#include <utility>
#include <vector>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

namespace dcp::harness {

namespace {

constexpr const char* kShareSchema = "dcpbench.share.v1";

struct ShareArgs {
  std::string scenario;
  std::string strategy;
  int step = 0;
  int rank = 0;
  int stage = 0;
  std::string out = "-";
  bool measure = false;
  int reps = 3;
  std::string calibration;
  std::string attention_backend;
  std::string measured;  // --measured: a results file of `run --backend cuda`
};

// The measured row of `results` for this share (--measured): the scenario's, strategy's and
// step's row in the published setting with per-micro-batch times. InputError naming what is
// missing.
const ResultRow& measured_row(const ResultsFile& results, const std::string& path, const Scenario& s,
                              const std::string& strategy, int step) {
  for (const ResultRow& r : results.rows) {
    if (!r.is_measured() || r.scenario != s.name || r.strategy != strategy || r.step != step ||
        r.setting != "published" || !r.measured.is_object() || !r.measured.contains("microbatch_times"))
      continue;
    const nlohmann::json& m = r.measured;
    // Written by `run --backend cuda` since the fingerprint (2026-11-27), with integer places.
    DCP_REQUIRE(m.contains("share") && m["share"].is_string(), "--measured ", show_path(path), ": its row of ",
                quote(strategy), " step ", step, " has no share fingerprint (\"share\", written since 2026-11-27): "
                "measure it again");
    for (const char* key : {"pool_rank", "pp_stage"})
      DCP_REQUIRE(m.contains(key) && m[key].is_number_integer() && m[key].get<int64_t>() >= 0 &&
                      m[key].get<int64_t>() < (int64_t{1} << 30),
                  "--measured ", show_path(path), ": its row's measured.", key, " is not a rank or stage number");
    return r;
  }
  throw InputError(detail::concat("--measured ", show_path(path), ": no measured row of scenario ", quote(s.name),
                                  ", strategy ", quote(strategy), ", step ", step,
                                  " with per-micro-batch times (measure it with dcpbench run ", show_path(s.file),
                                  " --backend cuda --strategies ", strategy, ")"));
}

int run_share(const ShareArgs& a, const CLI::App& cmd) {
  const bool to_file = cmd.count("--out") > 0 && !is_stdout_path(a.out);
  const bool from_file = cmd.count("--measured") > 0;
  if (to_file) check_output_path(a.out);
  DCP_REQUIRE(!(a.measure && from_file), "--measure and --measured ", show_path(a.measured),
              " are exclusive: replay on this GPU, or take an earlier replay's times");
  if (a.measure) require_cuda_device("--measure");
  Scenario s = load_scenario(a.scenario);
  // The plan is made with `planned`. With --measured it is the scenario as it is, as in the run
  // that measured the share; the calibration and attention table given below then change only the
  // prediction. Without it both are the prediction's scenario (the plan the calibration's own
  // simulator makes, as `run` with that calibration would make it).
  const Scenario as_given = s;
  // Predict with a (measured) calibration and its attention table instead of the scenario's.
  if (cmd.count("--calibration")) {
    DCP_REQUIRE(std::filesystem::is_regular_file(a.calibration), "--calibration \"", a.calibration,
                "\" is not a readable file");
    // Read here, so that a bad file is named as the flag's, not as the scenario's "calibration".
    try {
      (void)cost::load_calibration_file(cost::hardware_preset(s.cluster.hardware), a.calibration);
    } catch (const InputError& e) {
      throw InputError("--calibration: " + std::string(e.what()));
    }
    s.calibration = a.calibration;
  }
  if (to_file) {
    std::vector<std::string> inputs = input_files(s);
    if (from_file) {  // the run's own calibration is read too (it plans), and the results file
      for (const auto& f : input_files(as_given)) inputs.push_back(f);
      inputs.push_back(a.measured);
    }
    check_output_not_input(a.out, inputs);
  }
  if (cmd.count("--attention-backend")) {
    // The option's table, checked as the option's: the scenario's own keys first (their errors
    // name the file), then the backend (its error had named the file's key, which says fa3).
    const cost::CostModel cm = cost_model_of(s);
    try {
      (void)cm.hardware.attn_efficiency(a.attention_backend, cost::AttnKind::fwd_causal, 1024, 1024,
                                        static_cast<int>(cm.model.head_dim_or_default()));
    } catch (const InputError& e) {
      throw InputError("--attention-backend " + quote(a.attention_backend) + ": " + e.what());
    }
    s.training.attention_backend = a.attention_backend;
  }
  const Scenario& planned = from_file ? as_given : s;
  DCP_REQUIRE(a.measure || !cmd.count("--reps"), "--reps ", a.reps, " is given without --measure");
  const auto& registry = builtin_planners();
  DCP_REQUIRE(std::find(s.strategies.begin(), s.strategies.end(), a.strategy) != s.strategies.end(), "--strategy \"",
              a.strategy, "\" is not one of the strategies of ", s.file);
  std::optional<ResultsFile> measured_file;
  const ResultRow* row = nullptr;
  if (from_file) {
    measured_file = read_results(a.measured);  // InputError naming the file
    row = &measured_row(*measured_file, a.measured, s, a.strategy, a.step);
  }
  RunOptions opt;
  opt.steps = 1;  // only the batch of --step is drawn
  opt.strategies = {a.strategy};
  PreparedScenario p = prepare_scenario(planned, opt, registry);
  if (a.measure) require_replayable(s, p.cm);  // refused before sampling and planning
  sample_batches(p, a.step);
  const Setting setting = published_setting(s);
  const plan::PlanConfig config = plan_config_of(s, setting);
  const cost::CostModel plan_cm = cost_model_at(p.cm, setting);
  const cost::CostModel cm = from_file ? cost_model_at(cost_model_of(s), setting) : plan_cm;
  const plan::PlanRequest req = plan_request_of(p, plan_cm, a.strategy, config, 0, 0, registry);
  const plan::Plan plan = req.planner->plan(req.batch, req.config);
  plan::validate(plan, req.batch, req.config);  // a planner bug is an internal error
  const auto& real = p.batches[0].real_lengths;
  const sim::StepResult step = sim::simulate_step(plan, req.batch, cm, real, sim::Bound::skip);
  const int pool = cm.cluster.pool();
  // With --measured the measured rank and stage (--rank / --stage, if given, must name them).
  const auto measured_at = [&](const char* key) { return static_cast<int>(row->measured[key].get<int64_t>()); };
  if (from_file) {
    for (const auto& [flag, key, value] : {std::tuple{"--rank", "pool_rank", a.rank}, std::tuple{"--stage", "pp_stage", a.stage}})
      DCP_REQUIRE(!cmd.count(flag) || value == measured_at(key), flag, " ", value, " is not the ", key, " ",
                  measured_at(key), " that ", show_path(a.measured), " measured");
  }
  const bool pick_rank = !cmd.count("--rank") && !from_file;
  const int rank = from_file ? measured_at("pool_rank") : pick_rank ? sim::busiest_pool_rank(step) : a.rank;
  DCP_REQUIRE(rank >= 0 && rank < pool, "--rank ", rank, " is outside the pool of ", pool, " ranks (dp x cp) of ", s.file);
  const bool pick_stage = !cmd.count("--stage") && !from_file;
  const int stage = from_file ? measured_at("pp_stage") : pick_stage ? sim::busiest_stage(step, rank, pool) : a.stage;
  DCP_REQUIRE(stage >= 0 && stage < cm.cluster.pp, "--stage ", stage, " is outside the ", cm.cluster.pp,
              " pipeline stages of ", s.file);
  const sim::RankShare share = sim::rank_share(plan, req.batch, cm, rank, stage);
  std::string measured_source;
  std::vector<ShareTiming> measured;
  if (from_file) {
    // The share rebuilt here must be the one measured: the same model shape, pipeline,
    // micro-batches, groups, samples and lengths (the row's fingerprint of them). A scenario or
    // dcpbench changed since the run plans another share.
    const nlohmann::json& times = row->measured.at("microbatch_times");
    const std::string then = row->measured["share"].get<std::string>(), now = share_fingerprint(share, plan_cm);
    DCP_REQUIRE(times.size() == share.microbatches.size() && then == now, show_path(a.measured),
                " measured another share (", times.size(), " micro-batches, fingerprint ", quote(then),
                "; planned here: ", share.microbatches.size(), ", ", quote(now),
                "): the scenario, dcpbench or the run's options (--time-budget-ms) changed since that run");
    for (const auto& t : times)
      measured.push_back(ShareTiming{t[0].get<double>(), t[1].get<double>(), t[2].get<double>(), t[3].get<double>()});
    measured_source = row->source;
  }
  if (to_file) probe_output_folder(a.out);  // last: bad input above leaves the folder untouched
  if (a.measure) {
    measured_source = "measured:" + cuda_device_name();
    measured = cuda_share_measurer()(share, cm, a.reps, s.name + " " + a.strategy + " step " + std::to_string(a.step));
    for (size_t i = 0; i < measured.size(); ++i)
      std::fprintf(stderr, "measured micro-batch %d: fwd %.3f ms, bwd %.3f ms\n", share.microbatches[i].microbatch,
                   1e3 * measured[i].fwd_s, 1e3 * measured[i].bwd_s);
  }

  nlohmann::json mbs = nlohmann::json::array();
  for (size_t i = 0; i < share.microbatches.size(); ++i) {
    const auto& m = share.microbatches[i];
    mbs.push_back({{"microbatch", m.microbatch},
                   {"first_rank", m.first_rank},
                   {"cp_size", m.cp_size},
                   {"cp_rank", m.cp_rank},
                   {"samples", m.samples},
                   {"lengths", m.lengths},
                   {"local_tokens", m.local_tokens},
                   {"predicted",
                    {{"fwd_s", m.predicted.fwd_s},
                     {"bwd_s", m.predicted.bwd_s},
                     {"fwd_compute_s", m.predicted.fwd_compute_s},
                     {"bwd_compute_s", m.predicted.bwd_compute_s},
                     {"recompute_s", m.predicted.recompute_s},
                     {"fwd_comm_s", m.predicted.fwd_comm_s},
                     {"bwd_comm_s", m.predicted.bwd_comm_s},
                     {"fwd_overhead_s", m.predicted.fwd_overhead_s},
                     {"bwd_overhead_s", m.predicted.bwd_overhead_s},
                     {"p2p_s", m.predicted.p2p_s}}}});
    if (!measured.empty()) {
      // Like for like: the prediction without its CP communication (a transfer the one GPU does
      // not make) against the measurement without the ring's stand-in copies.
      const double pred = m.predicted.fwd_s + m.predicted.bwd_s - m.predicted.fwd_comm_s - m.predicted.bwd_comm_s;
      const double meas = measured[i].fwd_s + measured[i].bwd_s - measured[i].copy_fwd_s - measured[i].copy_bwd_s;
      mbs.back()["measured"] = {{"fwd_s", measured[i].fwd_s},
                                {"bwd_s", measured[i].bwd_s},
                                {"ring_copy_fwd_s", measured[i].copy_fwd_s},
                                {"ring_copy_bwd_s", measured[i].copy_bwd_s},
                                {"predicted_no_comm_s", pred},
                                {"measured_no_copy_s", meas},
                                {"error", meas > 0 ? pred / meas - 1 : 0.0}};
    }
  }
  const nlohmann::json j = {{"schema", kShareSchema},
                            {"scenario", s.name},
                            {"strategy", a.strategy},
                            {"setting", "published"},
                            {"knobs", setting.to_json()},
                            {"step", a.step},
                            {"source", cost::source_label(cm)},
                            // The attention table the prediction used (the scenario's, or
                            // --attention-backend's: it moves the numbers, the source label does
                            // not name it; audit of helper-48).
                            {"attention_backend", cm.training.attention_backend},
                            {"pool", pool},
                            {"pp", cm.cluster.pp},
                            {"vpp", cm.cluster.vpp},
                            {"pool_rank", rank},
                            {"rank_chosen", from_file ? row->measured.value("rank_chosen", "as measured")
                                                      : pick_rank ? "busiest" : "--rank"},
                            {"pp_stage", stage},
                            {"stage_chosen", from_file ? row->measured.value("stage_chosen", "as measured")
                                                       : pick_stage ? "busiest of the rank" : "--stage"},
                            {"layers", share.layers},
                            {"last_stage", share.last_stage},
                            {"busy_s", share.busy_s},
                            {"fits", step.fits},  // false: the plan does not fit the GPU's memory (run: oom)
                            {"step_s", step.step_s},
                            {"microbatches", mbs}};
  nlohmann::json out = j;
  if (!measured.empty()) {
    double busy = 0, meas = 0, pred = 0;
    for (size_t i = 0; i < measured.size(); ++i) {
      const auto& r = measured[i];
      const auto& p = share.microbatches[i].predicted;
      busy += r.fwd_s + r.bwd_s;
      meas += r.fwd_s + r.bwd_s - r.copy_fwd_s - r.copy_bwd_s;
      pred += p.fwd_s + p.bwd_s - p.fwd_comm_s - p.bwd_comm_s;
    }
    out["measured_source"] = measured_source;
    if (from_file) {
      out["measured_from"] = a.measured;  // the replay's times come from this run's row
      out["planned_with"] = cost::source_label(plan_cm);
    }
    out["measured_busy_s"] = busy;
    out["rank_step_error"] = meas > 0 ? pred / meas - 1 : 0.0;  // simulated / measured - 1, like for like
    out["measured_note"] =
        std::string(from_file ? "the times a run --backend cuda recorded (--measured): " : "") +
        "the rank's ops replayed on " + (from_file ? "its GPU" : "this GPU") +
        " (exec/stage_ops.h): CP peers virtual, their KV as device copies (ring_copy_*, inside fwd_s/bwd_s; the "
        "real transfer is what the simulator models), no PP or DP traffic";
  }
  write_json_atomic(to_file ? a.out : "-", out, 1);

  std::FILE* t = stderr;
  std::fprintf(t, "%s, %s, step %d: pool rank %d (%s), pipeline stage %d (%s), %d layers%s; %s, attention %s%s\n", s.name.c_str(),
               a.strategy.c_str(), a.step, rank, from_file ? "as measured" : pick_rank ? "busiest" : "chosen", stage,
               from_file ? "as measured" : pick_stage ? "its busiest" : "chosen", share.layers, share.last_stage ? " + output layer and loss" : "",
               cost::source_label(cm).c_str(), cm.training.attention_backend.c_str(),
               a.attention_backend.empty() ? "" : " (--attention-backend)");
  std::fprintf(t, "%4s %5s %4s %9s %9s %12s %12s %10s %10s\n", "mb", "group", "k", "sequences", "rows", "fwd ms",
               "bwd ms", "comm ms", "ovh ms");
  for (const auto& m : share.microbatches) {
    const sim::OpCost& o = m.predicted;
    std::fprintf(t, "%4d %5d %4d %9zu %9lld %12.3f %12.3f %10.3f %10.3f\n", m.microbatch, m.first_rank, m.cp_size,
                 m.lengths.size(), static_cast<long long>(m.local_tokens), 1e3 * o.fwd_s, 1e3 * o.bwd_s,
                 1e3 * (o.fwd_comm_s + o.bwd_comm_s), 1e3 * (o.fwd_overhead_s + o.bwd_overhead_s));
  }
  std::fprintf(t, "busy %.3f ms of a simulated step of %.3f ms (the rest: pipeline bubble, waiting, DP sync, "
               "per-iteration cost)%s\n", 1e3 * share.busy_s, 1e3 * step.step_s,
               step.fits ? "" : "; the plan does NOT fit the GPU's memory (run reports it as oom)");
  if (!measured.empty()) {
    double busy = 0;
    for (const auto& r : measured) busy += r.fwd_s + r.bwd_s;
    std::fprintf(t, "measured %s (%s): busy %.3f ms; simulated / measured = %.3f\n",
                 from_file ? ("in " + show_path(a.measured)).c_str() : "on this GPU", measured_source.c_str(),
                 1e3 * busy, busy > 0 ? share.busy_s / busy : 0.0);
  }
  return 0;
}

}  // namespace

void add_share_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<ShareArgs>();
  CLI::App* cmd = app.add_subcommand(
      "share", "One rank's share of a strategy's plan on one pipeline stage: its micro-batches, CP groups, rows and "
               "the predicted time of each (the busiest rank and stage by default; simulated)");
  cmd->add_option("scenario", args->scenario, "Scenario file (scenarios/*.json)")->required();
  cmd->add_option("--strategy", args->strategy, "A strategy of the scenario (e.g. dcp, packing)")->required();
  add_int_option(cmd, "--step", args->step, 0, 99999, "Global batch (step) of the scenario (default 0)");
  add_int_option(cmd, "--rank", args->rank, 0, 1 << 30, "Pool rank, 0 .. dp*cp-1 (default: the busiest)");
  add_int_option(cmd, "--stage", args->stage, 0, 1 << 20, "Pipeline stage (default: the rank's busiest)");
  cmd->add_flag("--measure", args->measure,
                "Also replay every micro-batch of the share on this machine's GPU and time it (needs a CUDA build and "
                "device; the rank's own ops, CP peers virtual: exec/cuda/stage_runner.h)");
  add_int_option(cmd, "--reps", args->reps, 1, 100, "Timed repetitions per micro-batch with --measure (median; default 3)");
  cmd->add_option("--measured", args->measured,
                  "Take the measured times from this results file of `dcpbench run --backend cuda` (its row of this "
                  "scenario, strategy and --step, at its rank and stage) instead of a GPU: the share is planned as that "
                  "run planned it, and --calibration / --attention-backend change only the prediction (no GPU needed)");
  cmd->add_option("--calibration", args->calibration,
                  "Predict with this calibration file instead of the scenario's (e.g. the measured "
                  "results/calibration/h100-measured.json of `dcpbench calibrate`)");
  cmd->add_option("--attention-backend", args->attention_backend,
                  "Predict with this attention table (fa2, fa3, cudnn, or dcpbench: our kernels, in a measured "
                  "calibration)")
      ->check(CLI::IsMember({"fa2", "fa3", "cudnn", "dcpbench"}));
  cmd->add_option("--out", args->out,
                  "Write the JSON here (atomically; a regular file or a new path in an existing folder; - = stdout, "
                  "the default); the table goes to stderr");
  cmd->callback([args, cmd, &exit_code] { exit_code = run_share(*args, *cmd); });
}

}  // namespace dcp::harness
