// `dcpbench plot RESULTS.json --out DIR [--script FILE]`: draws the charts of a results file by
// running harness/plot/plot_results.py with /usr/bin/python3 (Debian's python3-matplotlib), or of
// a convergence report (dcpbench.converge.v1) with harness/plot/plot_converge.py.
// The results file is validated first, so the script only ever sees schema-valid JSON.
// The script (plot_results.py or plot_converge.py) is looked up, in order: --script; <source
// tree>/harness/plot/<script> (the tree this binary was configured from, DCP_SOURCE_DIR);
// <script> next to the binary; ../harness/plot/<script> relative to the binary's folder.
#include "core/error.h"
#include "harness/commands.h"
#include "core/json_io.h"
#include "harness/converge.h"
#include "harness/results.h"

#include <nlohmann/json.hpp>

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#ifndef DCP_SOURCE_DIR
#define DCP_SOURCE_DIR "."
#endif

namespace dcp::harness {

namespace {

namespace fs = std::filesystem;

struct PlotArgs {
  std::string results;
  std::string out;
  std::string script;
  std::string python = "/usr/bin/python3";
};

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string find_script(const std::string& given, const std::string& name) {
  if (!given.empty()) {
    DCP_REQUIRE(fs::exists(given), "--script=", given, ": file not found");
    return given;
  }
  std::vector<fs::path> candidates = {fs::path(DCP_SOURCE_DIR) / "harness" / "plot" / name};
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    candidates.push_back(exe.parent_path() / name);
    candidates.push_back(exe.parent_path() / ".." / "harness" / "plot" / name);
  }
  std::string tried;
  for (const auto& c : candidates) {
    if (fs::exists(c)) return c.lexically_normal().string();
    tried += (tried.empty() ? "" : ", ") + c.string();
  }
  throw InputError("plot script " + name + " not found (tried " + tried + "); pass --script FILE");
}

int run_plot(const PlotArgs& a) {
  // Results files go to plot_results.py, convergence reports to plot_converge.py; either is
  // schema-checked first (InputError, exit 2).
  const nlohmann::json j = read_json_file(a.results);
  const bool converge = j.is_object() && j.value("schema", "") == "dcpbench.converge.v1";
  if (converge) {
    validate_converge_report(j, a.results);
  } else {
    read_results(a.results);
  }
  const std::string script = find_script(a.script, converge ? "plot_converge.py" : "plot_results.py");
  DCP_REQUIRE(fs::exists(a.python), "--python=", a.python,
              ": not found (install Debian's python3 and python3-matplotlib)");
  std::error_code ec;
  fs::create_directories(a.out, ec);
  DCP_REQUIRE(!ec, "--out=", a.out, ": cannot create directory (", ec.message(), ")");
  const std::string cmd = shell_quote(a.python) + " " + shell_quote(script) + " " + shell_quote(a.results) +
                          " --out " + shell_quote(a.out);
  const int status = std::system(cmd.c_str());
  if (status == -1 || !WIFEXITED(status)) throw Error("plot: could not run " + cmd);
  const int rc = WEXITSTATUS(status);
  if (rc != 0) throw Error("plot: " + script + " exited with status " + std::to_string(rc));
  return 0;
}

}  // namespace

void add_plot_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<PlotArgs>();
  CLI::App* cmd = app.add_subcommand("plot", "Draw PNG charts from a results file or a convergence report (harness/plot/*.py)");
  cmd->add_option("results", args->results, "Results JSON (dcpbench.results.v1) or convergence report (dcpbench.converge.v1)")->required();
  cmd->add_option("--out", args->out, "Output folder for the PNGs")->required();
  cmd->add_option("--script", args->script, "Path of the plot script (default: plot_results.py or plot_converge.py, found automatically)");
  cmd->add_option("--python", args->python, "Python interpreter with matplotlib (default /usr/bin/python3)");
  cmd->callback([args, &exit_code] { exit_code = run_plot(*args); });
}

}  // namespace dcp::harness
