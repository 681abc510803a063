// See json_io.h.
#include "core/json_io.h"

#include "core/error.h"
#include "core/files.h"
#include "core/text.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <unordered_set>
#include <vector>

namespace dcp {
namespace {

struct TooDeep {};
struct DuplicateKey {
  std::string key;
};

// nlohmann's message with the "last read: '<token>'" part cut to a short, escaped excerpt (the
// token can be a whole multi-megabyte string of the input). nlohmann writes
// "...; last read: '<token>'" and, when it knows what it wanted, "; expected <what>" after it: the
// token ends at the last "'" before that. A long token is shown by its tail, where the parser
// stopped (its head had hidden the offending text, and the "; expected" part had landed inside
// the quotes; helper-47).
std::string parse_error_text(const std::string& what) {
  static constexpr std::string_view kLastRead = "last read: '";
  static constexpr std::string_view kExpected = "'; expected ";
  static constexpr size_t kTokenChars = 40;
  const size_t at = what.find(kLastRead);
  if (at == std::string::npos) return escape_bytes(what.substr(0, 200));
  const size_t begin = at + kLastRead.size();
  // The "; expected" part is nlohmann's only when it ends the message with one of its token names
  // (lexer.hpp token_type_name): the same text inside the token is the input's.
  static constexpr std::string_view kTokenNames[] = {
      "<uninitialized>", "true literal", "false literal", "null literal", "string literal", "number literal",
      "'['", "'{'", "']'", "'}'", "':'", "','", "<parse error>", "end of input", "'[', '{', or a literal",
      "unknown token"};
  size_t end = what.rfind(kExpected);
  if (end != std::string::npos) {
    const std::string_view named = std::string_view(what).substr(end + kExpected.size());
    if (std::find(std::begin(kTokenNames), std::end(kTokenNames), named) == std::end(kTokenNames)) end = std::string::npos;
  }
  std::string rest;
  if (end != std::string::npos && end >= begin) {
    rest = what.substr(end + 1);  // "; expected ..."
  } else {
    end = what.size();
    if (end > begin && what[end - 1] == '\'') --end;
  }
  const std::string_view token(what.data() + begin, end - begin);
  std::string shown;
  if (token.size() <= kTokenChars) {
    shown = quote(token, kTokenChars);
  } else {
    size_t from = token.size() - kTokenChars;
    while (from < token.size() && (static_cast<unsigned char>(token[from]) & 0xC0) == 0x80) ++from;  // a UTF-8 lead byte
    shown = "(" + std::to_string(token.size()) + " bytes, ending) ..." + quote(token.substr(from), kTokenChars);
  }
  return escape_bytes(what.substr(0, at)) + "last read: " + shown + escape_bytes(rest.substr(0, 120));
}

void excerpt_into(const nlohmann::json& v, std::string& out, size_t max_chars, int depth) {
  using nlohmann::json;
  if (out.size() > max_chars) return;
  if (v.is_array() || v.is_object()) {
    const bool arr = v.is_array();
    if (v.empty()) {
      out += arr ? "[]" : "{}";
      return;
    }
    if (depth >= 6) {
      out += arr ? "[...]" : "{...}";
      return;
    }
    out += arr ? '[' : '{';
    bool first = true;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!first) out += ',';
      first = false;
      if (out.size() > max_chars) break;
      if (!arr) {
        excerpt_into(json(it.key()), out, max_chars, depth + 1);
        out += ':';
      }
      excerpt_into(*it, out, max_chars, depth + 1);
    }
    out += arr ? ']' : '}';
  } else if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    const json cut = s.size() > max_chars ? json(s.substr(0, max_chars + 1)) : v;
    out += cut.dump(-1, ' ', false, json::error_handler_t::replace);
  } else {
    out += v.dump();
  }
}

// A checking pass over the text (nlohmann's SAX interface, linear): nesting depth and keys given
// twice in one object. The DOM is built afterwards by a plain parse: nlohmann's callback parser,
// which we used before, rescans the parent container after every object it keeps (json_sax.hpp,
// callback end_object), quadratic in an array of objects: a 3.2 MB results-like array took 28 s.
class Checker final : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit Checker(int max_depth) : max_depth_(max_depth) {}
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    open();
    keys_.emplace_back();
    return true;
  }
  bool key(string_t& k) override {
    if (!keys_.empty() && !keys_.back().insert(k).second) throw DuplicateKey{k};
    return true;
  }
  bool end_object() override {
    --depth_;
    if (!keys_.empty()) keys_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override {
    open();
    return true;
  }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;  // the plain parse that follows reports it, with nlohmann's message
  }

 private:
  void open() {
    // `depth_` containers are already open around this one.
    if (depth_ >= max_depth_) throw TooDeep{};
    ++depth_;
  }
  int max_depth_;
  int depth_ = 0;
  std::vector<std::unordered_set<std::string>> keys_;  // the keys of every open object, innermost last
};

}  // namespace

