// JSON file I/O through nlohmann/json. Writes are atomic (temp file in the same folder, then
// rename), so a failed run never leaves a half-written results or plan file.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <string>

namespace dcp {

// Parses a JSON file; throws InputError naming the file on I/O or parse errors.
nlohmann::json read_json_file(const std::string& path);

// Writes text atomically: `path`.tmp.<pid> then rename. Creates no directories.
void write_file_atomic(const std::string& path, const std::string& text);

// Pretty-printed (indent 1) JSON, atomically.
void write_json_atomic(const std::string& path, const nlohmann::json& j, int indent = 1);

}  // namespace dcp
