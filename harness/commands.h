// Sub-commands of the dcpbench CLI. Each add_*_command registers its CLI11 sub-command and its
// callback; callbacks throw dcp::InputError for bad input (main prints one line, exits 2) and
// return the process exit code through the reference they are given.
#pragma once

#include "core/error.h"
#include "harness/errors.h"

#include <CLI/CLI.hpp>

namespace dcp::harness {

void add_schedule_command(CLI::App& app, int& exit_code);
void add_run_command(CLI::App& app, int& exit_code);   // `run` and `table` (cmd_run.cpp)
void add_plot_command(CLI::App& app, int& exit_code);  // cmd_plot.cpp
void add_gate_command(CLI::App& app, int& exit_code);  // cmd_gate.cpp
void add_cp_attn_command(CLI::App& app, int& exit_code);  // cmd_cp_attn.cpp
void add_converge_command(CLI::App& app, int& exit_code);  // cmd_converge.cpp
void add_conform_command(CLI::App& app, int& exit_code);  // cmd_conform.cpp
void add_check_command(CLI::App& app, int& exit_code);    // cmd_check.cpp
void add_evaluate_command(CLI::App& app, int& exit_code);  // cmd_evaluate.cpp
void add_share_command(CLI::App& app, int& exit_code);     // cmd_share.cpp
void add_calibrate_command(CLI::App& app, int& exit_code);  // cmd_calibrate.cpp

}  // namespace dcp::harness
