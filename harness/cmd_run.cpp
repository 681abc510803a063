// `dcpbench run SCENARIO... [--steps N] [--out FILE] [--strategies a,b] [--quiet] [--no-detail]
// [--tune] [--sensitivity]`: runs the
// scenarios (harness/runner.h), writes the results JSON (schema dcpbench.results.v1, atomically)
// and prints the fixed-width table (harness/report.h) on stdout. Progress lines go to stderr.
// `dcpbench table RESULTS.json` reprints the table of an existing results file.
#include "core/error.h"
#include "harness/commands.h"
#include "harness/registry.h"
#include "harness/report.h"
#include "harness/results.h"
#include "harness/runner.h"
#include "harness/scenario.h"

#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

namespace dcp::harness {

namespace {

struct RunArgs {
  std::vector<std::string> scenarios;
  int steps = 0;
  std::string out = "dcpbench-results.json";
  std::vector<std::string> strategies;
  bool quiet = false;
  bool no_detail = false;
  bool tune = false;
  bool sensitivity = false;
  std::string command;
};

int run_run(const RunArgs& a, const CLI::App& cmd) {
  std::vector<Scenario> scenarios;
  for (const auto& f : a.scenarios) scenarios.push_back(load_scenario(f));
  RunOptions opt;
  if (cmd.count("--steps")) opt.steps = a.steps;
  opt.strategies = a.strategies;
  opt.progress = a.quiet ? nullptr : &std::cerr;
  opt.command = a.command;
  opt.detail = !a.no_detail;
  opt.tune = a.tune;
  opt.sensitivity = a.sensitivity;
  // Fail on an unwritable --out before the (possibly long) run, not after it.
  const std::filesystem::path parent = std::filesystem::path(a.out).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  DCP_REQUIRE(!ec, "--out=", a.out, ": cannot create its folder (", ec.message(), ")");
  const ResultsFile results = run_scenarios(scenarios, opt, builtin_planners());
  write_results(a.out, results);
  print_table(std::cout, results);
  std::cout << "\n# results: " << a.out << " (" << results.rows.size() << " rows, schema " << kResultsSchema
            << "); charts: dcpbench plot " << a.out << " --out DIR\n";
  return 0;
}

int run_table(const std::string& path) {
  print_table(std::cout, read_results(path));
  return 0;
}

}  // namespace

void add_run_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand("run", "Run scenarios (simulated): results JSON + table");
  cmd->add_option("scenarios", args->scenarios, "Scenario files (scenarios/*.json)")->required();
  cmd->add_option("--steps", args->steps, "Steps per scenario (overrides training.steps)")->check(CLI::Range(1, 100000));
  cmd->add_option("--out", args->out, "Results JSON to write (default dcpbench-results.json)");
  cmd->add_option("--strategies", args->strategies, "Only these strategies (comma-separated)")->delimiter(',');
  cmd->add_flag("--quiet", args->quiet, "No progress lines on stderr");
  cmd->add_flag("--no-detail", args->no_detail,
                "Leave out the step-0 per-rank busy times and plan pictures (smaller file; no rank/plan charts)");
  cmd->add_flag("--tune", args->tune,
                "Also search each strategy's knobs (max_seqlen_per_rank, VPP, static CP size) under the memory "
                "model and report its best setting beside the published one (rows with setting \"tuned\")");
  cmd->add_flag("--sensitivity", args->sensitivity,
                "Also re-run with every uncertain cost-model parameter at x0.8 and x1.2: range of every speedup "
                "and whether the ranking of strategies changes");
  cmd->callback([args, cmd, &exit_code, &app] {
    args->command = "dcpbench run";
    for (const auto& s : args->scenarios) args->command += " " + s;
    if (cmd->count("--steps")) args->command += " --steps " + std::to_string(args->steps);
    if (args->tune) args->command += " --tune";
    if (args->sensitivity) args->command += " --sensitivity";
    if (!args->strategies.empty()) {  // the recorded command must reproduce the same rows
      args->command += " --strategies ";
      for (size_t i = 0; i < args->strategies.size(); ++i) args->command += (i ? "," : "") + args->strategies[i];
    }
    (void)app;
    exit_code = run_run(*args, *cmd);
  });

  auto table_path = std::make_shared<std::string>();
  CLI::App* tcmd = app.add_subcommand("table", "Print the table of an existing results file");
  tcmd->add_option("results", *table_path, "Results JSON (dcpbench.results.v1)")->required();
  tcmd->callback([table_path, &exit_code] { exit_code = run_table(*table_path); });
}

}  // namespace dcp::harness
