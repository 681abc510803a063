// `dcpbench schedule`: plan one global batch with one planner and print the plan JSON
// (schema dcpbench.plan.v1, DESIGN.md). Stable interface: scripts and CI depend on it.
//   dcpbench schedule --lengths FILE --planner NAME --dp D --cp C --max-seqlen-per-rank M
//                     [--min-cp K] [--vpp-group V] [--max-seqlen S] [--time-budget-ms B] [--out PLAN.json]
// Bad input exits 2 with one line naming the value, and nothing is written to --out (the file
// is written atomically, after the plan has been built and validated, under the output policy
// of core/files.h: checked before any work, "-" = stdout, never a device, FIFO, folder or link).
#include "core/error.h"
#include "core/files.h"
#include "core/json_io.h"
#include "data/lengths_file.h"
#include "harness/cli_options.h"
#include "harness/commands.h"
#include "harness/registry.h"
#include "plan/plan_json.h"
#include "plan/planner.h"
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
  PlanConfigFlags config;
  int64_t time_budget_ms = 0;
  std::string out;
};

int run_schedule(const ScheduleArgs& a, const CLI::App& cmd) {
  const auto& registry = builtin_planners();
  plan::PlannerOptions options;
  if (cmd.count("--time-budget-ms")) options.time_budget_ms = static_cast<double>(a.time_budget_ms);
  auto planner = registry.make(a.planner, options);  // unknown planner: InputError before any file I/O
  const bool to_file = cmd.count("--out") > 0;
  if (to_file) {  // a bad --out fails before any work
    check_output_path(a.out);
    check_output_not_input(a.out, {a.lengths});
  }

  // A static planner's groups are --cp: a --min-cp it would record and ignore is refused.
  DCP_REQUIRE(!cmd.count("--min-cp") || planner->dynamic(), "--min-cp ", a.config.min_cp, ": planner '", a.planner,
              "' is static (every group has --cp ranks); --min-cp applies to dynamic planners");
  // Likewise a budget that a planner without a search would ignore.
  if (cmd.count("--time-budget-ms") && !planner->searches())
    throw InputError(detail::concat("--time-budget-ms ", a.time_budget_ms, ": planner '", a.planner,
                                    "' does not search; --time-budget-ms applies to planners that search (",
                                    searching_planner_list(), ")"));
  plan::PlanConfig cfg;
  apply_plan_config_flags(cmd, a.config, cfg);

  plan::Batch batch{data::read_sample_lengths_file(a.lengths, plan::kMaxTokensPerRank)};
  plan::check_config(batch, cfg);

  // Some input is only refused while planning (a sample longer than the pool holds, a micro-batch
  // count no multiple of --vpp-group allows) or by the plan's size, so the folder is probed after
  // the plan and its JSON text: planning one batch takes seconds at most (README "Scheduler
  // speed"), and bad input leaves --out's folder untouched, its modification time included.
  const auto t0 = std::chrono::steady_clock::now();
  plan::Plan p = planner->plan(batch, cfg);
  const auto t1 = std::chrono::steady_clock::now();
  plan::validate(p, batch, cfg);  // a planner bug is an internal error (exit 1), never a silent bad plan

  nlohmann::json extra;
  extra["solve_ms"] = std::chrono::duration<double, std::milli>(t1 - t0).count();
  const std::string path = to_file ? a.out : "-";
  // Refuses a plan `check` could not read back (above kMaxJsonFileBytes).
  const std::string text = json_file_text(path, plan::plan_to_json(p, batch, extra), 1);
  if (to_file) probe_output_folder(a.out);
  write_file_atomic(path, text);
  return 0;
}

}  // namespace

void add_schedule_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<ScheduleArgs>();
  CLI::App* cmd = app.add_subcommand("schedule", "Plan one global batch with one planner and print the plan JSON");
  cmd->add_option("--lengths", args->lengths,
                  "Sample lengths: text (one integer per line, # comments), JSON array, or Megatron .idx")
      ->required();
  cmd->add_option("--planner", args->planner, builtin_planner_list())->required();
  add_plan_config_flags(cmd, args->config, true);
  add_int_option(cmd, "--time-budget-ms", args->time_budget_ms, 1, 3600000,
                 "Search budget of the searching planners (dcp's local search), converted to work units by a "
                 "fixed calibration so plans are deterministic (default: the planner's own)");
  cmd->add_option("--out", args->out,
                  "Write the plan JSON here (atomically; a regular file or a new path in an existing folder; "
                  "- = stdout, the default)");
  cmd->footer("Limits: the lengths file at most " + std::to_string(data::kMaxLengthsFileBytes >> 30) + " GiB, " +
              std::to_string(plan::kMaxBatchSamples) + " samples, JSON nested at most " + std::to_string(kMaxJsonDepth) +
              " levels (README.md, \"Input limits and errors\").");
  cmd->callback([args, cmd, &exit_code] { exit_code = run_schedule(*args, *cmd); });
}

}  // namespace dcp::harness
