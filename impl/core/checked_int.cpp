// See checked_int.h.
#include "core/checked_int.h"

#include "core/error.h"
#include "core/text.h"

#include <charconv>

namespace dcp {
namespace {

std::optional<int64_t> parse_exact(std::string_view text, bool& out_of_range) {
  out_of_range = false;
  std::string_view t = text;
  const bool plus = !t.empty() && t.front() == '+';
  if (plus) t.remove_prefix(1);
  if (t.empty() || (plus && t.front() == '-')) return std::nullopt;
  int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec == std::errc::result_out_of_range) {
    // from_chars stops at the end of the digits; out of range only if nothing else follows.
    const bool all_digits = ptr == t.data() + t.size();
    out_of_range = all_digits;
    return std::nullopt;
  }
  if (ec != std::errc() || ptr != t.data() + t.size()) return std::nullopt;
  return v;
}

}  // namespace

std::optional<std::string> int_error(std::string_view text, int64_t lo, int64_t hi) {
  bool out_of_range = false;
  const std::optional<int64_t> v = parse_exact(text, out_of_range);
  if (out_of_range)
    return quote(text) + " is out of range (allowed: " + std::to_string(lo) + " to " + std::to_string(hi) + ")";
  if (!v) return quote(text) + " is not an integer";
  if (*v < lo) return quote(text) + " is below the minimum " + std::to_string(lo);
  if (*v > hi) return quote(text) + " is above the maximum " + std::to_string(hi);
  return std::nullopt;
}

int64_t parse_int(std::string_view text, int64_t lo, int64_t hi, std::string_view name) {
  if (auto e = int_error(text, lo, hi)) throw InputError(std::string(name) + "=" + *e);
  bool unused = false;
  return *parse_exact(text, unused);
}

}  // namespace dcp
