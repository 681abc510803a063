// A small scenario the GPU replay can run (head dim 64), shared by the measured run's CPU tests
// (test_measured.cpp, a stand-in measurer) and its GPU test (gpu/test_measured_cuda.cpp).
#pragma once

#include "harness/scenario.h"

#include <nlohmann/json.hpp>

#include <string>

namespace dcp::harness {

// Head dim 64 (256 / 4): what the replay's kernels run. PP 2 with VPP 2, pool 4. The scenario
// file's JSON (for a test that writes it to disk), then the scenario.
inline nlohmann::json small_scenario_doc(const std::string& strategies = R"(["packing", "bshd", "megatron-dev", "dcp"])",
                                         int steps = 2, const std::string& model = "") {
  const std::string m = model.empty()
                            ? R"({"name": "small", "layers": 4, "hidden": 256, "ffn": 512, "heads": 4, "kv_heads": 2,
                                 "vocab": 1000})"
                            : model;
  return nlohmann::json::parse(R"({
    "name": "small", "notes": ["test"],
    "model": )" + m + R"(,
    "dataset": {"source": "lognormal", "mean": 600, "sigma": 1.2, "min": 8, "max": 8192, "pad_multiple": 8},
    "cluster": {"gpus": 8, "tp": 1, "pp": 2, "cp": 2, "vpp": 2, "gpus_per_node": 8, "hardware": "h100-sxm"},
    "training": {"global_batch": 24, "max_seqlen": 8192, "max_seqlen_per_rank": 4096, "steps": )" +
                                     std::to_string(steps) + R"(, "seed": 5},
    "strategies": )" + strategies + R"(
  })");
}
inline Scenario small_scenario(const std::string& strategies = R"(["packing", "bshd", "megatron-dev", "dcp"])",
                               int steps = 2, const std::string& model = "") {
  return parse_scenario(small_scenario_doc(strategies, steps, model), "small.json");
}

}  // namespace dcp::harness
