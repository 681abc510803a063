// `dcpbench plot RESULTS.json --out DIR [--script FILE]`: draws the charts of a results file by
// running harness/plot/plot_results.py with /usr/bin/python3 (Debian's python3-matplotlib).
// The results file is validated first, so the script only ever sees schema-valid JSON.
// The script is looked up, in order: --script; <source tree>/harness/plot/plot_results.py (the
// tree this binary was configured from, DCP_SOURCE_DIR); plot_results.py next to the binary;
// ../harness/plot/plot_results.py relative to the binary's folder.
#include "core/error.h"
#include "harness/commands.h"
#include "harness/results.h"

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

std::string find_script(const std::string& given) {
  if (!given.empty()) {
    DCP_REQUIRE(fs::exists(given), "--script=", given, ": file not found");
    return given;
  }
  std::vector<fs::path> candidates = {fs::path(DCP_SOURCE_DIR) / "harness" / "plot" / "plot_results.py"};
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    candidates.push_back(exe.parent_path() / "plot_results.py");
    candidates.push_back(exe.parent_path() / ".." / "harness" / "plot" / "plot_results.py");
  }
  std::string tried;
  for (const auto& c : candidates) {
    if (fs::exists(c)) return c.lexically_normal().string();
    tried += (tried.empty() ? "" : ", ") + c.string();
  }
  throw InputError("plot script plot_results.py not found (tried " + tried + "); pass --script FILE");
}

int run_plot(const PlotArgs& a) {
  read_results(a.results);  // InputError (exit 2) if missing or not schema-valid
  const std::string script = find_script(a.script);
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
  CLI::App* cmd = app.add_subcommand("plot", "Draw PNG charts from a results file (harness/plot/plot_results.py)");
  cmd->add_option("results", args->results, "Results JSON (dcpbench.results.v1)")->required();
  cmd->add_option("--out", args->out, "Output folder for the PNGs")->required();
  cmd->add_option("--script", args->script, "Path of plot_results.py (default: found automatically)");
  cmd->add_option("--python", args->python, "Python interpreter with matplotlib (default /usr/bin/python3)");
  cmd->callback([args, &exit_code] { exit_code = run_plot(*args); });
}

}  // namespace dcp::harness
