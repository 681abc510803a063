// `dcpbench schedule`: plan one global batch with one planner and print the plan JSON
// (schema dcpbench.plan.v1, DESIGN.md). Stable interface: scripts and CI depend on it.
//   dcpbench schedule --lengths FILE --planner NAME --dp D --cp C --max-seqlen-per-rank M
//                     [--min-cp K] [--vpp-group V] [--max-seqlen S] [--out PLAN.json]
// Bad input exits 2 with one line naming the value, and nothing is written to --out (the file
// is written atomically, after the plan has been built and validated).
#include "core/error.h"
#include "core/json_io.h"
#include "data/lengths_file.h"
#include "harness/commands.h"
#include "harness/registry.h"
#include "plan/plan_json.h"
#include "plan/validate.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <iostream>
#include <memory>
#include <string>

namespace dcp::harness {

namespace {

struct ScheduleArgs {
  std::string lengths;
  std::string planner;
  int dp = 0;
  int cp = 0;
  int64_t max_seqlen_per_rank = 0;
  int min_cp = 1;
  int vpp_group = 0;
  int64_t max_seqlen = 0;
  std::string out;
};

int run_schedule(const ScheduleArgs& a, const CLI::App& cmd) {
  const auto& registry = builtin_planners();
  auto planner = registry.make(a.planner);  // unknown planner: InputError before any file I/O

  plan::PlanConfig cfg;
  cfg.dp = a.dp;
  cfg.cp = a.cp;
  cfg.max_seqlen_per_rank = a.max_seqlen_per_rank;
  cfg.min_cp = a.min_cp;
  if (cmd.count("--vpp-group")) cfg.vpp_group = a.vpp_group;
  if (cmd.count("--max-seqlen")) cfg.max_seqlen = a.max_seqlen;

  plan::Batch batch{data::read_lengths_file(a.lengths)};
  plan::check_config(batch, cfg);

  const auto t0 = std::chrono::steady_clock::now();
  plan::Plan p = planner->plan(batch, cfg);
  const auto t1 = std::chrono::steady_clock::now();
  plan::validate(p, batch, cfg);  // a planner bug is an internal error (exit 1), never a silent bad plan

  nlohmann::json extra;
  extra["solve_ms"] = std::chrono::duration<double, std::milli>(t1 - t0).count();
  const nlohmann::json j = plan::plan_to_json(p, batch, extra);
  if (a.out.empty()) {
    std::cout << j.dump(1) << "\n";
  } else {
    write_json_atomic(a.out, j);
  }
  return 0;
}

}  // namespace

void add_schedule_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<ScheduleArgs>();
  CLI::App* cmd = app.add_subcommand("schedule", "Plan one global batch with one planner and print the plan JSON");
  cmd->add_option("--lengths", args->lengths,
                  "Sample lengths: text (one integer per line, # comments), JSON array, or Megatron .idx")
      ->required();
  cmd->add_option("--planner", args->planner, "megatron-pr2000 | megatron-dev | dcp | packing | bshd")->required();
  cmd->add_option("--dp", args->dp, "Data-parallel size D")->required();
  cmd->add_option("--cp", args->cp, "Static CP size C (dynamic planners use the pool N = D*C)")->required();
  cmd->add_option("--max-seqlen-per-rank", args->max_seqlen_per_rank, "Token budget per rank M")->required();
  cmd->add_option("--min-cp", args->min_cp, "Smallest dynamic CP group (power of two)")->default_val(1);
  cmd->add_option("--vpp-group", args->vpp_group, "Micro-batch count must be a multiple of V (interleaved VPP)");
  cmd->add_option("--max-seqlen", args->max_seqlen, "Maximum sample length (bshd pads every sample to it)");
  cmd->add_option("--out", args->out, "Write the plan JSON here (atomically) instead of stdout");
  cmd->callback([args, cmd, &exit_code] { exit_code = run_schedule(*args, *cmd); });
}

}  // namespace dcp::harness
