// `run --backend cuda` end to end on the GPU (label gpu; skips without a device, fails under
// DCP_REQUIRE_GPU=1): the small scenario's rows replayed with the real kernels
// (cuda_share_measurer) become measured rows of this device with positive times, ring copies
// where a share has CP peers, a useful rate under the H100's dense bf16 peak (a time taken before
// the kernels finished would exceed it), and a file that validates.
#include "gpu_test_util.h"
#include "harness/measured.h"
#include "harness/registry.h"
#include "measured_cases.h"

#include <gtest/gtest.h>

#include <cmath>

namespace dcp::harness {
namespace {

TEST(MeasuredCuda, RowsOfTheSmallScenarioAreMeasuredOnThisDevice) {
  DCP_SKIP_WITHOUT_GPU();
  const Scenario s = small_scenario();
  MeasureOptions m;
  m.measurer = cuda_share_measurer();
  m.device = cuda_device_name();
  m.reps = 2;
  RunOptions opt;
  opt.steps = 1;
  const ResultsFile f = measure_scenarios({s}, opt, builtin_planners(), m);
  int measured = 0;
  for (const ResultRow& r : f.rows) {
    EXPECT_EQ(r.source, "measured:" + m.device);
    if (!r.has_metrics()) continue;
    ++measured;
    EXPECT_GT(r.step_time_s, 0) << r.strategy;
    EXPECT_GT(r.tflops_per_gpu, 0) << r.strategy;
    EXPECT_LT(r.tflops_per_gpu, 989.0) << r.strategy;  // H100 SXM dense bf16 peak
    EXPECT_TRUE(std::isfinite(r.measured.at("error").get<double>())) << r.strategy;
    if (r.strategy == "bshd" || r.strategy == "packing") {  // static CP 2: every micro-batch has a peer
      EXPECT_GT(r.measured.at("ring_copy_s").get<double>(), 0) << r.strategy;
    }
  }
  int simulated = 0;  // the rows with figures of the same run, simulated
  for (const ResultRow& r : run_scenarios({s}, opt, builtin_planners()).rows) simulated += r.has_metrics();
  EXPECT_EQ(measured, simulated);
  EXPECT_GE(measured, 3);
  EXPECT_TRUE(validate_results(results_to_json(f)).empty());
}

}  // namespace
}  // namespace dcp::harness
