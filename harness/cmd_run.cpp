// `dcpbench run SCENARIO... [--steps N] [--out FILE] [--strategies a,b] [--quiet] [--no-detail]
// [--tune] [--sensitivity] [--draws K] [--sync-planning] [--backend sim|cuda [--reps N] [--rank R] [--stage S]
// [--comm none|nccl]]`: runs the scenarios (harness/runner.h; --backend cuda: each row one rank's
// share replayed on the GPU, harness/measured.h), writes the results JSON (schema
// dcpbench.results.v1, atomically) and prints the fixed-width table (harness/report.h) on stdout.
// Progress lines go to stderr. Under `mpirun -np N ... --comm nccl` process 0 writes and prints.
// `dcpbench table RESULTS.json` reprints the table of an existing results file.
#include "core/error.h"
#include "core/files.h"
#include "core/json_io.h"
#include "data/dataset.h"
#include "plan/planner.h"
#include "harness/cli_options.h"
#include "harness/commands.h"
#include "harness/draws.h"
#include "harness/measured.h"
#include "harness/registry.h"
#include "harness/report.h"
#include "harness/results.h"
#include "harness/runner.h"
#include "harness/scenario.h"

#ifdef DCP_HAVE_NCCL_COMM
#include <cuda_runtime.h>
#include <mpi.h>

#include <chrono>

#include "comm/mpi_comm.h"
#include "comm/nccl_comm.h"
#endif

#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dcp::harness {

namespace {

// Rows a run may write: a results file must stay readable by table/plot/gate, whose JSON limit is
// core's kMaxJsonFileBytes (64 MiB). A row without the step-0 detail is ~1,000-1,100 bytes as
// written, the largest ~1.3 KB (measured 2026-11-28 on results/demo.json and
// results/baseline/suite.json), so 40,000 rows are ~44-52 MB; what is left is for the aggregates,
// and write_results still refuses, in one line and before writing anything, a file that would not fit.
constexpr int64_t kMaxResultRows = 40000;
// Samples of all the steps' global batches of one scenario, held at once by the runner (two
// int64 lengths each, ~16-24 bytes with the vectors): 2^25 is under 1 GiB.
constexpr int64_t kMaxHeldSamples = int64_t{1} << 25;

struct RunArgs {
  std::vector<std::string> scenarios;
  int steps = 0;
  std::string out = "dcpbench-results.json";
  std::vector<std::string> strategies;
  bool quiet = false;
  bool no_detail = false;
  bool tune = false;
  bool sensitivity = false;
  int draws = 1;
  int64_t time_budget_ms = 0;
  bool sync_planning = false;
  std::string backend = "sim";
  std::string comm = "none";
  int reps = 3;
  int rank = 0;
  int stage = 0;
  std::string command;
};

// --backend cuda: the measured run (harness/measured.h); with --comm nccl one process per GPU under
// mpirun, process 0 writing. Returns whether this process writes the results.
MeasureOptions measure_options(const RunArgs& a, const CLI::App& cmd, const RunOptions& opt) {
  MeasureOptions m;
  m.reps = a.reps;
  if (cmd.count("--rank")) m.rank = a.rank;
  if (cmd.count("--stage")) m.stage = a.stage;
  m.progress = opt.progress;
  return m;
}

bool measure_run(const RunArgs& a, const CLI::App& cmd, const std::vector<Scenario>& scenarios, RunOptions opt,
                 ResultsFile& results) {
  MeasureOptions m = measure_options(a, cmd, opt);
  if (a.comm == "none") {
    m.device = cuda_device_name();
    m.measurer = cuda_share_measurer();
    results = measure_scenarios(scenarios, opt, builtin_planners(), m);
    return true;
  }
#ifdef DCP_HAVE_NCCL_COMM
  comm::MpiRuntime mpi(nullptr, nullptr);
  bool writer = false;
  // run_mpi takes every process down (MPI_Abort) if one throws, so none waits in the all-reduce.
  comm::run_mpi([&](comm::Communicator& world) {
    writer = world.rank() == 0;
    if (!writer) {
      opt.progress = nullptr;  // the runner's lines once; every process prints its replays
      opt.on_checked = nullptr;  // process 0 writes the file, and probes its folder
    }
    // One GPU per process of a node: the node-local rank (MPI_COMM_TYPE_SHARED), whatever the
    // mapping of ranks to nodes. The deadline covers the wait of a process that finished its rows
    // for the slowest one (a Llama-13B share replays in minutes), not just a transfer.
    MPI_Comm node = MPI_COMM_NULL;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world.rank(), MPI_INFO_NULL, &node);
    int local_rank = 0;
    MPI_Comm_rank(node, &local_rank);
    MPI_Comm_free(&node);
    int devices = 0;
    DCP_REQUIRE(cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0, "no CUDA device on process ", world.rank());
    DCP_REQUIRE(local_rank < devices, "process ", world.rank(), " is the ", local_rank + 1, "th on its node, which has ",
                devices, " GPUs: start at most one process per GPU");
    comm::CommOptions copt;
    copt.deadline = std::chrono::hours(6);
    std::unique_ptr<comm::Communicator> nccl = comm::nccl_communicator(MPI_COMM_WORLD, local_rank, copt);  // sets the GPU
    m.comm = nccl.get();
    m.device = cuda_device_name();
    m.measurer = cuda_share_measurer();
    results = measure_scenarios(scenarios, opt, builtin_planners(), m);
  });
  return writer;
#else
  throw InputError("--comm nccl: this dcpbench was built without NCCL and MPI (the CUDA toolkit's NCCL and "
                   "OpenMPI, found at configure time)");
#endif
}

