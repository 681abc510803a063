// dcpbench: the command-line entry point. The only place that catches errors: every failure is
// printed as one line "dcpbench: error: <message>" on stderr, with exit code 2 for bad input
// (unknown flag, bad value, unreadable file, unplaceable sample) and 1 for internal errors.
#include "core/error.h"
#include "harness/commands.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

int main(int argc, char** argv) {
  CLI::App app{"dcpbench: Dynamic Context Parallelism scheduler, simulator and benchmark harness"};
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
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "dcpbench: error: %s\n", e.what());
    return 2;
  } catch (const dcp::InputError& e) {
    std::fprintf(stderr, "dcpbench: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dcpbench: error: %s\n", e.what());
    return 1;
  }
  return exit_code;
}
