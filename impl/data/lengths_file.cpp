// See lengths_file.h.
#include "data/lengths_file.h"

#include "core/error.h"

#include <nlohmann/json.hpp>

#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>

namespace dcp::data {

using detail::concat;

namespace {

constexpr char kIdxMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
constexpr size_t kIdxHeader = 34;

std::string_view trim(std::string_view s) {
  const char* ws = " \t\r\n\v\f";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  const size_t e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

template <typename T>
T load_le(std::string_view bytes, size_t offset) {
  T v;
  std::memcpy(&v, bytes.data() + offset, sizeof(T));  // unaligned read; x86-64 and aarch64 are LE
  return v;
}

}  // namespace

std::vector<int64_t> parse_lengths_text(std::string_view text, const std::string& source) {
  std::vector<int64_t> out;
  size_t line_no = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(pos, nl - pos);
    ++line_no;
    pos = nl + 1;
    if (const size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    line = trim(line);
    if (line.empty()) continue;
    int64_t v = 0;
    const auto [ptr, ec] = std::from_chars(line.data(), line.data() + line.size(), v);
    DCP_REQUIRE(ec != std::errc::result_out_of_range, source, ":", line_no, ": length '", line, "' is out of range");
    DCP_REQUIRE(ec == std::errc() && ptr == line.data() + line.size(), source, ":", line_no, ": '", line,
                "' is not an integer length");
    DCP_REQUIRE(v >= 1, source, ":", line_no, ": length ", v, " must be >= 1");
    out.push_back(v);
    if (nl == text.size()) break;
  }
  return out;
}

std::vector<int64_t> parse_lengths_json(std::string_view text, const std::string& source) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for number overflow
    throw InputError(concat(source, ": invalid JSON (", e.what(), ")"));
  }
  DCP_REQUIRE(j.is_array(), source, ": JSON lengths must be an array of integers");
  std::vector<int64_t> out;
  out.reserve(j.size());
  for (size_t i = 0; i < j.size(); ++i) {
    const auto& e = j[i];
    DCP_REQUIRE(e.is_number_integer(), source, ": element ", i, " (", e.dump(), ") is not an integer length");
    DCP_REQUIRE(!e.is_number_unsigned() || e.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
                source, ": element ", i, " (", e.dump(), ") is out of range");
    const int64_t v = e.get<int64_t>();
    DCP_REQUIRE(v >= 1, source, ": element ", i, " has length ", v, " (must be >= 1)");
    out.push_back(v);
  }
  return out;
}

std::vector<int64_t> parse_megatron_idx(std::string_view b, const std::string& source) {
  DCP_REQUIRE(b.size() >= kIdxHeader, source, ": .idx file too short (", b.size(), " bytes, header needs 34)");
  DCP_REQUIRE(std::memcmp(b.data(), kIdxMagic, sizeof kIdxMagic) == 0, source, ": not a Megatron .idx file (bad magic)");
  const uint64_t version = load_le<uint64_t>(b, 9);
  DCP_REQUIRE(version == 1, source, ": unsupported .idx version ", version, " (expected 1)");
  const uint8_t dtype = load_le<uint8_t>(b, 17);
  DCP_REQUIRE(dtype >= 1 && dtype <= 8, source, ": unknown .idx dtype code ", static_cast<int>(dtype));
  const uint64_t n_seq = load_le<uint64_t>(b, 18);
  const uint64_t n_doc = load_le<uint64_t>(b, 26);
  // Bound the counts by the file size before any multiplication can overflow.
  const uint64_t avail = b.size() - kIdxHeader;
  DCP_REQUIRE(n_seq <= avail / 12 && n_doc <= avail / 8, source, ": .idx counts (", n_seq, " sequences, ", n_doc,
              " document boundaries) do not fit in a file of ", b.size(), " bytes");
  const uint64_t body = 12 * n_seq + 8 * n_doc;
  DCP_REQUIRE(avail == body || avail == body + n_seq, source, ": .idx size ", b.size(), " bytes does not match ",
              n_seq, " sequences and ", n_doc, " document boundaries (expected ", kIdxHeader + body, " or ",
              kIdxHeader + body + n_seq, ")");
  DCP_REQUIRE(n_doc >= 1, source, ": .idx has no document boundaries");
  const size_t off_len = kIdxHeader;
  const size_t off_doc = kIdxHeader + 12 * n_seq;
  int64_t prev = load_le<int64_t>(b, off_doc);
  DCP_REQUIRE(prev == 0, source, ": .idx document_indices[0] = ", prev, " (expected 0)");
  std::vector<int64_t> out;
  out.reserve(n_doc - 1);
  for (uint64_t d = 1; d < n_doc; ++d) {
    const int64_t cur = load_le<int64_t>(b, off_doc + 8 * d);
    DCP_REQUIRE(cur >= prev && static_cast<uint64_t>(cur) <= n_seq, source, ": .idx document_indices[", d, "] = ", cur,
                " is not in [", prev, ", ", n_seq, "]");
    int64_t len = 0;
    for (int64_t s = prev; s < cur; ++s) {
      const int32_t sl = load_le<int32_t>(b, off_len + 4 * static_cast<size_t>(s));
      DCP_REQUIRE(sl >= 0, source, ": .idx sequence_lengths[", s, "] = ", sl, " is negative");
      len += sl;
    }
    DCP_REQUIRE(len >= 1, source, ": .idx document ", d - 1, " has length ", len, " (must be >= 1)");
    out.push_back(len);
    prev = cur;
  }
  DCP_REQUIRE(static_cast<uint64_t>(prev) == n_seq, source, ": .idx last document index ", prev,
              " != sequence count ", n_seq);
  return out;
}

std::vector<int64_t> parse_lengths(std::string_view content, const std::string& source) {
  if (content.size() >= sizeof kIdxMagic && std::memcmp(content.data(), kIdxMagic, sizeof kIdxMagic) == 0)
    return parse_megatron_idx(content, source);
  const std::string_view t = trim(content);
  if (!t.empty() && t.front() == '[') return parse_lengths_json(content, source);
  return parse_lengths_text(content, source);
}

std::vector<int64_t> read_lengths_file(const std::string& path) {
  std::error_code ec;
  DCP_REQUIRE(!std::filesystem::is_directory(path, ec), path, ": is a directory, not a lengths file");
  std::ifstream in(path, std::ios::binary);
  DCP_REQUIRE(in.good(), path, ": cannot open lengths file");
  std::string content;
  try {
    content.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  } catch (const std::ios_base::failure& e) {  // libstdc++ throws on some read errors
    throw InputError(concat(path, ": cannot read (", e.what(), ")"));
  }
  auto out = parse_lengths(content, path);
  DCP_REQUIRE(!out.empty(), path, ": no sample lengths in file");
  return out;
}

}  // namespace dcp::data
