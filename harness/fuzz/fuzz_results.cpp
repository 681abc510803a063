// libFuzzer target for the results reader and everything that reads a results file: any bytes
// must either be rejected by results_from_json (dcp::InputError, as read_results) or be read,
// tabulated (print_table) and gated (run_gate against itself) without a crash, UB or any
// exception other than InputError. Run by CTest (label fuzz) for a bounded time.
#include "core/error.h"
#include "core/json_io.h"
#include "harness/gate.h"
#include "harness/report.h"
#include "harness/results.h"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dcp::harness;
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  try {
    const nlohmann::json j = dcp::parse_json_text(in, "fuzz/results.json");
    const ResultsFile f = results_from_json(j, "fuzz/results.json");  // what read_results does
    std::ostringstream table;
    print_table(table, f);
    const GateReport g = run_gate(f, f, 0.02);
    // No drift against itself: a file may fail only the gate's checks of one file on its own, an
    // invalid plan or a plan efficiency above 1 (a mutated number; the fuzzer found one in stop 63).
    for (const auto& finding : g.findings)
      if (finding.failed && finding.message.find("invalid") == std::string::npos &&
          finding.message.find("lower bound is broken") == std::string::npos)
        __builtin_trap();
  } catch (const dcp::InputError&) {
  }
  return 0;
}
