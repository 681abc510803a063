// See text.h. Bytes are split into units (one printable character, or the escape of one byte)
// so that cutting a message never splits a UTF-8 sequence or an escape.
#include "core/text.h"

#include <cctype>

#include <cstdint>
#include <cstdio>
#include <vector>

namespace dcp {
namespace {

struct Unit {
  std::string text;  // what is printed
  size_t width = 0;  // characters on screen
};

// Length of a valid UTF-8 sequence at s[i] encoding a code point worth keeping (>= U+00A0, not a
// line/paragraph separator or a bidirectional control, which could move or hide text), else 0.
size_t utf8_keep(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const auto cont = [&](size_t k) { return i + k < s.size() && (b(k) & 0xC0) == 0x80; };
  const unsigned char c = b(0);
  uint32_t cp = 0;
  size_t n = 0;
  if (c >= 0xC2 && c <= 0xDF && cont(1)) {
    cp = ((c & 0x1Fu) << 6) | (b(1) & 0x3Fu);
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF && cont(1) && cont(2)) {
    cp = ((c & 0x0Fu) << 12) | ((b(1) & 0x3Fu) << 6) | (b(2) & 0x3Fu);
    if (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;  // overlong or surrogate
    n = 3;
  } else if (c >= 0xF0 && c <= 0xF4 && cont(1) && cont(2) && cont(3)) {
    cp = ((c & 0x07u) << 18) | ((b(1) & 0x3Fu) << 12) | ((b(2) & 0x3Fu) << 6) | (b(3) & 0x3Fu);
    if (cp < 0x10000 || cp > 0x10FFFF) return 0;
    n = 4;
  } else {
    return 0;
  }
  if (cp < 0xA0) return 0;                                     // C1 controls
  if (cp == 0x2028 || cp == 0x2029 || cp == 0xFEFF) return 0;  // separators, BOM
  if ((cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069) || cp == 0x200E || cp == 0x200F)
    return 0;  // bidirectional controls
  return n;
}

// escape_backslash: quote() and escape_bytes() escape '\\' (so their output is unambiguous);
// one_line() leaves it, as its input may hold escapes made by quote() already.
std::vector<Unit> units_of(std::string_view s, bool escape_backslash = true) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::vector<Unit> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7F) {
      out.push_back(c == '\\' && escape_backslash ? Unit{"\\\\", 2} : Unit{std::string(1, static_cast<char>(c)), 1});
      ++i;
    } else if (c == '\n' || c == '\r' || c == '\t') {
      out.push_back(Unit{c == '\n' ? "\\n" : c == '\r' ? "\\r" : "\\t", 2});
      ++i;
    } else if (const size_t n = c >= 0x80 ? utf8_keep(s, i) : 0; n > 0) {
      out.push_back(Unit{std::string(s.substr(i, n)), 1});
      i += n;
    } else {
      out.push_back(Unit{std::string{'\\', 'x', kHex[c >> 4], kHex[c & 15]}, 4});
      ++i;
    }
  }
  return out;
}

}  // namespace

std::string escape_bytes(std::string_view bytes, bool escape_backslash) {
  std::string out;
  for (const Unit& u : units_of(bytes, escape_backslash)) out += u.text;
  return out;
}

std::string quote(std::string_view value, size_t max_chars) {
  // An escape is at most 4 characters per byte: the first 4 * max_chars + 4 bytes are enough.
  const size_t look = 4 * max_chars + 4;
  const std::vector<Unit> units = units_of(value.substr(0, look));
  std::string out = "\"";
  size_t width = 0, i = 0;
  for (; i < units.size() && width + units[i].width <= max_chars; ++i) {
    out += units[i].text;
    width += units[i].width;
  }
  out += "\"";
  if (i < units.size() || value.size() > look) out += "...(" + std::to_string(value.size()) + " bytes)";
  return out;
}

std::string one_line(std::string_view message, size_t max_chars) {
  const std::vector<Unit> units = units_of(message, false);
  size_t total = 0;
  for (const Unit& u : units) total += u.width;
  std::string out;
  if (total <= max_chars) {
    for (const Unit& u : units) out += u.text;
    return out;
  }
  static constexpr std::string_view kCut = " [...] ";
  const size_t budget = max_chars > kCut.size() + 2 ? max_chars - kCut.size() : 2;
  const size_t tail_budget = budget / 4;  // the end usually says what is wrong
  const size_t head_budget = budget - tail_budget;
  size_t w = 0, head = 0;
  while (head < units.size() && w + units[head].width <= head_budget) w += units[head++].width;
  size_t tail = units.size();
  w = 0;
  while (tail > head && w + units[tail - 1].width <= tail_budget) w += units[--tail].width;
  for (size_t i = 0; i < head; ++i) out += units[i].text;
  out += kCut;
  for (size_t i = tail; i < units.size(); ++i) out += units[i].text;
  return out;
}

std::optional<std::string> safe_name_error(std::string_view name, size_t max_chars) {
  if (name.empty() || name.size() > max_chars)
    return "must be 1 to " + std::to_string(max_chars) + " characters long";
  for (const char ch : name)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.'))
      return std::string("may only contain letters, digits, '-', '_' and '.'");
  return std::nullopt;
}

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

}  // namespace dcp
