// libFuzzer target for the scenario loader: any bytes must either give a Scenario (whose
// impl/ configuration then builds, and whose first batch samples when it is small) or throw
// dcp::InputError; no crash, no UB, no other exception (an escaping nlohmann type_error or a
// std::bad_alloc aborts the run and is reported). Run by CTest (label fuzz) for a bounded time.
#include "core/error.h"
#include "core/json_io.h"
#include "harness/runner.h"
#include "harness/scenario.h"

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace {

bool reads_files(const dcp::harness::DatasetSpec& d) {
  if (d.kind == "file") return true;
  // A replayed pool above 2^16 lengths takes milliseconds to seconds to generate: skipped like a
  // file, to keep each input fast (the pool's own tests are in impl/data).
  if (d.kind == "megatron-mock" && d.train_samples > (1 << 16)) return true;
  for (const auto& c : d.components)
    if (reads_files(c.source)) return true;
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dcp::harness;
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  try {
    const Scenario s = parse_scenario(dcp::parse_json_text(in, "fuzz/scenario.json"), "fuzz/scenario.json");
    (void)cost_model_of(s);
    (void)plan_config_of(s);
    const auto sampler = sampler_config_of(s);
    if (!reads_files(s.dataset) && s.training.global_batch <= 256) {  // keep each input fast
      const auto source = length_source_of(s);
      const auto batch = dcp::data::sample_global_batch(source, sampler, 0);
      if (static_cast<int64_t>(batch.batch.lengths.size()) != s.training.global_batch) __builtin_trap();
    }
  } catch (const dcp::InputError&) {
  }
  return 0;
}
