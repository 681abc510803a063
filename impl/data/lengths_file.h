// Readers of sample-length files (DESIGN.md "dcpbench schedule" FILE):
//   * text: one integer per line; blank lines and '#' comments (whole-line or trailing) ignored;
//   * JSON: an array of integers;
//   * Megatron .idx (MMIDIDX v1, little-endian): document lengths = sums of their sequences.
// Format is detected from content: .idx by its 9-byte magic, JSON by a leading '[' (after
// whitespace), text otherwise. Every error is an InputError naming the source and the bad value
// (line number for text, element index for JSON, field for .idx). Lengths must be >= 1.
//
// .idx layout (Megatron-LM megatron/core/datasets/indexed_dataset.py, _IndexWriter):
//   [0,9) magic "MMIDIDX\0\0" | [9,17) u64 version = 1 | [17] u8 dtype code (1..8) |
//   [18,26) u64 sequence count N | [26,34) u64 document-boundary count M |
//   [34, +4N) i32 sequence_lengths | i64 sequence_pointers[N] | i64 document_indices[M] (0..N,
//   non-decreasing) | optional i8 modes[N] (detected by file size). Arrays are unaligned.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dcp::data {

std::vector<int64_t> parse_lengths_text(std::string_view text, const std::string& source);
std::vector<int64_t> parse_lengths_json(std::string_view text, const std::string& source);
std::vector<int64_t> parse_megatron_idx(std::string_view bytes, const std::string& source);

// Detects the format from the content and parses it.
std::vector<int64_t> parse_lengths(std::string_view content, const std::string& source);

// Reads a file and parses it; InputError if it cannot be read or is empty of samples.
std::vector<int64_t> read_lengths_file(const std::string& path);

}  // namespace dcp::data
