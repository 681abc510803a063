// `dcpbench evaluate RESULTS.json... [--focus dcp] [--peers a,b,...] [--out FILE.md]`: the planner
// evaluation report (harness/evaluation.h) from existing results files (their rows together; a
// scenario may appear in only one of them; the provenance is the first file's): one strategy against its
// peers per scenario and setting, where the step-time difference comes from, and the issue-13
// targets as met / not met. Markdown on stdout or into --out (the output policy of core/files.h:
// written whole or not at all). Exit 0 when written, 2 for bad input; `--strict` exits 1 when a
// target is not met.
#include "core/error.h"
#include "core/files.h"
#include "core/text.h"
#include "harness/cli_options.h"
#include "harness/commands.h"
#include "harness/evaluation.h"
#include "harness/registry.h"
#include "harness/results.h"

#include <iostream>
#include <memory>
#include <set>
#include <vector>
#include <sstream>
#include <string>

namespace dcp::harness {

namespace {

struct EvaluateArgs {
  std::vector<std::string> results;
  std::string out = "-";
  EvaluationOptions options;
  bool strict = false;
  bool peers_given = false;
};

int run_evaluate(EvaluateArgs a) {
  // The names first (like run --strategies): a misspelt peer would leave its tables empty.
  const plan::PlannerRegistry& registry = builtin_planners();
  const std::string known = builtin_planner_list(", ");
  DCP_REQUIRE(registry.contains(a.options.focus), "--focus: ", quote(a.options.focus),
              " is not a known planner (known: ", known, ")");
  // The default peers leave out the focus itself (--focus packing compares packing with the
  // other three); peers the user lists are taken as given, and checked.
  if (!a.peers_given) std::erase(a.options.peers, a.options.focus);
  std::erase(a.options.strong_peers, a.options.focus);  // not a flag: never the focus against itself
  std::set<std::string> seen;
  for (const auto& p : a.options.peers) {
    DCP_REQUIRE(registry.contains(p), "--peers: ", quote(p), " is not a known planner (known: ", known, ")");
    DCP_REQUIRE(p != a.options.focus, "--peers: ", quote(p), " is the --focus strategy itself");
    DCP_REQUIRE(seen.insert(p).second, "--peers: ", quote(p), " is listed twice");
  }
  check_output_path(a.out);
  check_output_not_input(a.out, a.results);
  ResultsFile results = read_results(a.results.front());
  require_simulated(results, a.results.front());
  require_focus_rows(results, a.results.front(), a.options.focus);
  for (size_t i = 1; i < a.results.size(); ++i) {
    ResultsFile more = read_results(a.results[i]);
    require_simulated(more, a.results[i]);
    require_focus_rows(more, a.results[i], a.options.focus);
    merge_results(results, std::move(more), a.results[i]);
  }
  probe_output_folder(a.out);  // last: bad input above leaves the folder untouched
  std::ostringstream md;
  write_evaluation_markdown(md, results, a.options);
  write_output(a.out, md.str());
  if (!is_stdout_path(a.out)) std::cerr << "dcpbench evaluate: wrote " << a.out << "\n";
  if (a.strict)
    for (const auto& c : evaluate_targets(results, a.options))
      if (!c.met) return 1;
  return 0;
}

}  // namespace

void add_evaluate_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<EvaluateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "evaluate", "Planner evaluation (Markdown) from a results file: one strategy vs its peers, gain breakdown, targets");
  cmd->add_option("results", args->results, "Results JSON files of dcpbench run (dcpbench.results.v1)")->required();
  cmd->add_option("--out", args->out, "Markdown file to write (default - = stdout)");
  cmd->add_option("--focus", args->options.focus, "The strategy evaluated (default dcp)");
  add_name_list_option(cmd, "--peers", args->options.peers,
                       "Strategies it is compared with, comma-separated, in this order (default "
                       "nvidia-prototype,megatron-dev,megatron-pr2000,packing; those absent from the file are skipped)");
  cmd->add_flag("--strict", args->strict,
                "Exit 1 when a target is not met (the planner targets dcpbench sets itself: the report's \"Targets\")");
  cmd->callback([args, cmd, &exit_code] {
    args->peers_given = cmd->count("--peers") > 0;
    exit_code = run_evaluate(*args);
  });
}

}  // namespace dcp::harness