struct CheckedRun {
  std::vector<Scenario> scenarios;
  RunOptions opt;
};

// Every check of the input before the run starts (exit 2 with one line): options, scenarios, the
// --out path, the run's size and, with --backend cuda, the device and what it replays.
CheckedRun checked_run(const RunArgs& a, const CLI::App& cmd) {
  const bool cuda = a.backend == "cuda";
  for (const char* o : {"--reps", "--rank", "--stage", "--comm"})
    DCP_REQUIRE(cuda || !cmd.count(o), o, " is given without --backend cuda (it chooses what the GPU replays)");
  DCP_REQUIRE(!cuda || !a.tune, "--tune with --backend cuda: a measured run replays the published settings");
  DCP_REQUIRE(!cuda || !a.sensitivity,
              "--sensitivity with --backend cuda: it varies the simulator's parameters, a measured run has none");
  DCP_REQUIRE(!cuda || a.draws == 1,
              "--draws ", a.draws, " with --backend cuda: a measured run replays one draw (use --steps for more batches)");
#ifndef DCP_HAVE_NCCL_COMM
  DCP_REQUIRE(a.comm != "nccl", "--comm nccl: this dcpbench was built without NCCL and MPI (the CUDA toolkit's "
                                "NCCL and OpenMPI, found at configure time)");
#endif
  if (cuda) require_cuda_device("--backend cuda");
  std::vector<Scenario> scenarios;
  for (const auto& f : a.scenarios) scenarios.push_back(load_scenario(f));
  RunOptions opt;
  if (cmd.count("--steps")) opt.steps = a.steps;
  else if (cuda) opt.steps = 1;  // a replay of a Llama-13B share takes minutes: one step unless asked
  opt.strategies = a.strategies;
  opt.progress = a.quiet ? nullptr : &std::cerr;
  opt.command = a.command;
  opt.detail = !a.no_detail;
  opt.tune = a.tune;
  opt.sensitivity = a.sensitivity;
  opt.draws = a.draws;
  opt.sync_planning = a.sync_planning;
  // A budget no strategy of the run would use is refused, as schedule refuses it for a planner that
  // does not search (stop 44: `run --strategies packing --time-budget-ms 5` was accepted silently).
  if (cmd.count("--time-budget-ms")) {
    opt.time_budget_ms = static_cast<double>(a.time_budget_ms);
    const auto& registry = builtin_planners();
    const bool any_searches = std::any_of(scenarios.begin(), scenarios.end(), [&](const Scenario& s) {
      const auto names = strategies_of(s, opt, registry);
      return std::any_of(names.begin(), names.end(), [&](const std::string& n) { return registry.make(n)->searches(); });
    });
    if (!any_searches)
      throw InputError(detail::concat("--time-budget-ms ", a.time_budget_ms,
                                      ": no strategy of this run searches; --time-budget-ms applies to planners that "
                                      "search (", searching_planner_list(), ")"));
  }
  // Fail on a bad --out before the (possibly long) run, not after it (core/files.h policy: a
  // regular file or a new path in an existing folder; no folder is created).
  check_output_path(a.out);
  {
    std::vector<std::string> inputs;
    for (const auto& s : scenarios)
      for (auto& f : input_files(s)) inputs.push_back(std::move(f));
    check_output_not_input(a.out, inputs);
  }
  // Size the run before it starts: its rows (an upper bound: steps x strategies of every scenario,
  // twice with --tune) and the samples of the global batches it holds (every step's batch is
  // drawn before the strategies run).
  int64_t rows = 0, held_samples = 0;
  for (const auto& s : scenarios) {
    const int64_t strategies = static_cast<int64_t>(
        a.strategies.empty() ? s.strategies.size() : std::min(a.strategies.size(), s.strategies.size()));
    const int64_t steps = opt.steps.value_or(s.training.steps);
    rows += steps * strategies * (a.tune ? 2 : 1);
    held_samples = std::max(held_samples, steps * s.training.global_batch);
  }
  DCP_REQUIRE(rows <= kMaxResultRows, "the run would write up to ", rows,
              " result rows (steps x strategies of every scenario), more than the limit of ", kMaxResultRows,
              " (a results file must stay under the 64 MiB that table, plot and gate read)");
  DCP_REQUIRE(held_samples <= kMaxHeldSamples, "the run would hold ", held_samples,
              " samples at once (steps x training.global_batch of one scenario), more than the limit of ",
              kMaxHeldSamples, "; use fewer --steps or a smaller global batch");
  if (cuda) check_measured_run(scenarios, opt, measure_options(a, cmd, opt));
  // The --out folder is probed last, once the runner has checked the rest of the input (its
  // strategies, steps, every batch drawable): bad input leaves the folder untouched. Under mpirun
  // process 0 writes, and probes (measure_run clears it on the others).
  opt.on_checked = [out = a.out] { probe_output_folder(out); };
  return {std::move(scenarios), std::move(opt)};
}

