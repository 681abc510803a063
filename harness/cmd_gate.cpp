// `dcpbench gate --baseline B.json --current C.json [--tolerance 0.02] [--sim-tolerance 1e-9]`: the
// CI regression gate. Reads the two results files only (never stdout of a run). Prints one line per
// (scenario, strategy) and exits 1 if any step's TFLOPS/GPU moved by more than the relative
// tolerance (down or up; simulated steps have their own, gate.h GateTolerance), its batch, plan or
// setting changed, any plan became invalid or out of memory, a plan efficiency is above 1, a pair
// is in one file only or the baseline is empty (gate.h); 0 otherwise. Unreadable or schema-invalid
// files are input errors (exit 2).
#include "harness/commands.h"
#include "harness/gate.h"
#include "harness/results.h"

#include <cstdio>
#include <memory>
#include <string>

namespace dcp::harness {

namespace {

struct GateArgs {
  std::string baseline;
  std::string current;
  GateTolerance tolerance;
};

int run_gate_command(const GateArgs& a) {
  const ResultsFile base = read_results(a.baseline);
  const ResultsFile cur = read_results(a.current);
  const GateReport report = run_gate(base, cur, a.tolerance);
  std::printf("dcpbench gate: baseline %s (git %s) vs current %s (git %s), allowed TFLOPS/GPU change +-%s "
              "(simulated steps, and their peak memory), +-%s (measured)\n",
              a.baseline.c_str(), base.context.value("git_sha", "unknown").c_str(), a.current.c_str(),
              cur.context.value("git_sha", "unknown").c_str(), tolerance_pct(a.tolerance.simulated).c_str(),
              tolerance_pct(a.tolerance.measured).c_str());
  // Simulated numbers must not depend on the machine (CMakeLists.txt: -ffp-contract=off); where
  // the two files were built with other compilers or targets, a difference has one more suspect.
  const std::string tb = base.context.value("toolchain", ""), tc = cur.context.value("toolchain", "");
  if (!tb.empty() && !tc.empty() && tb != tc)
    std::printf("dcpbench gate: note: baseline built with %s, current with %s\n", tb.c_str(), tc.c_str());
  int failed = 0;
  for (const auto& f : report.findings) {
    failed += f.failed ? 1 : 0;
    std::printf("%s\n", finding_line(f).c_str());
  }
  if (failed > 0) {
    std::printf("dcpbench gate: FAILED: %d of %zu (scenario, strategy) pairs (lines marked FAIL)\n", failed,
                report.findings.size());
    return 1;
  }
  std::printf("dcpbench gate: passed (%zu pairs)\n", report.findings.size());
  return 0;
}

}  // namespace

void add_gate_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<GateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "gate",
      "Compare two results files step by step; exit 1 if a step's TFLOPS/GPU (or a simulated step's peak "
      "memory) moved beyond the tolerance (either way), its batch, plan or setting changed, a plan became invalid "
      "or out of memory, a plan efficiency is above 1, a pair is in one file only, or the baseline has no rows");
  cmd->add_option("--baseline", args->baseline, "Baseline results JSON (dcpbench.results.v1)")->required();
  cmd->add_option("--current", args->current, "Current results JSON (dcpbench.results.v1)")->required();
  // CLI::Range called "0.02abc" and "" out of range: say what is wrong with the value.
  const CLI::Validator in_unit([](const std::string& v) -> std::string {
    double x = 0;
    if (!CLI::detail::lexical_cast(v, x)) return "\"" + v + "\" is not a number";
    return x >= 0 && x < 1 ? "" : "\"" + v + "\" is not in [0, 1)";
  }, "in [0, 1)");
  cmd->add_option("--tolerance", args->tolerance.measured,
                  "Allowed relative TFLOPS/GPU change of each measured step, down or up, in [0, 1) (default 0.02 = 2%: "
                  "run-to-run noise)")
      ->check(in_unit);
  cmd->add_option("--sim-tolerance", args->tolerance.simulated,
                  "The same for each simulated step, and for its peak memory, in [0, 1) (default 1e-9: the simulated "
                  "numbers are deterministic, so a change is the model's or a planner's)")
      ->check(in_unit);
  cmd->callback([args, &exit_code] { exit_code = run_gate_command(*args); });
}

}  // namespace dcp::harness
