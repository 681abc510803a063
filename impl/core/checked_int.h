// Checked integer parsing for CLI flags and text files: no silent wrap, no partial parse.
//
//   parse_int("42", 1, 100, "--dp")       -> 42
//   parse_int("-1", 0, kMaxI64, "--seed") -> InputError: --seed="-1" is below the minimum 0
//   parse_int("4x", 1, 100, "--dp")       -> InputError: --dp="4x" is not an integer
//   int_error("1e9", 1, 100)              -> "\"1e9\" is not an integer" (for CLI11 validators)
// Accepted: optional '-' or '+', decimal digits, nothing else (no spaces, no 0x, no exponent).
// Values beyond int64 are "out of range" errors, never wrapped or clamped.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

namespace dcp {

inline constexpr int64_t kMaxI64 = std::numeric_limits<int64_t>::max();

// Empty if `text` is an integer in [lo, hi]; otherwise what is wrong, starting with the quoted text.
std::optional<std::string> int_error(std::string_view text, int64_t lo, int64_t hi);

// The value, or InputError "<name>=<quoted text> <what is wrong>".
int64_t parse_int(std::string_view text, int64_t lo, int64_t hi, std::string_view name);

}  // namespace dcp