void check_json_text(std::string_view text, const std::string& source, int max_depth) {
  try {
    Checker checker(max_depth);
    // A key given twice is an error (nlohmann keeps the last silently, so a scenario's second
    // "name" would win without a word). A syntax error stops the check quietly.
    nlohmann::json::sax_parse(text.begin(), text.end(), &checker);
  } catch (const TooDeep&) {
    throw InputError(show_path(source) + ": JSON nested deeper than the limit of " + std::to_string(max_depth) +
                     " levels");
  } catch (const DuplicateKey& d) {
    throw InputError(show_path(source) + ": key " + quote(d.key, 60) + " appears twice in one object");
  } catch (const nlohmann::json::exception&) {  // (sax_parse reports errors to parse_error, not by throwing)
  }
}

nlohmann::json parse_json_text(std::string_view text, const std::string& source, int max_depth) {
  // Nothing but white space (an empty file, or a FIFO nobody wrote to: read_file_bounded reads it to
  // its end at once) is said as such; nlohmann's "unexpected end of input" read as a broken file.
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos)
    throw InputError(show_path(source) + ": is empty, no JSON in it" + (text.empty() ? "" : " (white space only)"));
  check_json_text(text, source, max_depth);
  try {
    return nlohmann::json::parse(text.begin(), text.end());  // syntax errors are reported here
  } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for number overflow
    throw_invalid_json(source, e.what());
  }
}

void throw_invalid_json(const std::string& source, const std::string& nlohmann_what) {
  throw InputError(show_path(source) + ": invalid JSON (" + parse_error_text(nlohmann_what) + ")");
}

nlohmann::json read_json_file(const std::string& path, int64_t max_bytes, int max_depth) {
  return parse_json_text(read_file_bounded(path, max_bytes, "JSON file"), path, max_depth);
}

void write_file_atomic(const std::string& path, const std::string& text) { write_output(path, text, ""); }

std::string json_file_text(const std::string& path, const nlohmann::json& j, int indent) {
  std::string text = j.dump(indent) + "\n";
  // Nothing is written that read_json_file (table, plot, gate, check, ...) would refuse.
  if (static_cast<int64_t>(text.size()) > kMaxJsonFileBytes)
    throw InputError(show_path(path) + ": the JSON would be " + std::to_string(text.size() >> 20) +
                     " MiB, above the limit of " + std::to_string(kMaxJsonFileBytes >> 20) +
                     " MiB that dcpbench reads back; nothing written");
  return text;
}

void write_json_atomic(const std::string& path, const nlohmann::json& j, int indent) {
  write_file_atomic(path, json_file_text(path, j, indent));
}

std::string json_excerpt(const nlohmann::json& value, size_t max_chars) {
  // A long string: a prefix in its quotes and its byte count, as core/text.h quote() says a flag's
  // value (the cut dump had lost its closing quote and its length, helper-20).
  if (value.is_string() && value.get_ref<const std::string&>().size() > max_chars) {
    const auto& s = value.get_ref<const std::string&>();
    size_t cut = max_chars;  // not inside a UTF-8 sequence
    while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
    const nlohmann::json prefix = s.substr(0, cut);
    return escape_bytes(prefix.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), false) + "...(" +
           std::to_string(s.size()) + " bytes)";
  }
  std::string out;
  excerpt_into(value, out, max_chars, 0);
  if (out.size() > max_chars) {
    size_t cut = max_chars;  // not inside a UTF-8 sequence
    while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) --cut;
    out = out.substr(0, cut) + "...";
  }
  return escape_bytes(out, false);  // the dump escaped quotes and controls already
}

std::string json_int_problem(const nlohmann::json& value, int64_t lo, int64_t hi) {
  const std::string above = "is above the maximum " + std::to_string(hi);
  const std::string below = "is below the minimum " + std::to_string(lo);
  // A whole number of 2^63 or more is a float here, whether written 18446744073709551616 or 1e300
  // (the value does not keep its text): named with the range, true of either (helper-75's trial:
  // "training.seed": 2**64 read "is not an integer", as if a fraction).
  if (value.is_number_float()) {
    const double d = value.get<double>();
    if (std::isfinite(d) && d == std::trunc(d) && std::fabs(d) >= 9223372036854775808.0)
      return "is not an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  }
  if (!value.is_number_integer()) return "is not an integer";
  if (value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(std::max<int64_t>(hi, 0)))
    return above;  // before get<int64_t> could wrap
  const int64_t x = value.get<int64_t>();
  if (x < lo) return below;
  if (x > hi) return above;
  return "";
}

int64_t json_int(const nlohmann::json& value, int64_t lo, int64_t hi, std::string_view name) {
  if (const std::string why = json_int_problem(value, lo, hi); !why.empty())
    throw InputError(std::string(name) + "=" + json_excerpt(value, 40) + " " + why);
  return value.get<int64_t>();
}

}  // namespace dcp