int run_run(const RunArgs& a, const CLI::App& cmd) {
  std::optional<CheckedRun> run;
#ifdef DCP_HAVE_NCCL_COMM
  // Under mpirun (--comm nccl) MPI starts first, so every check runs inside the collective one:
  // bad input prints one line (the lowest failing rank's), not one per process, and exits with its
  // code (2) on every process (errors.h); measure_run's MpiRuntime then finds MPI running.
  std::optional<comm::MpiRuntime> mpi;
  if (a.backend == "cuda" && a.comm == "nccl") {
    mpi.emplace(nullptr, nullptr);
    if (auto code = input_check_on_every_rank([&] { run = checked_run(a, cmd); })) return *code;
  }
#endif
  if (!run) run = checked_run(a, cmd);
  const auto& [scenarios, opt] = *run;
  ResultsFile results;
  if (a.backend != "cuda") {
    results = run_scenarios(scenarios, opt, builtin_planners());
  } else if (!measure_run(a, cmd, scenarios, opt, results)) {
    return 0;  // a process other than 0 of an mpirun: process 0 writes
  }
  write_results(a.out, results, &std::cerr);
  if (is_stdout_path(a.out)) {  // the JSON went to stdout: the table goes to stderr
    print_table(std::cerr, results);
    return 0;
  }
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
  CLI::App* cmd = app.add_subcommand(
      "run", "Run scenarios (simulated, or --backend cuda: one rank's share measured on this GPU): results JSON + table");
  cmd->add_option("scenarios", args->scenarios, "Scenario files (scenarios/*.json)")->required();
  add_int_option(cmd, "--steps", args->steps, 1, 100000, "Steps per scenario (overrides training.steps)");
  cmd->add_option("--out", args->out,
                  "Results JSON to write (default dcpbench-results.json; a regular file or a new path in an "
                  "existing folder; - = stdout, the table then goes to stderr)");
  add_name_list_option(cmd, "--strategies", args->strategies, "Only these strategies (comma-separated)");
  add_int_option(cmd, "--time-budget-ms", args->time_budget_ms, 1, 3600000,
                 "Search budget of the searching planners (dcp's local search), converted to work units by a "
                 "fixed calibration so plans are deterministic (default: the planner's own)");
  cmd->add_option("--backend", args->backend,
                  "sim (default): simulate every strategy's step; cuda: replay one pool rank's share of each "
                  "strategy's plan on one pipeline stage on this GPU with the real kernels and report measured rows "
                  "(the busiest rank and stage unless --rank/--stage; one step unless --steps; CP peers virtual, "
                  "their transfers as device copies reported apart)")
      ->check(CLI::IsMember({"sim", "cuda"}));
  add_int_option(cmd, "--reps", args->reps, 1, 100, "--backend cuda: timed runs per micro-batch, median (default 3)");
  add_int_option(cmd, "--rank", args->rank, 0, 1 << 30, "--backend cuda: pool rank to replay (default: each row's busiest)");
  add_int_option(cmd, "--stage", args->stage, 0, 1 << 20,
                 "--backend cuda: pipeline stage to replay (default: the rank's busiest)");
  cmd->add_option("--comm", args->comm,
                  "--backend cuda: none (default, one process) or nccl: under `mpirun -np N`, one process per GPU "
                  "splits the rows, NCCL all-reduces the measurements (MPI only bootstraps), process 0 writes")
      ->check(CLI::IsMember({"none", "nccl"}));
  cmd->add_flag("--quiet", args->quiet, "No progress lines on stderr");
  cmd->footer("Limits: a scenario file at most " + std::to_string(kMaxScenarioBytes >> 20) +
              " MiB, JSON nested at most " + std::to_string(kMaxJsonDepth) + " levels, mixtures at most " +
              std::to_string(data::kMaxMixtureDepth) + " levels, training.global_batch at most " +
              std::to_string(plan::kMaxBatchSamples) + " samples, global_batch x DP x CP pool at most " +
              std::to_string(plan::kMaxSamplesTimesPool) + ", global_batch x pp x vpp at most 8388608, at most " +
              std::to_string(kMaxResultRows) + " result rows, steps x global_batch at most " +
              std::to_string(kMaxHeldSamples) + " (README.md, \"Input limits and errors\").");
  cmd->add_flag("--no-detail", args->no_detail,
                "Leave out the step-0 per-rank busy times and plan pictures (smaller file; no rank/plan charts)");
  cmd->add_flag("--tune", args->tune,
                "Also search each strategy's knobs (max_seqlen_per_rank, VPP, static CP size) under the memory "
                "model on held-out batches (another seed's steps, or a replayed pool's batches before the run's) and report the setting picked there, run on "
                "the scenario's own batches, beside the published one (rows with setting \"tuned\")");
  cmd->add_flag("--sensitivity", args->sensitivity,
                "Also re-run with every uncertain cost-model parameter at x0.8 and x1.2: range of every speedup "
                "and whether the ranking of strategies changes");
  add_int_option(cmd, "--draws", args->draws, 1, kMaxDraws,
                 "Also re-run every scenario on K-1 further independent draws of its global batches (steps "
                 "[d*steps, (d+1)*steps) of its data stream; the published setting, and with --tune each strategy's "
                 "tuned setting held fixed) and report each speedup's median, 5th-95th percentile and range and how "
                 "often the ranking holds: how much the numbers depend on the batches drawn (default 1: off; costs K "
                 "times the run)");
  cmd->add_flag("--sync-planning", args->sync_planning,
                "Plan each step inside the loop instead of step i+1 on a background thread while step i is "
                "simulated (same plans; every row's planning then counts as exposed; README \"Async planning\")");
  cmd->callback([args, cmd, &exit_code, &app] {
    args->command = "dcpbench run";
    for (const auto& s : args->scenarios) args->command += " " + s;
    if (cmd->count("--steps")) args->command += " --steps " + std::to_string(args->steps);
    if (args->tune) args->command += " --tune";
    if (args->sensitivity) args->command += " --sensitivity";
    if (args->draws > 1) args->command += " --draws " + std::to_string(args->draws);
    if (args->sync_planning) args->command += " --sync-planning";
    if (args->backend != "sim") args->command += " --backend " + args->backend;
    if (cmd->count("--reps")) args->command += " --reps " + std::to_string(args->reps);
    if (cmd->count("--rank")) args->command += " --rank " + std::to_string(args->rank);
    if (cmd->count("--stage")) args->command += " --stage " + std::to_string(args->stage);
    if (cmd->count("--comm")) args->command += " --comm " + args->comm;
    if (cmd->count("--time-budget-ms")) args->command += " --time-budget-ms " + std::to_string(args->time_budget_ms);
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
