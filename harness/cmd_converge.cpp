/* `dcpbench converge`: trains the same model from the same seed on the same batches under a
 * single-rank reference and under every strategy of a convergence scenario, and checks that they
 * agree within the bounds of harness/converge.h.
 *
 *   dcpbench converge --scenario scenarios/converge-moby.json [--out C.json] [--backend threads|mpi]
 *                     [--dtype f64|f32] [--attention ring|all_gather] [--steps N] [--quiet]
 *                     [--sync-planning]
 *   mpirun -np 8 build/dcpbench converge --backend mpi --scenario ...   (one process per rank)
 *
 * Prints the agreement table (stdout), progress lines (stderr), writes the dcpbench.converge.v1
 * report to --out (atomically, rank 0). Exit 0: every bound holds; 1: a bound is broken (one line
 * per failure on stderr naming the strategy, the step and the quantity); 2: bad input.
 */
#include <iostream>
#include <cmath>
#include <memory>

#include "comm/thread_comm.h"
#include "core/error.h"
#include "core/files.h"
#include "core/json_io.h"
#include "harness/cli_options.h"
#include "harness/commands.h"
#include "harness/converge.h"
#include "harness/converge_data.h"

#ifdef DCP_HAVE_MPI
#include "comm/mpi_comm.h"
#endif

