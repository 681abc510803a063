// libFuzzer target for the results reader and everything that reads a results file: any bytes
// must either be rejected by validate_results (read_results throws dcp::InputError) or be read,
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
    if (!validate_results(j).empty()) return 0;
    ResultsFile f;  // as read_results builds it
    f.context = j["context"];
    if (j.contains("scenarios") && j["scenarios"].is_array()) f.scenarios = j["scenarios"];
    for (const auto& r : j["rows"]) f.rows.push_back(row_from_json(r));
    std::ostringstream table;
    print_table(table, f);
    const GateReport g = run_gate(f, f, 0.02);
    for (const auto& finding : g.findings)
      if (finding.failed && finding.message.find("invalid") == std::string::npos) __builtin_trap();  // no drop vs itself
  } catch (const dcp::InputError&) {
  }
  return 0;
}
