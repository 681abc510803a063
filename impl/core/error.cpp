// Out-of-line throw helpers for DCP_CHECK / DCP_FAIL (keeps the macros small at call sites).
#include "core/error.h"

namespace dcp::detail {

void throw_check(const char* file, int line, const char* cond, const std::string& msg) {
  std::string s = concat(file, ":", line, ": Assertion failed: ", cond, ".");
  if (!msg.empty()) s += " " + msg;
  throw Error(s);
}

void throw_fail(const char* file, int line, const std::string& msg) {
  throw Error(concat(file, ":", line, ": ", msg));
}

}  // namespace dcp::detail
