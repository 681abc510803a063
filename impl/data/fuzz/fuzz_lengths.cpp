// libFuzzer target for the length-file parsers (text, JSON, Megatron .idx): any input must either
// parse into lengths >= 1 or throw dcp::InputError; no crash, no UB, no other exception.
#include "core/error.h"
#include "data/lengths_file.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  try {
    for (int64_t v : dcp::data::parse_lengths(in, "fuzz")) {
      if (v < 1) std::abort();
    }
  } catch (const dcp::InputError&) {
  }
  // Each parser directly, too: detection must not be what keeps them safe.
  for (auto* parse : {&dcp::data::parse_lengths_text, &dcp::data::parse_lengths_json, &dcp::data::parse_megatron_idx}) {
    try {
      (void)parse(in, "fuzz");
    } catch (const dcp::InputError&) {
    }
  }
  return 0;
}
