// `dcpbench calibrate --backend cuda`: measures the cost model's tables on this machine's GPU and
// writes a calibration file (schema dcpbench.calibration.v1, "obtained": "measured", the device,
// the date, the git sha and the command) that `run` and `share` read like the public profile
// (issue 10). What is measured and how it becomes efficiencies: cost/calibrate.h; the timing:
// exec/cuda/calibration_runner.h. The attention table is our tensor-core kernel's, under the
// backend name "dcpbench". Needs a CUDA build and a device: exit 2 before any work otherwise.
//   dcpbench calibrate --backend cuda [--model llama-13b] [--profile h100-sxm] [--name h100-measured]
//                      [--reps 5] [--out results/calibration/h100-measured.json]
#include "core/error.h"
#include "core/files.h"
#include "core/json_io.h"
#include "core/provenance.h"
#include "core/text.h"
#include "cost/calibrate.h"
#include "cost/hardware.h"
#include "harness/cli_options.h"
#include "harness/commands.h"
#include "harness/results.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <ctime>
#include <memory>
#include <string>

#ifdef DCP_HAVE_CUDA
#include <cuda_runtime.h>

#include "attn/flash/flash_common.h"
#include "core/cuda_check.h"
#include "exec/cuda/calibration_runner.h"
#endif

namespace dcp::harness {

namespace {

struct CalibrateArgs {
  std::string backend;
  std::string model = "llama-13b";
  std::string profile = "h100-sxm";
  std::string name = "h100-measured";
  int reps = 5;
  std::string out = "results/calibration/h100-measured.json";
  std::string command;
};

int run_calibrate(const CalibrateArgs& a) {
  DCP_REQUIRE(a.backend == "cuda", "--backend \"", a.backend, "\" is not a backend that can measure (cuda)");
  const cost::ModelConfig model = cost::model_preset(a.model);
  const cost::HardwareProfile base = cost::hardware_preset(a.profile);
  // The name ends up in every result's source ("simulated:<cost-model>@<name>") and must load
  // back: checked before minutes of measuring on the device.
  if (auto e = safe_name_error(a.name))
    throw InputError("--name " + quote(a.name) + " " + *e + " (it names the calibration in result sources)");
  if (!is_stdout_path(a.out)) check_output_path(a.out);
#ifdef DCP_HAVE_CUDA
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
    throw InputError("calibrate --backend cuda needs a CUDA device, and none is visible on this machine");
  cudaDeviceProp prop{};
  DCP_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  probe_output_folder(a.out);  // last: bad input above leaves the folder untouched
  using attn::flash::kBlockM;
  using attn::flash::kBlockN;
  using attn::flash::kFwdBlockM;
  // Our kernels' tiles: the forward's CTA takes kFwdBlockM queries and walks kBlockN keys; the
  // backward's takes kBlockN keys and walks kBlockM queries.
  const cost::CalibrationPlan plan = cost::calibration_plan(model, base, "dcpbench", kFwdBlockM, kBlockN, kBlockM, kBlockN);
  std::fprintf(stderr, "calibrate: %zu GEMM points, %zu x %zu attention points x 3, one copy, on %s\n",
               plan.gemm_tokens.size(), plan.attention.lengths.size(), plan.attention.lengths.size(), prop.name);
  const cost::CalibrationMeasurements m = exec::measure_calibration(plan, attn::Half::bf16, a.reps);
  cost::CalibrationMeta meta;
  meta.name = a.name;
  meta.obtained = "measured";
  meta.device = prop.name;
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tm);
  meta.date = date;
  meta.git_sha = source_git_sha();
  meta.script = a.command;
  const nlohmann::json j = cost::calibration_from_measurements(base, plan, m, meta);
  write_json_atomic(a.out, j, 1);
  std::fprintf(stderr, "calibrate: wrote %s\n", a.out.c_str());
  return 0;
#else
  throw InputError("calibrate --backend cuda needs a CUDA build (nvcc at /usr/local/cuda, DCP_CUDA=AUTO|ON)");
#endif
}

}  // namespace

void add_calibrate_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<CalibrateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "calibrate", "Measure the cost model's tables (GEMM curve, attention grid of our kernels, HBM) on this GPU and "
                   "write a calibration file the simulator reads (needs a CUDA device)");
  cmd->add_option("--backend", args->backend, "What measures: cuda (this machine's GPU)")->required();
  cmd->add_option("--model", args->model, "Model preset whose layer GEMMs and heads are measured (default llama-13b)");
  cmd->add_option("--profile", args->profile, "Hardware profile the calibration refines (default h100-sxm)");
  cmd->add_option("--name", args->name, "The calibration's name in result sources (default h100-measured)");
  add_int_option(cmd, "--reps", args->reps, 1, 1000, "Timed repetitions per point (median; default 5)");
  cmd->add_option("--out", args->out,
                  "Calibration JSON to write (atomically; default results/calibration/h100-measured.json; - = stdout)");
  cmd->callback([args, &exit_code] {
    args->command = "dcpbench calibrate --backend " + args->backend + " --model " + args->model;
    exit_code = run_calibrate(*args);
  });
}

}  // namespace dcp::harness
