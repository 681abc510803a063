// JSON file I/O through nlohmann/json, bounded (every reader of user JSON goes through here).
//
// Reading: at most kMaxJsonFileBytes bytes (core/files.h), and nesting at most kMaxJsonDepth
// levels and each key once per object, checked by a SAX pass over the text before the value is
// built (linear; printing, destroying or walking a 70,000-level array would overflow the stack,
// and nlohmann's callback parser is quadratic in an array of objects). Errors are
// InputErrors naming the file; nlohmann's parse messages are cut so that no raw token of the
// input is copied into them whole.
// Writing: atomic, through the output-path policy of core/files.h (a device, FIFO, folder or
// symlink is refused; "-" is stdout).
// Values in messages: json_excerpt() prints a bounded prefix of any value (no full dump).
// Integers: json_int() is the checked getter (type, int64 range incl. unsigned JSON integers
// >= 2^63, and [lo, hi]); nlohmann's get<int>() would wrap or be undefined on such values.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dcp {

inline constexpr int kMaxJsonDepth = 64;                        // levels of [ and { (scenarios use <= 8)
inline constexpr int64_t kMaxJsonFileBytes = int64_t{64} << 20;  // 64 MiB (a 20-step suite is ~1 MB)

// Parses a JSON file; throws InputError naming the file on I/O, size, depth or parse errors, and
// on a key given twice in one object.
nlohmann::json read_json_file(const std::string& path, int64_t max_bytes = kMaxJsonFileBytes,
                              int max_depth = kMaxJsonDepth);

// Checks JSON text without building it (linear): InputError naming `source` when it nests deeper
// than max_depth or gives a key twice in one object; syntax errors are left to the parse.
void check_json_text(std::string_view text, const std::string& source, int max_depth = kMaxJsonDepth);

// Parses JSON text (`source` names it in messages) with the same depth limit and key rule.
nlohmann::json parse_json_text(std::string_view text, const std::string& source, int max_depth = kMaxJsonDepth);
// The InputError parse_json_text throws for a syntax error nlohmann reported (its message, with
// the last-read token shortened): for SAX readers that report it the same way.
[[noreturn]] void throw_invalid_json(const std::string& source, const std::string& nlohmann_what);

// Writes text atomically under the output policy (core/files.h: write_output). "-" = stdout.
void write_file_atomic(const std::string& path, const std::string& text);

// Pretty-printed (indent 1) JSON, atomically; InputError, nothing written, if it would exceed
// kMaxJsonFileBytes (what read_json_file reads back).
void write_json_atomic(const std::string& path, const nlohmann::json& j, int indent = 1);
// The text write_json_atomic writes to `path` (its dump and its size check, the InputError naming
// path): for a command that checks everything, then probes the folder, then writes the text.
std::string json_file_text(const std::string& path, const nlohmann::json& j, int indent = 1);

// At most ~max_chars characters of the value as JSON ("..." where cut); never dumps it whole.
std::string json_excerpt(const nlohmann::json& value, size_t max_chars = 64);

// The value as an integer in [lo, hi]; InputError "<name>=<excerpt> is not an integer" or
// "... is below the minimum lo" / "... is above the maximum hi".
int64_t json_int(const nlohmann::json& value, int64_t lo, int64_t hi, std::string_view name);

// Why the value is not an integer in [lo, hi] ("is not an integer", "is below the minimum lo",
// "is above the maximum hi"), or "" when it is. A whole number beyond int64, which the parser keeps
// as a float, "is not an integer in [lo, hi]".
std::string json_int_problem(const nlohmann::json& value, int64_t lo, int64_t hi);

}  // namespace dcp
