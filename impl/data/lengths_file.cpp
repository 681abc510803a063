// See lengths_file.h.
#include "data/lengths_file.h"

#include "core/error.h"
#include "core/files.h"
#include "core/json_io.h"
#include "core/text.h"

#include <nlohmann/json.hpp>

#include <charconv>
#include <cstring>
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
    DCP_REQUIRE(ec != std::errc::result_out_of_range, show_path(source), ":", line_no, ": length ", quote(line),
                " is out of range");
    DCP_REQUIRE(ec == std::errc() && ptr == line.data() + line.size(), show_path(source), ":", line_no, ": ",
                quote(line), " is not an integer length");
    DCP_REQUIRE(v >= 1, show_path(source), ":", line_no, ": length ", v, " must be >= 1");
    DCP_REQUIRE(static_cast<int64_t>(out.size()) < kMaxLengths, show_path(source), ":", line_no,
                ": more than the limit of ", kMaxLengths, " lengths");
    out.push_back(v);
    if (nl == text.size()) break;
  }
  return out;
}

namespace {

// Reads a JSON array of integers straight into the lengths (nlohmann's SAX interface): no tree is
// built, so a file at the 2^27-length limit takes 8 bytes per length, not the ~24 bytes per file
// byte a parsed nlohmann tree took (a 40 MB file had peaked at 0.98 GB, helper-21); the limit is
// checked as the elements arrive. Depth and duplicate keys were checked before (check_json_text).
class LengthsSax {
 public:
  using json = nlohmann::json;
  explicit LengthsSax(const std::string& source) : source_(show_path(source)) {}
  std::vector<int64_t> out;

  bool null() { return element(json(nullptr)); }
  bool boolean(bool v) { return element(json(v)); }
  bool number_integer(json::number_integer_t v) { return integer(v); }
  bool number_unsigned(json::number_unsigned_t v) {
    if (depth_ == 1 && v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      throw InputError(source_ + ": element " + std::to_string(out.size()) + " (" + json_excerpt(json(v), 40) +
                       ") is out of range");
    return integer(static_cast<int64_t>(std::min<uint64_t>(v, std::numeric_limits<int64_t>::max())));
  }
  bool number_float(json::number_float_t v, const json::string_t& literal) {
    // An integer literal beyond uint64 reaches here as a float: it is out of range, not "not an
    // integer" (helper-75's trial: 18446744073709551616 read as 1.8446744073709552e+19).
    const bool integer_literal = !literal.empty() &&
                                 literal.find_first_not_of("0123456789", literal[0] == '-' ? 1 : 0) == std::string::npos &&
                                 literal.size() > (literal[0] == '-' ? 1u : 0u);
    if (depth_ == 1 && integer_literal)
      throw InputError(source_ + ": element " + std::to_string(out.size()) + " (" +
                       (literal.size() > 40 ? literal.substr(0, 37) + "..." : literal) + ") is out of range");
    return element(json(v));
  }
  bool string(json::string_t& v) { return element(json(v)); }
  bool binary(json::binary_t&) { return element(json("<binary>")); }
  bool start_object(std::size_t) { return open("{...}"); }
  bool key(json::string_t&) { return true; }
  bool end_object() { return close(); }
  bool start_array(std::size_t) { return open("[...]"); }
  bool end_array() { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    throw_invalid_json(source_, e.what());
  }

 private:
  [[noreturn]] void not_an_array() const {
    throw InputError(source_ + ": JSON lengths must be an array of integers");
  }
  [[noreturn]] void not_an_integer(const std::string& shown) const {
    throw InputError(source_ + ": element " + std::to_string(out.size()) + " (" + shown + ") is not an integer length");
  }
  bool open(const char* shown) {
    if (depth_ == 0 && shown[0] != '[') not_an_array();
    if (depth_ == 1) not_an_integer(shown);
    ++depth_;
    return true;
  }
  bool close() {
    --depth_;
    return true;
  }
  bool element(const json& v) {
    if (depth_ == 0) not_an_array();
    not_an_integer(json_excerpt(v, 40));
  }
  bool integer(int64_t v) {
    if (depth_ == 0) not_an_array();
    DCP_REQUIRE(v >= 1, source_, ": element ", out.size(), " has length ", v, " (must be >= 1)");
    DCP_REQUIRE(static_cast<int64_t>(out.size()) < kMaxLengths, source_, ": more than the limit of ", kMaxLengths,
                " lengths");
    out.push_back(v);
    return true;
  }

  std::string source_;
  int depth_ = 0;
};

}  // namespace

std::vector<int64_t> parse_lengths_json(std::string_view text, const std::string& source) {
  check_json_text(text, source);  // depth (no recursion reached) and keys, linear, no tree
  LengthsSax sax(source);
  nlohmann::json::sax_parse(text.begin(), text.end(), &sax);
  return std::move(sax.out);
}

std::vector<int64_t> parse_megatron_idx(std::string_view b, const std::string& source_path) {
  const std::string source = show_path(source_path);
  DCP_REQUIRE(b.size() >= sizeof kIdxMagic && std::memcmp(b.data(), kIdxMagic, sizeof kIdxMagic) == 0, source,
              ": not a Megatron .idx file (bad magic)");
  DCP_REQUIRE(b.size() >= kIdxHeader, source, ": .idx file too short (", b.size(), " bytes, header needs 34)");
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
  DCP_REQUIRE(n_doc - 1 <= static_cast<uint64_t>(kMaxLengths), source, ": .idx has ", n_doc - 1,
              " documents, more than the limit of ", kMaxLengths);
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
  // "MMID" starts the .idx magic: such a file is a (possibly damaged) .idx, never text.
  if (content.substr(0, 4) == std::string_view(kIdxMagic, 4)) return parse_megatron_idx(content, source);
  const std::string_view t = trim(content);
  if (!t.empty() && t.front() == '[') return parse_lengths_json(content, source);
  if (const size_t nul = content.find('\0'); nul != std::string_view::npos)
    throw InputError(concat(show_path(source), ": binary content (a NUL byte at offset ", nul,
                            "), not a text, JSON or Megatron .idx lengths file"));
  return parse_lengths_text(content, source);
}

std::vector<int64_t> read_lengths_file(const std::string& path) {
  const std::string content = read_file_bounded(path, kMaxLengthsFileBytes, "lengths file");
  const bool idx_name = path.size() >= 4 && path.compare(path.size() - 4, 4, ".idx") == 0;
  auto out = idx_name ? parse_megatron_idx(content, path) : parse_lengths(content, path);
  DCP_REQUIRE(!out.empty(), show_path(path), ": no sample lengths in file");
  return out;
}

std::vector<int64_t> read_sample_lengths_file(const std::string& path, int64_t max_length) {
  auto out = read_lengths_file(path);
  for (size_t i = 0; i < out.size(); ++i)
    DCP_REQUIRE(out[i] <= max_length, show_path(path), ": sample ", i, " has length ", out[i], ", above the limit of ",
                max_length, " tokens per sample");
  return out;
}

}  // namespace dcp::data
