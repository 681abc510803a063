// Text for error messages: every message the CLI prints is one line of at most ~300 characters
// with no raw control or invalid bytes, whatever the user's input contained (file names with
// newlines, binary file contents, megabyte-long values).
//
//   escape_bytes("a\nb\x01")      -> a\nb\x01   (printable ASCII and valid UTF-8 >= U+00A0 kept;
//                                               \n \r \t \\ escaped; every other byte as \xHH)
//   quote("--planner value")      -> "--planner value"   (escaped, in double quotes; cut after
//   quote(long, 16)               -> "aaaaaaaaaaaaaaaa"...(5000 bytes)    max_chars + a byte count)
//   one_line(msg)                 -> escaped (a backslash is kept: quote() made it); if longer than max_chars, the head and the tail
//                                    with " [...] " between (the tail usually says what is wrong)
// Callers quote user values at the source (quote()); main.cpp passes every message through
// one_line() as the last line of defence.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace dcp {

inline constexpr size_t kMaxErrorChars = 300;   // one_line() default: the longest line printed
inline constexpr size_t kMaxQuotedChars = 64;   // quote() default: prefix of a quoted value

// escape_backslash = false for text that is escaped already (a JSON dump, a quote() result).
std::string escape_bytes(std::string_view bytes, bool escape_backslash = true);
std::string quote(std::string_view value, size_t max_chars = kMaxQuotedChars);
std::string one_line(std::string_view message, size_t max_chars = kMaxErrorChars);
// One number through a printf format of one double conversion, e.g. fmt("%.3f", x) (tables).
std::string fmt(const char* format, double v);

// A name that ends up in file names and result sources (a scenario's, a calibration's): 1 to
// max_chars letters, digits, '-', '_' and '.'. nullopt if it is one, else what is wrong.
std::optional<std::string> safe_name_error(std::string_view name, size_t max_chars = 100);

}  // namespace dcp
