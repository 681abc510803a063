// dcpbench: the command-line entry point. Every error ends here (or, under MPI, in the input check
// every process makes, harness/errors.h), printed by harness/errors.cpp as one line
// "dcpbench: error: <message>" on stderr (core/text.h one_line: at most ~300 characters, control
// and invalid bytes escaped), with exit code 2 for bad input (unknown
// command or flag, bad value, unreadable or oversized file, work over a stated limit, and
// running out of memory, which only an input too large for this machine can cause) and 1 for
// internal errors.
#include "core/error.h"
#include "core/text.h"
#include "harness/commands.h"

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>

namespace {

// A command line is parsed by every process of an mpirun launch, so its errors would print once
// per rank: ranks other than 0 of Open MPI's mpirun (OMPI_COMM_WORLD_RANK, set before main; the
// launcher the project's MPI runs use) exit 2 quietly. Only for parse errors, which every rank of
// one command line finds alike (an MPMD launch with other arguments on rank 0 would hide them);
// an error found later may be one rank's own and is printed where it happens. PMI/PMIx ranks
// (srun) are not trusted: a plain run under srun must still print its error.
// The quiet ranks wait kQuietRankExitDelay before exiting: mpirun stops every process as soon as
// one exits non-zero, so a quiet rank that exited first could have rank 0 killed before its line
// is out (not seen in 100 runs at -np 4, idle and loaded, but nothing ordered it). Rank 0 prints
// and exits within milliseconds of parsing; mpirun then stops the waiting ranks, so the wait
// costs nothing unless rank 0 has no parse error (an MPMD launch), where it bounds the delay.
constexpr auto kQuietRankExitDelay = std::chrono::seconds(2);
int report_parse_error(const std::string& message) {
  if (const char* v = std::getenv("OMPI_COMM_WORLD_RANK"); v != nullptr && std::string(v) != "0") {
    std::this_thread::sleep_for(kQuietRankExitDelay);
    return 2;
  }
  return dcp::harness::report_error(message, 2);
}

// CLI11 says "--cp: At Most 1 required but received 2" for an option given twice; say so plainly
// (helper-20). Other messages pass through.
std::string plain_parse_error(const std::string& message) {
  static const std::string kMark = ": At Most 1 required but received ";
  const size_t at = message.find(kMark);
  if (at == std::string::npos) return message;
  return message.substr(0, at) + " is given " + message.substr(at + kMark.size()) + " times; give it once";
}

// `dcpbench frob`: CLI11 would say only "A subcommand is required"; name the word instead.
// `dcpbench --frob` (an option before any command, other than --help / --help-all): name it too.
std::string unknown_command(const CLI::App& app, int argc, char** argv) {
  if (argc < 2) return {};
  const std::string word = argv[1];
  if (word[0] == '-') {
    if (word == "-h" || word == "--help" || word == "--help-all") return {};
    return "unknown option " + dcp::quote(word) + " before the command (dcpbench COMMAND [OPTIONS]; see dcpbench --help)";
  }
  std::string known;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->check_name(word)) return {};
    known += (known.empty() ? "" : ", ") + sub->get_name();
  }
  return "unknown command " + dcp::quote(word) + " (commands: " + known + "; see dcpbench --help)";
}

}  // namespace

int main(int argc, char** argv) {
  try {
    CLI::App app{"dcpbench: Dynamic Context Parallelism scheduler, simulator and benchmark harness.\n"
                 "Limits on every input are listed in README.md (\"Input limits and errors\"); going over one is\n"
                 "an error (exit 2) that names the value and the limit."};
    app.require_subcommand(1);
    app.set_help_all_flag("--help-all", "Print help for every sub-command");
    int exit_code = 0;
    dcp::harness::add_schedule_command(app, exit_code);
    dcp::harness::add_run_command(app, exit_code);
    dcp::harness::add_plot_command(app, exit_code);
    dcp::harness::add_gate_command(app, exit_code);
    dcp::harness::add_cp_attn_command(app, exit_code);
    dcp::harness::add_converge_command(app, exit_code);
    dcp::harness::add_conform_command(app, exit_code);
    dcp::harness::add_check_command(app, exit_code);
    dcp::harness::add_evaluate_command(app, exit_code);
    dcp::harness::add_share_command(app, exit_code);
    dcp::harness::add_calibrate_command(app, exit_code);
    if (const std::string bad = unknown_command(app, argc, argv); !bad.empty()) return report_parse_error(bad);
    try {
      app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
      return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
      return app.exit(e);
    } catch (const CLI::ParseError& e) {
      return report_parse_error(plain_parse_error(e.what()));
    }
    return exit_code;
  } catch (...) {
    return dcp::harness::report_exception(std::current_exception());
  }
}
