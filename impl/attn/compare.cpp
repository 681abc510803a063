// See compare.h.
#include "attn/compare.h"

#include <cmath>
#include <sstream>

#include "core/error.h"
#include "core/nvtx.h"

namespace dcp::attn {

std::string Comparison::report(const std::string& name) const {
  std::ostringstream os;
  os.precision(6);
  os << name << ": n=" << count << " max_abs=" << max_abs_err << " max|ref|=" << max_ref_abs
     << " rel=" << rel_err << " worst[" << worst_index << "]: ref=" << worst_ref
     << " got=" << worst_got;
  if (nonfinite_mismatches > 0) os << " NON-FINITE mismatches=" << nonfinite_mismatches;
  os << " first: " << first_pairs;
  return os.str();
}

template <typename T>
Comparison compare_to_ref(std::span<const double> ref, std::span<const T> got, int first_pairs) {
  DCP_NVTX_RANGE();
  DCP_CHECK(ref.size() == got.size(), "compare_to_ref: ", ref.size(), " reference values but ",
            got.size(), " results");
  Comparison c;
  c.count = static_cast<int64_t>(ref.size());
  std::ostringstream pairs;
  pairs.precision(10);
  for (size_t i = 0; i < ref.size(); ++i) {
    const double r = ref[i];
    const double g = static_cast<double>(got[i]);
    if (static_cast<int>(i) < first_pairs) pairs << i << ": " << r << " " << g << "; ";
    if (!std::isfinite(r) || !std::isfinite(g)) {
      if (r == g) continue;  // the same infinity on both sides
      if (c.nonfinite_mismatches++ == 0) {
        c.worst_index = static_cast<int64_t>(i);
        c.worst_ref = r;
        c.worst_got = g;
      }
      continue;
    }
    c.max_ref_abs = std::max(c.max_ref_abs, std::abs(r));
    const double err = std::abs(g - r);
    if (err > c.max_abs_err && c.nonfinite_mismatches == 0) {
      c.max_abs_err = err;
      c.worst_index = static_cast<int64_t>(i);
      c.worst_ref = r;
      c.worst_got = g;
    } else if (err > c.max_abs_err) {
      c.max_abs_err = err;
    }
  }
  c.rel_err = c.max_ref_abs > 0 ? c.max_abs_err / c.max_ref_abs : c.max_abs_err;
  if (c.nonfinite_mismatches > 0) c.rel_err = INFINITY;
  c.first_pairs = pairs.str();
  return c;
}

template Comparison compare_to_ref<float>(std::span<const double>, std::span<const float>, int);
template Comparison compare_to_ref<double>(std::span<const double>, std::span<const double>, int);

}  // namespace dcp::attn
