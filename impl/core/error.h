// dcp::Error and the checking macros used everywhere in impl/.
//
// Invariant: code inside impl/ throws, it never calls exit(). Only harness/main.cpp catches,
// prints one line and exits non-zero.
//   DCP_CHECK(cond, args...)  -> "file:line: Assertion failed: cond. <args streamed>"
//   DCP_FAIL(args...)         -> unreachable / invalid state
//   DCP_REQUIRE(cond, args...)-> user-facing check: the message is only <args> (no file:line),
//                                for errors that name a bad input value.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace dcp {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad user input (CLI flag, file content, scenario key). The harness maps it to exit code 2.
class InputError : public Error {
 public:
  using Error::Error;
};

namespace detail {
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
[[noreturn]] void throw_check(const char* file, int line, const char* cond, const std::string& msg);
[[noreturn]] void throw_fail(const char* file, int line, const std::string& msg);
}  // namespace detail

}  // namespace dcp

#define DCP_CHECK(cond, ...)                                                                 \
  do {                                                                                       \
    if (!(cond)) [[unlikely]]                                                                \
      ::dcp::detail::throw_check(__FILE__, __LINE__, #cond, ::dcp::detail::concat(__VA_ARGS__)); \
  } while (0)

#define DCP_FAIL(...) ::dcp::detail::throw_fail(__FILE__, __LINE__, ::dcp::detail::concat(__VA_ARGS__))

#define DCP_REQUIRE(cond, ...)                                                  \
  do {                                                                          \
    if (!(cond)) [[unlikely]]                                                   \
      throw ::dcp::InputError(::dcp::detail::concat(__VA_ARGS__));              \
  } while (0)
