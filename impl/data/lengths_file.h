// Readers of sample-length files (DESIGN.md "dcpbench schedule" FILE):
//   * text: one integer per line; blank lines and '#' comments (whole-line or trailing) ignored;
//   * JSON: an array of integers;
//   * Megatron .idx (MMIDIDX v1, little-endian): document lengths = sums of their sequences.
// Format is detected from content: .idx by its 9-byte magic, JSON by a leading '[' (after
// whitespace), text otherwise; read_lengths_file() also reads a file named *.idx as .idx (so a
// damaged one says "bad magic" instead of being read as text). Content with a NUL byte or the
// start of the magic is never read as text. Every error is an InputError naming the source and the
// bad value (line number for text, element index for JSON, field for .idx), values quoted only up
// to a short prefix (core/text.h). Lengths must be >= 1.
// Limits (README "Input limits and errors"): a file of at most kMaxLengthsFileBytes, at most kMaxLengths
// lengths, JSON nested at most core's kMaxJsonDepth levels.
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

// 1 GiB: a Megatron .idx of ~80M sequences; larger inputs are refused before they fill memory.
inline constexpr int64_t kMaxLengthsFileBytes = int64_t{1} << 30;
// 2^27 lengths (1 GiB as int64): every document of such an .idx.
inline constexpr int64_t kMaxLengths = int64_t{1} << 27;

std::vector<int64_t> parse_lengths_text(std::string_view text, const std::string& source);
std::vector<int64_t> parse_lengths_json(std::string_view text, const std::string& source);
std::vector<int64_t> parse_megatron_idx(std::string_view bytes, const std::string& source);

// Detects the format from the content and parses it.
std::vector<int64_t> parse_lengths(std::string_view content, const std::string& source);

// Reads a file and parses it; InputError if it cannot be read or is empty of samples.
std::vector<int64_t> read_lengths_file(const std::string& path);

// The same for a file of samples to plan (`schedule`, `check`): each length at most `max_length`,
// else an InputError naming the file, the sample and the limit (a document file may hold longer
// ones, which a dataset splits into max_seqlen chunks).
std::vector<int64_t> read_sample_lengths_file(const std::string& path, int64_t max_length);

}  // namespace dcp::data
