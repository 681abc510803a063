// libFuzzer target for the plan reader (plan_from_json, as `dcpbench check --plan` uses it) and
// the one validity check: any bytes must either be rejected with dcp::InputError or give a Plan
// that find_violation() judges (valid or one violation) without a crash, UB or other exception.
// The batch is one token per sample id the plan names. Run by CTest (label fuzz), bounded time.
#include "core/error.h"
#include "core/json_io.h"
#include "plan/plan_json.h"
#include "plan/validate.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  try {
    const dcp::plan::Plan p = dcp::plan::plan_from_json(dcp::parse_json_text(in, "fuzz/plan.json"));
    int max_id = -1;
    for (const auto& mb : p.microbatches)
      for (const auto& g : mb.groups)
        for (int id : g.samples) max_id = std::max(max_id, id);
    const dcp::plan::Batch batch{std::vector<int64_t>(static_cast<size_t>(max_id + 1), 1)};
    (void)dcp::plan::find_violation(p, batch);
  } catch (const dcp::InputError&) {
  }
  return 0;
}
