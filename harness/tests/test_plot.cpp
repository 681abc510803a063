// plot_results.py reads what the results writer writes: runs the script (Debian's
// /usr/bin/python3 + python3-matplotlib; skipped with a message when either is missing) on the
// results of a tiny scenario (with --tune and --draws sections) and checks that every chart it
// promises is a PNG file.
#include "baselines/planners.h"
#include "comm/thread_comm.h"
#include "harness/converge.h"
#include "harness/converge_scenario.h"
#include "harness/results.h"
#include "harness/runner.h"
#include "harness/scenario.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace dcp::harness {
namespace {

namespace fs = std::filesystem;

const fs::path kScript = fs::path(__FILE__).parent_path().parent_path() / "plot" / "plot_results.py";

bool is_png(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  char magic[8] = {};
  in.read(magic, 8);
  return in.gcount() == 8 && std::string(magic + 1, 3) == "PNG" && fs::file_size(p) > 1000;
}

TEST(PlotScript, DrawsEveryChartFromTheResultsFile) {
  if (std::system("/usr/bin/python3 -c 'import matplotlib' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "no /usr/bin/python3 with matplotlib (apt-get install python3-matplotlib)";
  ASSERT_TRUE(fs::exists(kScript)) << kScript;
  plan::PlannerRegistry registry;
  baselines::register_baseline_planners(registry);
  const Scenario s = parse_scenario(nlohmann::json::parse(R"({
    "name": "tiny-plot", "model": "tiny",
    "dataset": {"source": "lognormal", "mean": 300, "sigma": 1.0, "min": 16, "max": 4096},
    "cluster": {"gpus": 8, "pp": 2, "cp": 2, "gpus_per_node": 4},
    "training": {"global_batch": 32, "max_seqlen": 4096, "max_seqlen_per_rank": 2048, "steps": 2},
    "strategies": ["packing", "bshd"],
    "published": {"source": "test", "values": [{"strategy": "packing", "tflops_per_gpu": 100}]}
  })"), "tiny-plot.json");
  RunOptions opt;
  opt.draws = 3;  // the speedup chart's whiskers
  opt.tune = true;
  const ResultsFile results = run_scenarios({s}, opt, registry);
  ASSERT_TRUE(results.draws.is_object());
  const fs::path dir = fs::temp_directory_path() / ("dcp_plot_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  write_results((dir / "r.json").string(), results);
  const std::string cmd = "/usr/bin/python3 '" + kScript.string() + "' '" + (dir / "r.json").string() + "' --out '" +
                          (dir / "charts").string() + "' >/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  for (const char* f : {"tflops.png", "speedup.png", "breakdown.png", "rank_busy_tiny-plot.png", "plan_tiny-plot.png"})
    EXPECT_TRUE(is_png(dir / "charts" / f)) << f;
  fs::remove_all(dir);
}

// plot_converge.py draws a convergence report, also one of a run that diverged: JSON has no NaN,
// so a loss or difference that was not finite is null; the script leaves a gap there (it had
// refused such a report, which converge itself wrote, or crashed on a null difference).
TEST(PlotScript, DrawsAConvergenceReportWithNonFiniteValues) {
  if (std::system("/usr/bin/python3 -c 'import matplotlib' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "no /usr/bin/python3 with matplotlib (apt-get install python3-matplotlib)";
  const fs::path repo = fs::path(__FILE__).parent_path().parent_path().parent_path();
  const fs::path dir = fs::temp_directory_path() / ("dcp_plot_converge_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  nlohmann::json sc = nlohmann::json::parse(R"({
    "name": "t",
    "model": {"vocab": 256, "hidden": 8, "ffn": 12, "heads": 2, "kv_heads": 1, "head_dim": 4,
              "mixers": ["attention"], "attention": "ring"},
    "data": {"text_dir": "", "max_seqlen": 64, "max_paragraphs": 3, "seed": 2},
    "pool": {"dp": 1, "cp": 2},
    "training": {"steps": 3, "global_batch": 4, "max_seqlen_per_rank": 32, "lr": 0.05},
    "strategies": ["packing", "dcp"]
  })");
  sc["data"]["text_dir"] = (repo / "scenarios" / "data" / "text" / "moby-dick").string();
  std::ofstream(dir / "s.json") << sc.dump();
  const ConvergeScenario s = load_converge_scenario((dir / "s.json").string());
  // float32 adds the same-parameter chart (each step at the float32 reference's parameters).
  for (const char* dtype : {"f64", "f32"}) {
    SCOPED_TRACE(dtype);
    const fs::path charts = dir / (std::string("charts-") + dtype);
    nlohmann::json report;
    std::ostringstream progress;
    comm::run_threads(s.pool(), [&](comm::Communicator& w) {
      ConvergeOptions o;
      o.quiet = true;
      o.dtype = dtype;
      ConvergeOutcome r = run_converge(w, s, o, progress);
      if (w.rank() == 0) report = r.report;
    });
    auto& dcp = report["strategies"]["dcp"];
    dcp["losses"][2] = nullptr;  // as a diverged run writes NaN / inf
    dcp["dloss_rel"][2] = nullptr;
    dcp["grad_rel_diff"][1] = nullptr;
    if (dcp.contains("same_params")) {  // what the same-parameter chart and the table draw
      dcp["same_params"]["grad_rel_diff"][2] = nullptr;
      dcp["same_params"]["grad_bound_use"][2] = nullptr;
      dcp["same_params"]["max_grad_bound_use"] = nullptr;
      EXPECT_NE(converge_table(report).find("not finite"), std::string::npos) << converge_table(report);
    }
    EXPECT_NO_THROW(validate_converge_report(report, "diverged"));
    std::ofstream(dir / "c.json") << report.dump();
    const fs::path script = kScript.parent_path() / "plot_converge.py";
    const std::string cmd = "/usr/bin/python3 '" + script.string() + "' '" + (dir / "c.json").string() + "' --out '" +
                            charts.string() + "' >/dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    for (const char* f : {"converge_loss.png", "converge_dloss.png", "converge_grad.png"})
      EXPECT_TRUE(is_png(charts / f)) << f;
    EXPECT_EQ(fs::exists(charts / "converge_grad_same_params.png"), std::string(dtype) == "f32");
    if (std::string(dtype) == "f32") {
      EXPECT_TRUE(is_png(charts / "converge_grad_same_params.png"));
    }
  }
  fs::remove_all(dir);
}

// A strategy whose differences equal an earlier one's on >= 90% of the steps is said so in the
// legend (nvidia-prototype training megatron-dev's plans would otherwise hide its line); two that
// agree on half the steps, as sums that happen to round alike do, are not.
TEST(PlotScript, ConvergeLegendNamesAStrategyThatRepeatsAnother) {
  if (std::system("/usr/bin/python3 -c 'import matplotlib' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "no /usr/bin/python3 with matplotlib (apt-get install python3-matplotlib)";
  const std::string code =
      "import sys; sys.path.insert(0, sys.argv[1]); import plot_converge as p\n"
      "s = {'a': {'k': [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]}, 'b': {'k': [1, 2, 3, 4, 5, 6, 7, 8, 9, 0]},\n"
      "     'c': {'k': [1, 2, 3, 4, 5, 0, 0, 0, 0, 0]}, 'd': {'k': [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]}}\n"
      "t = p.same_as({'strategies': s}, 'k', ['a', 'b', 'c', 'd'])\n"
      "assert t == {'a': '', 'b': ' (= a on 9 of 10 steps)', 'c': '', 'd': ' (= a)'}, t\n";
  const std::string cmd = "/usr/bin/python3 -c \"$DCP_PLOT_TEST_CODE\" '" + kScript.parent_path().string() + "'";
  ASSERT_EQ(::setenv("DCP_PLOT_TEST_CODE", code.c_str(), 1), 0);
  EXPECT_EQ(std::system(cmd.c_str()), 0) << code;
}

}  // namespace
}  // namespace dcp::harness