namespace dcp::harness {

namespace {

struct ConvergeArgs {
  std::string scenario;
  std::string out;
  bool out_given = false;
  std::string backend = "threads";
  std::string dtype;
  std::string attention;
  int steps = 0;
  double bound = 0;
  bool quiet = false;
  bool sync_planning = false;
};

// The longest single wait is one training step of the slowest rank (the references send a
// heartbeat per step): seconds for the shipped scenarios; 10 minutes leaves room for larger ones.
comm::CommOptions converge_comm_options() {
  comm::CommOptions c;
  c.deadline = std::chrono::minutes(10);
  return c;
}

int finish(const ConvergeOutcome& out, const ConvergeArgs& a) {
  // A report its own reader would refuse is never written (docs/formats.md: every writer checks
  // what it writes; helper-60's review): a dcp::Error there is this program's fault, exit 1.
  try {
    validate_converge_report(out.report, "the report to write");
  } catch (const InputError& e) {
    throw Error(std::string("internal error: ") + e.what());
  }
  if (a.out_given) write_json_atomic(a.out, out.report);
  // With --out - the report is on stdout, so the table goes to stderr.
  (a.out_given && is_stdout_path(a.out) ? std::cerr : std::cout) << converge_table(out.report) << std::flush;
  for (const auto& f : out.failures) std::cerr << "dcpbench converge: FAIL " << f << "\n";
  return out.pass() ? 0 : 1;
}

ConvergeOptions options_of(const ConvergeArgs& a, const std::string& command) {
  ConvergeOptions o;
  o.backend = a.backend;
  if (!a.dtype.empty()) o.dtype = a.dtype;
  if (a.steps > 0) o.steps = a.steps;  // 0 = not given (CLI11 checks >= 2 when it is)
  if (a.bound > 0) o.bound = a.bound;
  o.command = command;
  o.quiet = a.quiet;
  o.sync_planning = a.sync_planning;
  return o;
}

// Every check of the input, before anything trains (exit 2): the options, the scenario and its
// corpus, and a bad --out, which fails here so that nothing is written (core/files.h output policy).
ConvergeScenario checked_scenario(const ConvergeArgs& a) {
  DCP_REQUIRE(a.backend == "threads" || a.backend == "mpi", "--backend=\"", a.backend,
              "\" is not one of threads, mpi");
  DCP_REQUIRE(a.dtype.empty() || a.dtype == "f64" || a.dtype == "f32", "--dtype=\"", a.dtype,
              "\" is not one of f64, f32");
  DCP_REQUIRE(a.attention.empty() || a.attention == "ring" || a.attention == "all_gather",
              "--attention=\"", a.attention, "\" is not one of ring, all_gather");
  DCP_REQUIRE(a.bound >= 0 && std::isfinite(a.bound), "--bound=", a.bound, " must be a finite number > 0");
  ConvergeScenario s = load_converge_scenario(a.scenario);
  if (!a.attention.empty()) s.model.attn_algo = a.attention == "ring" ? attn::CpAlgo::ring : attn::CpAlgo::all_gather;
  load_text_corpus(s);  // bad data (too few documents) is an input error before anything runs
  if (a.out_given) {
    check_output_path(a.out);
    check_output_not_input(a.out, {a.scenario});
    check_output_not_in_folder(a.out, s.text_dir, "the text corpus (data.text_dir)");
  }
  check_strategies_plan(s);
  // Memory bound of the run's one growing part (converge.h), before anything trains.
  const ReferenceGradients g = reference_gradients(s, options_of(a, ""));
  DCP_REQUIRE(g.bytes <= kConvergeMaxReferenceGradBytes, show_path(s.file), ": ", g.steps,
              " steps (main and edge cases) x ", g.params, " parameters x ", g.bytes_per_param(),
              " bytes = ", fmt("%.2f", g.bytes / (1024.0 * 1024 * 1024)),
              " GiB of reference gradients (and, in float32, parameters) kept on rank 0, above the limit of ",
              fmt("%.0f", kConvergeMaxReferenceGradBytes / (1024.0 * 1024 * 1024)), " GiB (fewer --steps or a smaller model)");
  return s;
}


int run(const ConvergeArgs& a, const std::string& command) {
  if (a.backend != "mpi") {
    const ConvergeScenario s = checked_scenario(a);
    if (a.out_given) probe_output_folder(a.out);  // last: bad input above leaves the folder untouched
    const ConvergeOptions o = options_of(a, command);
    ConvergeOutcome out;
    comm::run_threads(s.pool(), [&](comm::Communicator& world) {
      ConvergeOutcome r = run_converge(world, s, o, std::cerr);
      if (world.rank() == 0) out = std::move(r);
    }, converge_comm_options());
    return finish(out, a);
  }
#ifdef DCP_HAVE_MPI
  // MPI starts first, so every check runs inside the collective one: bad input prints one line
  // (the lowest failing rank's), not one per process, and exits with its code (2) on every process,
  // no MPI_Abort (errors.h). A check that fails on one process only (a file missing on its node)
  // is still printed.
  comm::MpiRuntime mpi(nullptr, nullptr);
  int world_size = 0, world_rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  ConvergeScenario s;
  if (auto code = input_check_on_every_rank([&] {
        s = checked_scenario(a);
        if (world_size != s.pool())
          throw InputError(s.file + ": the pool has " + std::to_string(s.pool()) + " ranks (pool.dp " +
                           std::to_string(s.dp) + " x pool.cp " + std::to_string(s.cp) + ") but mpirun started " +
                           std::to_string(world_size) + " processes (use mpirun -np " + std::to_string(s.pool()) +
                           ")");
        // Last, on the process that writes the file (rank 0): bad input above leaves the folder
        // untouched, and no other host's folder is tried.
        if (a.out_given && world_rank == 0) probe_output_folder(a.out);
      }))
    return *code;
  const ConvergeOptions o = options_of(a, command);
  int code = 0;
  comm::run_mpi([&](comm::Communicator& world) {
    ConvergeOutcome r = run_converge(world, s, o, std::cerr);
    if (world.rank() == 0) code = finish(r, a);
    std::vector<int32_t> c{code};
    world.all_reduce(std::span<int32_t>(c), comm::ReduceOp::max);  // the same exit code everywhere
    code = c[0];
  }, converge_comm_options());
  return code;
#else
  throw InputError("--backend mpi: this dcpbench was built without MPI (configure with -DDCP_MPI=ON "
                   "and OpenMPI installed)");
#endif
}

}  // namespace

void add_converge_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<ConvergeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "converge",
      "Train the same model under a single-rank reference and every strategy of a convergence "
      "scenario; exit 1 if any loss or gradient leaves its bound (README \"Convergence\")");
  cmd->add_option("--scenario", args->scenario, "Convergence scenario (scenarios/converge-*.json)")->required();
  CLI::Option* out = cmd->add_option("--out", args->out,
                                     "Write the dcpbench.converge.v1 report here (atomically; a regular file or a "
                                     "new path in an existing folder; - = stdout)");
  cmd->add_option("--backend", args->backend,
                  "threads (one process, a thread per rank; default) or mpi (mpirun -np <pool>)");
  cmd->add_option("--dtype", args->dtype, "f64 or f32 (default: the scenario's training.dtype)");
  cmd->add_option("--attention", args->attention, "ring or all_gather (default: the scenario's model.attention)");
  add_int_option(cmd, "--steps", args->steps, 2, kConvergeMaxSteps,
                 "Main steps (default: training.steps), >= 2 so the loss-drop check compares two steps; the "
                 "reference's loss must fall by >= 10% over them, which a run much shorter than the scenario's "
                 "may not reach (converge-short: 4 of its 6 steps do)");
  cmd->add_option("--bound", args->bound,
                  "Override the float64 bound / float32 floor, > 0 (to see the check fail; default 1e-10 / 1e-5)")
      ->check(CLI::Validator(
          [](const std::string& v) -> std::string {
            double x = 0;
            // CLI::PositiveNumber printed DBL_MAX in full (309 digits) as the range's upper end.
            return CLI::detail::lexical_cast(v, x) && x > 0 && std::isfinite(x) ? "" : "\"" + v + "\" is not a finite number > 0";
          },
          "> 0"));
  cmd->add_flag("--quiet", args->quiet, "No progress lines on stderr");
  cmd->add_flag("--sync-planning", args->sync_planning,
                "Plan each step inside the training loop instead of one step ahead on a background thread "
                "(same losses, bitwise; the report's planning times then show nothing hidden)");
  cmd->callback([args, &exit_code, cmd, out] {
    args->out_given = out->count() > 0;
    std::string command = "dcpbench converge";
    for (const auto& o : cmd->get_options())
      if (o->count() > 0 && !o->get_lnames().empty())
        for (const auto& r : o->results()) command += " --" + o->get_lnames()[0] + (r.empty() ? "" : " " + r);
    exit_code = run(*args, command);
  });
}

}  // namespace dcp::harness
